# The crawler's image: `dramatiq crawler.example` by default; the seeder runs from it too:
#   docker compose run --rm worker python -m crawler.example https://example.com
FROM python:3.11-slim
WORKDIR /app
COPY requirements.txt ./
RUN pip install --no-cache-dir -r requirements.txt
COPY pyproject.toml README.md ./
COPY crawler ./crawler
RUN pip install --no-cache-dir --no-deps .
USER nobody
CMD ["dramatiq", "crawler.example"]
