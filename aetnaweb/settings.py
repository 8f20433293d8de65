"""aetnaweb settings: one file, driven by the environment.

Environment variables:

- ``AETNAWEB_ENV``: ``development`` (default) or ``production``.
- ``DATABASE_URL``: any URL dj-database-url understands. Default: a SQLite file
  at ``data/aetnaweb.sqlite3`` (WAL mode, immediate transactions).
- ``SECRET_KEY`` (or ``SECRET_KEY_FILE``, a file holding it): required in
  production; in development it is read from ``data/secret_key``, which
  ``make setup`` / ``python -m aetnaweb.instance`` creates (importing these
  settings never writes a file).
- ``DEBUG``: ``1``/``true`` turns debug on. Off unless asked.
- ``ALLOWED_HOSTS``: comma-separated. Default ``127.0.0.1,localhost`` in
  development, nothing in production.
- ``AETNAWEB_APPROVAL_KEY`` / ``AETNAWEB_APPROVAL_KEY_FILE``: the HMAC key that
  signs action approvals (at least 32 bytes). Without one, approval is disabled.
- ``AETNAWEB_CHECKPOINT_KEY_FILE``: the Ed25519 key file that signs checkpoint
  notes (``manage.py audit keygen``). Without one, checkpoints are unsigned.
- ``AETNAWEB_ACTIONS_ROOT``: directory the filesystem adapter is rooted at.
- ``AETNAWEB_TASKS_BACKEND``: ``database`` (default: a ``manage.py db_worker``
  process runs long work) or ``immediate`` (run it inline; tests, one-off scripts).
- ``AETNAWEB_LOGIN_*``: login throttling thresholds (see the Login throttling section).
- ``AETNAWEB_STORE_RECALL_QUERIES``: keep raw recall query text in the
  retrieval log (off by default; never in the audit table).
- ``AETNAWEB_DB_POOL_SIZE`` (PostgreSQL): connections kept in this process's
  pool (default 10; ``0`` turns the pool off and keeps each connection for
  ``AETNAWEB_DB_CONN_MAX_AGE_SECONDS``, default 60);
  ``AETNAWEB_DB_POOL_TIMEOUT_SECONDS``: how long a request waits for one (10).
  On SQLite each thread keeps its connection for
  ``AETNAWEB_DB_CONN_MAX_AGE_SECONDS`` (default 60 in production, 0 in
  development: one per request).
- ``AETNAWEB_SEMANTIC_RECALL``: hybrid recall (full-text + sentence
  embeddings). On by default; ``0`` makes recall purely lexical (no model is
  loaded, no vectors are written).
  ``AETNAWEB_EMBEDDING_PRECISION``: ``int8`` (default: the encoder's matrix
  products run on 8-bit weights with one scale per output column, about 2.5x
  faster, cosine >= 0.98 to the float vectors) or ``float32`` (the exact
  published model).
  ``AETNAWEB_EMBED_THREADS``: threads a large embedding job (a conversation
  import, a reindex batch: 16 texts or more) is split over (default: the CPU
  count, at most 2); every text's vector is the same whatever the count.
- ``AETNAWEB_CORS_ALLOWED_ORIGINS``: comma-separated origins (``https://agent.example``)
  whose browser code may call ``/api/v1/``; empty (the default): no CORS headers.
  ``AETNAWEB_CORS_MAX_AGE_SECONDS``: how long a browser caches a preflight (600).
- ``AETNAWEB_API_RATE_LIMIT_PER_MINUTE``: API requests per token per minute
  (default 600; 0 unlimited; a token's own limit wins).
  ``AETNAWEB_API_RATE_LIMIT_BLOCK``: how many requests a busy token reserves
  per database write in each process (default 16; 1 counts every request).
- ``AETNAWEB_IDEMPOTENCY_TTL_SECONDS``: how long an ``Idempotency-Key``'s first
  answer is replayed (default 86400); ``AETNAWEB_IDEMPOTENCY_IN_FLIGHT_SECONDS``:
  after how long a key still in flight may run again (default 120).
- ``AETNAWEB_EXPORT_DIR``: where audit and subject export files (and erasure certificates) are written (default
  ``<data>/exports``; never a static folder: files download through a checked view).
- ``AETNAWEB_RETENTION_*``: how long the retention run keeps operational rows
  (see docs/operators.md, "Retention"; evidence is never removed).
- ``AETNAWEB_WEBHOOKS_ALLOW_HTTP``: allow ``http://`` webhook URLs and loopback
  targets (local development and tests only; off by default).
  ``AETNAWEB_WEBHOOKS_ALLOWED_PORTS``: ports a webhook URL may name besides 443
  (comma-separated, e.g. ``8443,9443``; default none).
  ``AETNAWEB_WEBHOOKS_TIMEOUT_SECONDS`` (5), ``AETNAWEB_WEBHOOKS_MAX_ATTEMPTS``
  (8) and ``AETNAWEB_WEBHOOKS_BACKOFF_SECONDS`` (30, doubled after each failed
  attempt): how deliveries are sent and retried (docs/webhooks.md).
- ``AETNAWEB_PUBLIC_URL``: this server's address as receivers should link to it
  (``https://aetnaweb.example``); empty: webhook links are paths.

A number that does not parse stops start-up with a sentence naming the variable.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import dj_database_url
from django.core.exceptions import ImproperlyConfigured
from django.utils.csp import CSP

from aetnaweb import instance, sqlite

# Before Django's SQLite backend is imported: every connection uses a current
# SQLite build (FTS5 secure-delete, loadable extensions). See aetnaweb/sqlite.py.
SQLITE_MODULE = sqlite.install()

BASE_DIR = Path(__file__).resolve().parent.parent
DATA_DIR = instance.data_dir()


def env_flag(name: str, default: bool = False) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_int(name: str, default: int, *, minimum: int = 0) -> int:
    """A whole-number variable; a bad value stops start-up with a sentence naming it."""
    value = os.environ.get(name)
    if value is None or not value.strip():
        return default
    try:
        number = int(value.strip())
    except ValueError:
        number = None
    if number is None or number < minimum:
        raise ImproperlyConfigured(
            f"{name} must be a whole number of at least {minimum}, got {value.strip()[:40]!r}"
        )
    return number


def env_list(name: str, default: list[str]) -> list[str]:
    value = os.environ.get(name)
    if value is None:
        return default
    return [item.strip() for item in value.split(",") if item.strip()]


AETNAWEB_ENV = os.environ.get("AETNAWEB_ENV", "development").strip().lower()
if AETNAWEB_ENV not in {"development", "production"}:
    raise ImproperlyConfigured("AETNAWEB_ENV must be 'development' or 'production'.")
PRODUCTION = AETNAWEB_ENV == "production"

DEBUG = env_flag("DEBUG")


def _secret_key() -> str:
    key = os.environ.get("SECRET_KEY", "").strip()
    if key:
        return key
    key_file = os.environ.get("SECRET_KEY_FILE", "").strip()
    try:
        if key_file:
            return instance.read_key_file(Path(key_file), what="SECRET_KEY_FILE")
        if PRODUCTION:
            raise ImproperlyConfigured(
                "SECRET_KEY must be set in production (or SECRET_KEY_FILE naming a file that holds it)."
            )
        return instance.read_key_file(instance.secret_key_path(), what="development SECRET_KEY")
    except instance.MissingInstanceFile as exc:
        raise ImproperlyConfigured(str(exc)) from None


SECRET_KEY = _secret_key()

ALLOWED_HOSTS = env_list(
    "ALLOWED_HOSTS", [] if PRODUCTION else ["127.0.0.1", "localhost", "[::1]", "testserver"]
)
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

# CORS for browser-based agents: off unless origins are listed, and only for the
# token-authenticated API (never the cookie-authenticated dashboard). No
# credentials: agents send a bearer token, so cookies never cross origins.
CORS_ALLOWED_ORIGINS = env_list("AETNAWEB_CORS_ALLOWED_ORIGINS", [])
CORS_URLS_REGEX = r"^/api/v1/.*$"
CORS_ALLOW_CREDENTIALS = False
CORS_ALLOW_METHODS = ("DELETE", "GET", "OPTIONS", "PATCH", "POST", "PUT")
CORS_ALLOW_HEADERS = ("accept", "authorization", "content-type", "idempotency-key")
CORS_EXPOSE_HEADERS = (
    "Retry-After",
    "Idempotent-Replayed",
    "RateLimit-Limit",
    "RateLimit-Remaining",
    "RateLimit-Reset",
)
CORS_PREFLIGHT_MAX_AGE = env_int("AETNAWEB_CORS_MAX_AGE_SECONDS", 600)

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_htmx",
    "django_tasks_db",
    # For its static files only: Swagger UI for the API reference page (/api/docs/).
    "ninja",
    "corsheaders",
    "aetnaweb",
    # Grants, API tokens (their rate limits and idempotency keys) and sign-in lockouts.
    "access",
    "jobs",
    "audit",
    "memory",
    "actions",
    "webhooks",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # Outside the JSON-error middleware so a browser agent can read refusals too;
    # answers preflights before login is required.
    "corsheaders.middleware.CorsMiddleware",
    # Outermost after security: sees every answer, CSRF failures and 405s included.
    "aetnaweb.api.JsonErrorsMiddleware",
    # Serves /static/ from the app process (no separate web server needed);
    # in production run `manage.py collectstatic` first.
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.auth.middleware.LoginRequiredMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django.middleware.csp.ContentSecurityPolicyMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # Outside the idempotency middleware: a replayed answer is counted too and says so.
    "access.ratelimits.RateLimitHeadersMiddleware",
    # Innermost: a replayed API write skips the view but passes every header above.
    "access.idempotency.IdempotencyMiddleware",
]

ROOT_URLCONF = "aetnaweb.urls"
WSGI_APPLICATION = "aetnaweb.wsgi.application"
ASGI_APPLICATION = "aetnaweb.asgi.application"

TEMPLATES = [
    {
        # Output with a lone surrogate (an already-stored bad string) renders
        # as U+FFFD instead of failing the page for good (aetnaweb/text.py).
        "BACKEND": "aetnaweb.text.DisplayableTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.template.context_processors.csp",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "aetnaweb.dashboard.navigation",
            ],
            "builtins": [
                "django_htmx.templatetags.django_htmx",
                "aetnaweb.templatetags.dashboard",  # when, copy_button: on every page
            ],
        },
    }
]

# --- Database -------------------------------------------------------------

DEFAULT_SQLITE_PATH = DATA_DIR / "aetnaweb.sqlite3"
DATABASE_URL = os.environ.get("DATABASE_URL", "").strip() or f"sqlite:///{DEFAULT_SQLITE_PATH}"

# WAL is switched on once per file by aetnaweb.sqlite.use_wal, not here: it
# is a write, and a read-only database file must still serve reads.
SQLITE_INIT_COMMAND = (
    "PRAGMA synchronous=NORMAL;"
    "PRAGMA foreign_keys=ON;"
    "PRAGMA busy_timeout=30000;"
    "PRAGMA temp_store=MEMORY;"
    # The project's backend checkpoints every 32 commits, outside its write
    # queue (aetnaweb/sqlite_backend); SQLite's own, inside a COMMIT, only
    # as a backstop past 8,000 pages (32 MB) of WAL.
    "PRAGMA wal_autocheckpoint=8000;"
    "PRAGMA cache_size=-65536;"
    # Freed space is overwritten with zeros, so a forgotten record's bytes do
    # not linger in free pages or cells (memory-engine "Forget": no residue).
    "PRAGMA secure_delete=ON;"
)


def _database() -> dict[str, Any]:
    config: dict[str, Any] = dict(dj_database_url.parse(DATABASE_URL, conn_max_age=0))
    if config["ENGINE"] == "django.db.backends.sqlite3":
        # Django's SQLite backend with writers queued on a file lock (see its docstring).
        config["ENGINE"] = "aetnaweb.sqlite_backend"
        # Immediate transactions take the write lock at BEGIN, so reading a
        # chain head and appending to it can never interleave with another
        # writer (audit-log-v1: no forks).
        config["OPTIONS"] = {
            "transaction_mode": "IMMEDIATE",
            "init_command": SQLITE_INIT_COMMAND,
            "timeout": 30,
        }
        # In production each server thread keeps its connection for a while:
        # opening one costs ~3.5 ms of CPU in its first request (extension
        # load, pragmas, the schema and every statement prepared again), a
        # third of a request. The development server starts a thread per
        # request, which could never reuse one: there, one per request.
        config["CONN_MAX_AGE"] = env_int(
            "AETNAWEB_DB_CONN_MAX_AGE_SECONDS", 60 if PRODUCTION else 0
        )
        config["CONN_HEALTH_CHECKS"] = True
        # A file, not :memory:, so multi-process tests and the standalone
        # verifiers can open the test database; one per test process so that
        # concurrent runs never share one.
        config["TEST"] = {"NAME": str(DATA_DIR / f"test_aetnaweb_{os.getpid()}.sqlite3")}
    elif config["ENGINE"] == "django.db.backends.postgresql":
        config.setdefault("OPTIONS", {})
        # Reuse connections so many concurrent clients share a few server slots
        # (PostgreSQL's default is 100 in all). With the pool, a request waits
        # up to the timeout for a free connection, then gets a 503 (never a
        # "too many clients" 500); each connection is checked before reuse.
        pool_size = env_int("AETNAWEB_DB_POOL_SIZE", 10)
        if pool_size:
            from psycopg_pool import ConnectionPool

            config["CONN_MAX_AGE"] = 0  # Django: a pool replaces persistent connections
            config["OPTIONS"]["pool"] = {
                "min_size": 1,
                "max_size": pool_size,
                "timeout": env_int("AETNAWEB_DB_POOL_TIMEOUT_SECONDS", 10, minimum=1),
                "check": ConnectionPool.check_connection,
            }
        else:
            config["CONN_MAX_AGE"] = env_int("AETNAWEB_DB_CONN_MAX_AGE_SECONDS", 60)
        config["CONN_HEALTH_CHECKS"] = True
        # Parameters bound on the server, statements prepared after a few
        # runs (aetnaweb/postgresql.py); 0 behind a pooler in transaction mode.
        if env_flag("AETNAWEB_DB_PREPARED_STATEMENTS", default=True):
            from aetnaweb.postgresql import connection_options

            config["OPTIONS"] |= connection_options()
        config["TEST"] = {"NAME": f"test_{config['NAME']}_{os.getpid()}"}
    return config


DATABASES = {"default": _database()}
DATABASE_VENDOR = (
    "postgresql" if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql" else "sqlite"
)
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Background work ------------------------------------------------------

# Long work (verification runs) goes through django.tasks. "database" stores
# each task as a row that `manage.py db_worker` picks up (make serve starts one);
# "immediate" runs it inline in the calling process (make run's single
# runserver process, one-off scripts).
TASK_BACKENDS = {
    "database": "django_tasks_db.DatabaseBackend",
    "immediate": "django.tasks.backends.immediate.ImmediateBackend",
}
AETNAWEB_TASKS_BACKEND = os.environ.get("AETNAWEB_TASKS_BACKEND", "database").strip().lower()
if AETNAWEB_TASKS_BACKEND not in TASK_BACKENDS:
    raise ImproperlyConfigured(
        f"AETNAWEB_TASKS_BACKEND must be one of {', '.join(sorted(TASK_BACKENDS))}."
    )
TASKS = {
    "default": {"BACKEND": TASK_BACKENDS[AETNAWEB_TASKS_BACKEND], "QUEUES": ["default"]},
}

# Export files (audit exports written by a task worker). Created by
# `python -m aetnaweb.instance` or the first export, never at import.
AETNAWEB_EXPORT_DIR = Path(os.environ.get("AETNAWEB_EXPORT_DIR", instance.exports_dir()))

# Retention (aetnaweb/retention.py, `manage.py retention run`): how long
# operational rows are kept. Audit events, checkpoints, receipts and the
# Merkle tree are evidence and are never removed.
AETNAWEB_RETENTION_EXPORT_DAYS = env_int("AETNAWEB_RETENTION_EXPORT_DAYS", 7, minimum=1)
AETNAWEB_RETENTION_TASK_RESULT_DAYS = env_int("AETNAWEB_RETENTION_TASK_RESULT_DAYS", 7, minimum=1)
AETNAWEB_RETENTION_JOB_DAYS = env_int("AETNAWEB_RETENTION_JOB_DAYS", 90, minimum=1)
AETNAWEB_RETENTION_LOGIN_THROTTLE_DAYS = env_int(
    "AETNAWEB_RETENTION_LOGIN_THROTTLE_DAYS", 30, minimum=1
)

# --- Auth -------------------------------------------------------------------

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "login"
# Login throttling (access/lockouts.py): slowed after SLOW_AFTER failures,
# refused for LOCKOUT_SECONDS at the LOCK_AFTER thresholds; per account name
# and per client address.
AETNAWEB_LOGIN_SLOW_AFTER = env_int("AETNAWEB_LOGIN_SLOW_AFTER", 3, minimum=1)
AETNAWEB_LOGIN_ACCOUNT_LOCK_AFTER = env_int("AETNAWEB_LOGIN_ACCOUNT_LOCK_AFTER", 10, minimum=1)
AETNAWEB_LOGIN_ADDRESS_LOCK_AFTER = env_int("AETNAWEB_LOGIN_ADDRESS_LOCK_AFTER", 30, minimum=1)
AETNAWEB_LOGIN_LOCKOUT_SECONDS = env_int("AETNAWEB_LOGIN_LOCKOUT_SECONDS", 900, minimum=1)
AETNAWEB_LOGIN_WINDOW_SECONDS = env_int("AETNAWEB_LOGIN_WINDOW_SECONDS", 3600, minimum=1)
AETNAWEB_LOGIN_MAX_DELAY_SECONDS = env_int("AETNAWEB_LOGIN_MAX_DELAY_SECONDS", 60, minimum=1)
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

# --- i18n / static ----------------------------------------------------------

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = instance.static_root()
# Development serves straight from the source folders; production serves the
# collected files (`manage.py collectstatic`).
# The folder itself is made by `make setup` (development) or collectstatic.
WHITENOISE_USE_FINDERS = not PRODUCTION
WHITENOISE_AUTOREFRESH = DEBUG

# --- Security ---------------------------------------------------------------

SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
CSRF_COOKIE_SAMESITE = "Lax"
X_FRAME_OPTIONS = "DENY"

SECURE_CSP = {
    "default-src": [CSP.SELF],
    "script-src": [CSP.SELF, CSP.NONCE],
    "style-src": [CSP.SELF, CSP.NONCE],
    "img-src": [CSP.SELF, "data:"],
    "connect-src": [CSP.SELF],
    "form-action": [CSP.SELF],
    "frame-ancestors": [CSP.NONE],
    "base-uri": [CSP.SELF],
    "object-src": [CSP.NONE],
}

if PRODUCTION:
    SECURE_SSL_REDIRECT = env_flag("SECURE_SSL_REDIRECT", True)
    # Health checks come from inside the host or the load balancer, over plain HTTP.
    SECURE_REDIRECT_EXEMPT = [r"^healthz$"]
    SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31536000)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

# --- Logging ----------------------------------------------------------------

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
    "loggers": {"django.db.backends": {"level": "WARNING"}},
}

# --- aetnaweb ---------------------------------------------------------------

AETNAWEB_APPROVAL_KEY = os.environ.get("AETNAWEB_APPROVAL_KEY", "")
AETNAWEB_APPROVAL_KEY_FILE = os.environ.get("AETNAWEB_APPROVAL_KEY_FILE", "")
AETNAWEB_APPROVAL_TTL_SECONDS = env_int("AETNAWEB_APPROVAL_TTL_SECONDS", 900, minimum=1)
AETNAWEB_ACTIONS_ROOT = os.environ.get("AETNAWEB_ACTIONS_ROOT", str(DATA_DIR / "actions-root"))
AETNAWEB_STORE_RECALL_QUERIES = env_flag("AETNAWEB_STORE_RECALL_QUERIES")
AETNAWEB_SEMANTIC_RECALL = env_flag("AETNAWEB_SEMANTIC_RECALL", default=True)
AETNAWEB_EMBEDDING_PRECISION = os.environ.get("AETNAWEB_EMBEDDING_PRECISION", "int8").strip()
if AETNAWEB_EMBEDDING_PRECISION not in ("int8", "float32"):
    raise ImproperlyConfigured("AETNAWEB_EMBEDDING_PRECISION must be 'int8' or 'float32'.")
# Threads a large embedding job (a conversation import, a reindex batch) may split over;
# each text's vector is the same whatever the count (memory.vectors.SHARE_FROM).
AETNAWEB_EMBED_THREADS = env_int("AETNAWEB_EMBED_THREADS", min(2, os.cpu_count() or 1), minimum=1)

# The Ed25519 key that signs checkpoint notes (a PRIVATE+KEY+... file made by
# 'manage.py audit keygen'). Without one, checkpoints carry the log head unsigned.
AETNAWEB_CHECKPOINT_KEY_FILE = os.environ.get("AETNAWEB_CHECKPOINT_KEY_FILE", "")
# API tokens: requests per minute unless a token sets its own (0: unlimited).
AETNAWEB_API_RATE_LIMIT_PER_MINUTE = env_int("AETNAWEB_API_RATE_LIMIT_PER_MINUTE", 600)
# Requests a busy token reserves per database write, per process (access/ratelimits.py):
# fewer writes under load; 1 counts every request exactly.
AETNAWEB_API_RATE_LIMIT_BLOCK = env_int("AETNAWEB_API_RATE_LIMIT_BLOCK", 16, minimum=1)

# Webhooks (webhooks/, docs/webhooks.md). http:// and loopback targets only
# when explicitly allowed: a server-side fetch of an operator's URL must not
# reach this machine or its network by default (SSRF).
AETNAWEB_WEBHOOKS_ALLOW_HTTP = env_flag("AETNAWEB_WEBHOOKS_ALLOW_HTTP")
# Ports a webhook URL may name besides the scheme's own (443, or 80 for loopback
# http): an open port list would let an operator's URL probe internal services.
_webhook_ports = env_list("AETNAWEB_WEBHOOKS_ALLOWED_PORTS", [])
if not all(port.isdigit() and 1 <= int(port) <= 65535 for port in _webhook_ports):
    raise ImproperlyConfigured(
        "AETNAWEB_WEBHOOKS_ALLOWED_PORTS must be port numbers (1 to 65535) separated by "
        f"commas, got {','.join(_webhook_ports)[:60]!r}"
    )
AETNAWEB_WEBHOOKS_ALLOWED_PORTS = sorted({int(port) for port in _webhook_ports})
AETNAWEB_WEBHOOKS_TIMEOUT_SECONDS = env_int("AETNAWEB_WEBHOOKS_TIMEOUT_SECONDS", 5, minimum=1)
AETNAWEB_WEBHOOKS_MAX_ATTEMPTS = env_int("AETNAWEB_WEBHOOKS_MAX_ATTEMPTS", 8, minimum=1)
AETNAWEB_WEBHOOKS_BACKOFF_SECONDS = env_int("AETNAWEB_WEBHOOKS_BACKOFF_SECONDS", 30, minimum=0)
AETNAWEB_PUBLIC_URL = os.environ.get("AETNAWEB_PUBLIC_URL", "").strip().rstrip("/")
# Idempotency-Key: how long a first answer is replayed, and after how long a
# request still in flight is taken for a crashed worker's and may run again.
AETNAWEB_IDEMPOTENCY_TTL_SECONDS = env_int("AETNAWEB_IDEMPOTENCY_TTL_SECONDS", 86400, minimum=1)
AETNAWEB_IDEMPOTENCY_IN_FLIGHT_SECONDS = env_int(
    "AETNAWEB_IDEMPOTENCY_IN_FLIGHT_SECONDS", 120, minimum=1
)
AETNAWEB_CHECKPOINT_SINK = os.environ.get(
    "AETNAWEB_CHECKPOINT_SINK", str(DATA_DIR / "checkpoints.jsonl")
)
