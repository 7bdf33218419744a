"use strict";
// The list of recent crawls, each a link to its page; refreshed every 2 seconds.
function cell(row, text) {
  const td = row.insertCell();
  td.textContent = text === undefined || text === null ? "" : String(text);
  return td;
}
async function refresh() {
  const answer = await fetch("/api/crawls");
  const error = document.getElementById("error");
  error.hidden = answer.status !== 503;
  if (answer.status === 503) { error.textContent = (await answer.json()).error; return; }
  const crawls = await answer.json();
  const body = document.querySelector("#crawls tbody");
  body.replaceChildren();
  for (const crawl of crawls) {
    const row = body.insertRow();
    const link = document.createElement("a");
    link.href = "/crawl/" + encodeURIComponent(crawl.crawl_id);
    link.textContent = crawl.crawl_id;
    row.insertCell().append(link);
    cell(row, crawl.where);
    cell(row, (crawl.seeds || []).join(" "));
    const f = crawl.figures || {};
    cell(row, f.state); cell(row, f.pages); cell(row, f.discovered);
    cell(row, f.outstanding); cell(row, f.failed);
  }
  document.getElementById("none").hidden = crawls.length > 0;
}
refresh();
setInterval(refresh, 2000);
