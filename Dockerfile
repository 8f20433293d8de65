# aetnaweb production image: gunicorn serving the Django app, static files
# collected at build time and served by WhiteNoise. compose.yaml runs it as
# the web service and again as the task worker. Not built or run on the
# development machine (no container engine there): see docs/operators.md.
FROM python:3.12-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    AETNAWEB_ENV=production \
    AETNAWEB_DATA_DIR=/data \
    STATIC_ROOT=/app/staticfiles \
    HOST=0.0.0.0 \
    PORT=8000

WORKDIR /app
RUN useradd --system --uid 10001 --home-dir /app aetnaweb \
    && mkdir -p /data \
    && chown aetnaweb /data

# Dependencies first, so a code change does not reinstall them.
COPY pyproject.toml README.md ./
COPY aetnaweb ./aetnaweb
COPY access ./access
COPY jobs ./jobs
COPY audit ./audit
COPY memory ./memory
COPY actions ./actions
COPY webhooks ./webhooks
# Editable: settings find templates/ and static/ next to the packages.
RUN pip install --no-cache-dir -e .

COPY manage.py ./
COPY templates ./templates
COPY static ./static
COPY tools ./tools

# A throwaway key just for this build step: the real one comes at run time
# (SECRET_KEY or SECRET_KEY_FILE) and is never baked into the image.
RUN SECRET_KEY=collectstatic-only-not-a-real-key ALLOWED_HOSTS=localhost \
    python manage.py collectstatic --noinput --verbosity 0

USER aetnaweb
EXPOSE 8000
CMD ["gunicorn", "--config", "python:aetnaweb.gunicorn_conf", "aetnaweb.wsgi"]
