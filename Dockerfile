# One image for every Trawl process: web (gunicorn), crawl and ops workers, beat, Flower. docker-compose.yml runs it.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app

# Dependencies before code, so an edit to the code does not reinstall them.
COPY requirements.txt .
RUN pip install -r requirements.txt

# Only what runs, never the working tree's .venv, var/ or tests. Add a new package here too (tests check it).
COPY manage.py celeryconfig.py flowerconfig.py ./
COPY project/ project/
COPY access/ access/
COPY registry/ registry/
COPY crawls/ crawls/
COPY runtime/ runtime/
COPY scrapyd/ scrapyd/
COPY sources/ sources/
COPY throttling/ throttling/
COPY items/ items/
COPY callbacks/ callbacks/
COPY ops/ ops/
COPY catalog/ catalog/
COPY demo/ demo/
COPY templates/ templates/

# Static files are baked into the image and served by WhiteNoise; a throwaway key is enough for collectstatic.
RUN SECRET_KEY=collectstatic-only python manage.py collectstatic --noinput \
    && useradd --system --uid 10001 --user-group --create-home --home-dir /home/trawl trawl \
    && mkdir -p /app/var \
    && chown trawl:trawl /app/var

# Crawls run third-party spider code: never as root.
USER trawl

EXPOSE 8000 5555
CMD ["gunicorn", "project.wsgi:application", "--bind", "0.0.0.0:8000"]
