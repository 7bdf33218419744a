"use strict";
// One crawl's page: polls /api/crawls/ID every second and redraws.
const crawlId = decodeURIComponent(location.pathname.split("/").pop());
const COLOURS = {
  "crawled": "#2e7d32", "not-html": "#7cb342", "duplicate-content": "#9ccc65", "unchanged": "#66bb6a",
  "sitemap": "#26a69a", "duplicate": "#90a4ae", "disallowed": "#8d6e63",
  "over-budget": "#ffb300", "cancelled": "#5c6bc0", "answered": "#fb8c00", "failed": "#e53935",
};
let chart = null;
let hostOrder = { key: "errors", descending: true };
let lastHosts = [];

function text(id, value) {
  document.getElementById(id).textContent =
    value === null || value === undefined ? "–" : String(value);
}

function duration(seconds) {
  if (seconds === null || seconds === undefined) return null;
  if (seconds < 10) return seconds.toFixed(1) + " s";
  if (seconds < 90) return seconds.toFixed(0) + " s";
  if (seconds < 5400) return (seconds / 60).toFixed(0) + " min";
  return (seconds / 3600).toFixed(1) + " h";
}

function drawChart(data) {
  const element = document.getElementById("chart");
  const series = [data.t, data.pages_per_s, data.errors_per_s];
  element.dataset.points = String(data.t.length);
  if (chart === null) {
    chart = new uPlot({
      width: Math.min(900, window.innerWidth - 60), height: 240,
      scales: { x: { time: false } },
      axes: [{ label: "seconds" }, { label: "per second" }],
      series: [{ label: "s" },
               { label: "pages/s", stroke: "#2e7d32", width: 2 },
               { label: "errors/s", stroke: "#e53935", width: 2 }],
    }, series, element);
  } else {
    chart.setData(series);
  }
}

function drawOutcomes(outcomes) {
  const bar = document.getElementById("outcome-bar");
  const legend = document.getElementById("outcomes");
  const total = Object.values(outcomes).reduce((a, b) => a + b, 0);
  bar.replaceChildren(); legend.replaceChildren();
  for (const [name, count] of Object.entries(outcomes)) {
    if (total > 0 && count > 0) {
      const part = document.createElement("div");
      part.style.width = (100 * count / total) + "%";
      part.style.background = COLOURS[name];
      part.title = name + ": " + count;
      bar.append(part);
    }
    const item = document.createElement("span");
    item.id = "outcome-" + name;
    item.dataset.count = String(count);
    const swatch = document.createElement("i");
    swatch.style.background = COLOURS[name];
    item.append(swatch, name + " " + count);
    legend.append(item);
  }
}

function drawHosts() {
  const { key, descending } = hostOrder;
  const value = (host) => host[key] === null || host[key] === undefined ? -1 : host[key];
  const hosts = [...lastHosts].sort((a, b) => {
    if (key === "host") return descending ? b.host.localeCompare(a.host) : a.host.localeCompare(b.host);
    return descending ? value(b) - value(a) : value(a) - value(b);
  });
  const body = document.querySelector("#hosts tbody");
  body.replaceChildren();
  for (const host of hosts) {
    const row = body.insertRow();
    if (host.errors > 0) row.className = "bad";
    for (const name of ["host", "pages", "errors", "median_ms", "p95_ms", "bytes", "slots_in_use"]) {
      row.insertCell().textContent = host[name] === null || host[name] === undefined ? "–" : String(host[name]);
    }
  }
}

for (const th of document.querySelectorAll("#hosts th")) {
  th.addEventListener("click", () => {
    const key = th.dataset.key;
    hostOrder = { key, descending: hostOrder.key === key ? !hostOrder.descending : key !== "host" };
    drawHosts();
  });
}

function drawFailures(failures) {
  const body = document.querySelector("#failures tbody");
  body.replaceChildren();
  for (const failure of failures) {
    const row = body.insertRow();
    row.insertCell().textContent = failure.url;
    row.insertCell().textContent = failure.error;
  }
}

function say(id, message) {
  const element = document.getElementById(id);
  element.textContent = message || "";
  element.hidden = !message;
}

async function refresh() {
  let answer;
  try {
    answer = await fetch("/api/crawls/" + encodeURIComponent(crawlId));
  } catch (error) {  // the command serving the page stopped
    say("error", "the dashboard does not answer: " + error.message);
    return;
  }
  if (answer.status === 503) { say("error", (await answer.json()).error); return; }
  if (!answer.ok) { say("error", null); text("state", "unknown crawl"); return; }
  say("error", null);
  const crawl = await answer.json();
  say("note", crawl.note);
  document.title = "Crawl " + crawlId + ": " + crawl.state;
  text("crawl-id", crawlId);
  const state = document.getElementById("state");
  state.textContent = crawl.state;
  state.className = "state " + crawl.state.split(" ")[0];
  text("seeds", (crawl.about.seeds || []).join(" ") + (crawl.about.where ? " (" + crawl.about.where + ")" : ""));
  for (const name of ["done", "discovered", "outstanding", "pages", "items", "items_dropped", "errors"]) text(name, crawl[name]);
  text("elapsed", duration(crawl.elapsed_s));
  text("time-left", crawl.time_left);
  text("queued", crawl.queue.queued);
  text("broker", crawl.queue.broker);
  text("workers", crawl.queue.workers);
  text("dead-letters", crawl.dead_letters);
  text("replay", crawl.replay);
  document.getElementById("dead-lettered").hidden = !crawl.replay;
  document.getElementById("failed-locally").hidden = Boolean(crawl.replay);
  const limits = [];
  if (crawl.limits.max_rate) limits.push("--max-rate " + crawl.limits.max_rate + " requests/s per host");
  if (crawl.limits.max_per_host) limits.push("--max-per-host " + crawl.limits.max_per_host + " in flight per host");
  const limitsLine = limits.length ? "Limits: " + limits.join("; ") : "No per-host limit.";
  text("limits", limitsLine + (crawl.limits.render ? " --render: pages loaded in headless Chromium." : ""));
  drawChart(crawl.chart);
  drawOutcomes(crawl.outcomes);
  lastHosts = crawl.hosts;
  drawHosts();
  drawFailures(crawl.failures);
  document.body.dataset.refreshed = String(Date.now());
}

refresh();
setInterval(refresh, 1000);
