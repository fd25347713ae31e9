"""Settings, all from environment variables.

With no variables at all this is a working development site: SQLite in
``var/db.sqlite3`` and Celery tasks run in-process. Production sets
``DEBUG=False``, ``SECRET_KEY``, ``ALLOWED_HOSTS``, ``DATABASE_URL`` and
``CELERY_BROKER_URL``. Malformed values stop the process with a message that
names the variable, rather than running with a silently wrong setting.
"""

from __future__ import annotations

import os
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from web.security import DEFAULT_CSP

BASE_DIR = Path(__file__).resolve().parent.parent

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}
_DEV_SECRET = "dev-only-insecure-secret-key-do-not-use-in-production"


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name}={raw!r} is not a boolean; use one of true/false/1/0/yes/no/on/off")


def env_int(name: str, default: int, *, minimum: int | None = None) -> int:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not a whole number") from None
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name}={raw!r} must be at least {minimum}")
    return value


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None:
        return default
    items = [part.strip() for part in raw.split(",")]
    if any(item == "" for item in items):
        raise ImproperlyConfigured(f"{name}={raw!r} has an empty entry; separate values with single commas")
    return items


def database_config(url: str | None, *, base_dir: Path) -> dict:
    """The DATABASES['default'] entry for a DATABASE_URL (None = embedded SQLite)."""
    if not url:
        return sqlite_config(base_dir / "var" / "db.sqlite3")
    if url.startswith("sqlite:"):
        parsed = dj_database_url.parse(url)
        return sqlite_config(Path(parsed["NAME"]))
    if not url.startswith(("postgres://", "postgresql://")):
        raise ImproperlyConfigured(
            f"DATABASE_URL={url!r}: only postgres://... or sqlite:///... are supported"
        )
    try:
        config = dj_database_url.parse(url, conn_max_age=60, conn_health_checks=True)
    except ValueError as exc:
        raise ImproperlyConfigured(f"DATABASE_URL={url!r} is malformed: {exc}") from None
    if not config.get("NAME"):
        raise ImproperlyConfigured(f"DATABASE_URL={url!r} names no database")
    # A participant waiting on a dead database should see a "please retry" page fast.
    config.setdefault("OPTIONS", {})["connect_timeout"] = env_int("DATABASE_CONNECT_TIMEOUT", 5, minimum=1)
    # No JIT compilation: the app's queries are short, and a plan whose cost is overestimated (statistics not
    # yet caught up with a study just loaded or a launch's first thousand entrants) would spend tens of
    # milliseconds compiling a query that runs in two (measured on an entry, issue 25).
    config["OPTIONS"]["options"] = "-c jit=off"
    # The participant pages' few statements are prepared on the server, once per connection
    # (web.prepared_queries); Django's own cursors bind on the client and never prepare.
    if env_bool("DATABASE_PREPARED_STATEMENTS", True):
        config["OPTIONS"]["prepare_threshold"] = 0
    return config


def sqlite_config(path: Path) -> dict:
    # WAL lets readers run beside one writer; IMMEDIATE takes the write lock at
    # BEGIN so two gunicorn workers queue on the busy timeout instead of failing
    # with "database is locked" when both upgrade a read lock.
    path.parent.mkdir(parents=True, exist_ok=True)
    return {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": str(path),
        "OPTIONS": {
            "timeout": 30,
            "transaction_mode": "IMMEDIATE",
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA busy_timeout=30000;",
        },
        "TEST": {"NAME": str(path.with_name("test_db.sqlite3"))},
    }


DEBUG = env_bool("DEBUG", True)
SECRET_KEY = os.environ.get("SECRET_KEY", "")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured("SECRET_KEY must be set when DEBUG is false")
    SECRET_KEY = _DEV_SECRET
elif not DEBUG and (SECRET_KEY == _DEV_SECRET or len(SECRET_KEY) < 32):
    raise ImproperlyConfigured("SECRET_KEY is too short or is the development key; use 50 random characters")

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "testserver"] if DEBUG else [])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])
SITE_URL = os.environ.get("SITE_URL", "http://127.0.0.1:8000").rstrip("/")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_otp",
    "django_otp.plugins.otp_totp",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "web",
    "surveys",
    "analysis",
    "prolific",
    "bots",
    "audit",
    "judges",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "web.security.ContentSecurityPolicyMiddleware",
    "web.caching.NoStoreMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "web.sessions.SessionRefreshMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django_otp.middleware.OTPMiddleware",
    "web.two_factor.RequireTwoFactorMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "web.errors.DatabaseUnavailableMiddleware",
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {"default": database_config(os.environ.get("DATABASE_URL"), base_dir=BASE_DIR)}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]

# Researcher pages are in English; participant pages speak their study's "language", one of
# LANGUAGES: only languages whose translation (locale/) ships complete are listed.
LANGUAGE_CODE = "en"
LANGUAGES = [("en", "English"), ("zh-hans", "简体中文")]
LOCALE_PATHS = [BASE_DIR / "locale"]
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "/static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = BASE_DIR / "staticfiles"
# whitenoise warns on every start when the collectstatic target does not exist yet.
STATIC_ROOT.mkdir(exist_ok=True)
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"
        if DEBUG
        else "whitenoise.storage.CompressedManifestStaticFilesStorage"
    },
}

LOGIN_URL = "/accounts/login/"
# Two-factor sign-in (web/two_factor.py): optional per account; true requires it of every researcher.
TWO_FACTOR_REQUIRED = env_bool("TWO_FACTOR_REQUIRED", False)
# The issuer authenticator apps show beside the code.
OTP_TOTP_ISSUER = os.environ.get("OTP_TOTP_ISSUER", "Human evaluation")
LOGIN_REDIRECT_URL = "/studies/"
# Signing out lands on our sign-in page, not on the admin's "Logged out".
LOGOUT_REDIRECT_URL = LOGIN_URL

# Participants may take a long break; 60 minutes of inactivity is the floor.
SESSION_COOKIE_AGE = env_int("SESSION_COOKIE_AGE", 4 * 60 * 60, minimum=60 * 60)
# Django's database sessions, read by a statement compiled once per process: web/session_store.py.
SESSION_ENGINE = "web.session_store"
# Sliding expiry without a write per request: web/sessions.py.
SESSION_SAVE_EVERY_REQUEST = False
SESSION_REFRESH_SECONDS = env_int("SESSION_REFRESH_SECONDS", 5 * 60, minimum=0)
SESSION_COOKIE_HTTPONLY = True
# Open links (surveys/open_links.py): new anonymous participants per address and study per hour.
OPEN_LINK_STARTS_PER_HOUR = env_int("OPEN_LINK_STARTS_PER_HOUR", 30, minimum=1)
CSRF_COOKIE_HTTPONLY = True
SESSION_COOKIE_SECURE = env_bool("SECURE_COOKIES", not DEBUG)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
# Production answers http with a redirect to https (set false only where no TLS
# exists at all, e.g. the load tests on 127.0.0.1); the health probe stays on http.
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", not DEBUG)
SECURE_REDIRECT_EXEMPT = [r"^healthz$"]
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 0 if DEBUG else 31536000, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", True)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", False)
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
if env_bool("BEHIND_TLS_PROXY", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

DATA_UPLOAD_MAX_NUMBER_FIELDS = 400
DATA_UPLOAD_MAX_MEMORY_SIZE = 5 * 1024 * 1024
FILE_UPLOAD_MAX_MEMORY_SIZE = 5 * 1024 * 1024

# Celery: no broker means tasks run in-process, so the embedded default needs
# no extra service. Only JSON crosses the wire.
CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL", "")
if CELERY_BROKER_URL and not CELERY_BROKER_URL.startswith(("redis://", "rediss://", "amqp://", "filesystem://")):
    raise ImproperlyConfigured(
        f"CELERY_BROKER_URL={CELERY_BROKER_URL!r}: use redis://host:port/db (or filesystem:// for one machine)")
CELERY_TASK_ALWAYS_EAGER = not CELERY_BROKER_URL
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_TIME_LIMIT = env_int("CELERY_TASK_TIME_LIMIT", 30 * 60, minimum=10)
CELERY_TASK_SOFT_TIME_LIMIT = CELERY_TASK_TIME_LIMIT - 5
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# A worker waits for the broker as long as it is away, however often it goes away
# (Celery's default gives up after 100 tries, and the worker exits).
CELERY_BROKER_CONNECTION_RETRY = True
CELERY_BROKER_CONNECTION_MAX_RETRIES = None
# A task running when the broker goes away finishes: its tables land in the
# database, which is the join of a run's tasks, not the broker.
CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS = False
# Seconds a request may wait on the broker to send a run's task before the run is
# left queued for beat's pass (a hung broker must not hang the researcher's page).
RUN_PUBLISH_TIMEOUT_SECONDS = 0.5
# How long a running analysis attempt owns its run before another delivery may take over.
ANALYSIS_RUN_LEASE_SECONDS = env_int("ANALYSIS_RUN_LEASE_SECONDS", CELERY_TASK_TIME_LIMIT + 30, minimum=5)
# Enqueueing must not hang a request while the broker is down: one immediate retry
# (kombu waits interval_start seconds before it, 2 by default), then the run stays
# queued and is sent again when a worker reconnects.
CELERY_BROKER_TRANSPORT_OPTIONS = {"socket_connect_timeout": 2, "socket_timeout": 5, "max_retries": 1,
                                   "interval_start": 0}
if CELERY_BROKER_URL.startswith("filesystem://"):
    # The embedded default's broker (bin/run): message files in a folder, no server; the
    # worker bin/run starts reads them, so no run is computed inside a web request.
    CELERY_FILESYSTEM_FOLDER = Path(os.environ.get("CELERY_FILESYSTEM_FOLDER", BASE_DIR / "var" / "celery-queue"))
    CELERY_FILESYSTEM_FOLDER.mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(CELERY_FILESYSTEM_FOLDER), "data_folder_out": str(CELERY_FILESYSTEM_FOLDER),
        "control_folder": str(CELERY_FILESYSTEM_FOLDER / "control"), "store_processed": False,
        # kombu looks for new message files once a second by default, which a researcher waited for at every
        # hop of a run (run, then its parts); a folder listing every 50 ms costs an idle worker next to nothing.
        "polling_interval": env_int("CELERY_FILESYSTEM_POLLING_MS", 50, minimum=10) / 1000,
    }
    # The filesystem transport has no fan-out for remote control; the worker must not ask for it.
    CELERY_WORKER_ENABLE_REMOTE_CONTROL = False
# A run whose workers died this many times is failed with a message instead of retried again.
ANALYSIS_RUN_MAX_ATTEMPTS = env_int("ANALYSIS_RUN_MAX_ATTEMPTS", 3, minimum=1)
# Celery beat (``celery worker -B`` in bin/run and bin/serve-production, or ``celery
# beat``) sends again runs and parts whose message was lost, and runs whose worker died.
ANALYSIS_REQUEUE_SECONDS = env_int("ANALYSIS_REQUEUE_SECONDS", 15, minimum=1)
CELERY_BEAT_SCHEDULE = {
    "requeue-stale-runs": {"task": "analysis.requeue_stale_runs", "schedule": float(ANALYSIS_REQUEUE_SECONDS)},
    # Ended sign-in, open-link and API counters (web.ratelimit) would otherwise stay in their table.
    "purge-rate-counters": {"task": "web.purge_rate_counters", "schedule": 3600.0},
    # Panel identifiers of closed studies past their retention time become pseudonyms (surveys.retention).
    "apply-retention": {"task": "surveys.apply_retention", "schedule": 3600.0},
}

# Prolific's API (prolific/). The token is read here only: never stored, never logged.
PROLIFIC_API_TOKEN = os.environ.get("PROLIFIC_API_TOKEN", "")
PROLIFIC_API_URL = os.environ.get("PROLIFIC_API_URL", "https://api.prolific.com")
PROLIFIC_API_TIMEOUT = env_int("PROLIFIC_API_TIMEOUT", 20, minimum=1)
PROLIFIC_WORKSPACE_ID = os.environ.get("PROLIFIC_WORKSPACE_ID", "")

# The LLM judges' OpenAI-compatible endpoint (judges/). The key is read here only: never stored, never logged.
JUDGE_API_URL = os.environ.get("JUDGE_API_URL", "http://127.0.0.1:8001/v1")
JUDGE_API_KEY = os.environ.get("JUDGE_API_KEY", "")
JUDGE_MODEL = os.environ.get("JUDGE_MODEL", "")
JUDGE_API_TIMEOUT = env_int("JUDGE_API_TIMEOUT", 60, minimum=1)
JUDGE_RETRIES = env_int("JUDGE_RETRIES", 3, minimum=0)
# Price per 1000 tokens (prompt, completion), in the cost cap's unit (e.g. USD).
JUDGE_PRICE_PROMPT_PER_1K = float(os.environ.get("JUDGE_PRICE_PROMPT_PER_1K", "0"))
JUDGE_PRICE_COMPLETION_PER_1K = float(os.environ.get("JUDGE_PRICE_COMPLETION_PER_1K", "0"))
PROLIFIC_SYNC_SECONDS = env_int("PROLIFIC_SYNC_SECONDS", 300, minimum=30)
# Without a token the sync pass does nothing.
CELERY_BEAT_SCHEDULE["prolific-sync-submissions"] = {
    "task": "prolific.sync_submissions", "schedule": float(PROLIFIC_SYNC_SECONDS)}

# The slow analyses (mixed and ordinal models, Plackett-Luce bootstrap) fit on a
# documented subsample; their tables say so in their note column.
ANALYSIS_MODEL_MAX_ROWS = env_int("ANALYSIS_MODEL_MAX_ROWS", 20_000, minimum=100)
ANALYSIS_BOOTSTRAP_SAMPLES = env_int("ANALYSIS_BOOTSTRAP_SAMPLES", 200, minimum=10)
# The part tasks of a run read its frames from a file here (analysis.running.fanout); a part
# on a machine without the file rebuilds them from the database.
ANALYSIS_FRAME_CACHE_DIR = Path(os.environ.get("ANALYSIS_FRAME_CACHE_DIR", BASE_DIR / "var" / "run-frames"))
# Where a run's parts are computed (analysis.running.runs.parts_computed_here): "broker" sends each to any
# worker; "here" has the run's own process fork ANALYSIS_PROCESSES processes (default: the cores) and compute
# them side by side; "auto" is "here" when every worker is on this machine (no broker, or filesystem://).
ANALYSIS_PARTS = os.environ.get("ANALYSIS_PARTS", "auto")
if ANALYSIS_PARTS not in ("auto", "broker", "here"):
    raise ImproperlyConfigured(f"ANALYSIS_PARTS={ANALYSIS_PARTS!r}: use auto, broker or here")
ANALYSIS_PROCESSES = env_int("ANALYSIS_PROCESSES", os.cpu_count() or 1, minimum=1)
# Exports streaming at once on this machine (analysis.exporting.slots); 0 = no limit. Each one keeps a web
# worker and most of a core busy for seconds: the participants' pages need the rest.
EXPORT_CONCURRENCY = env_int("EXPORT_CONCURRENCY", 1, minimum=0)
EXPORT_SLOTS_DIR = Path(os.environ.get("EXPORT_SLOTS_DIR", BASE_DIR / "var" / "export-slots"))

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
        "rest_framework.authentication.TokenAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PAGINATION_CLASS": "web.pagination.OnePageNumberPagination",
    "PAGE_SIZE": 100,
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_THROTTLE_CLASSES": ["web.throttles.UserRateThrottle"],
    "DEFAULT_THROTTLE_RATES": {"user": os.environ.get("API_THROTTLE_RATE", "2000/hour")},
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Human evaluation of chatbot responses API",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # Swagger UI from our own static files: the site must work with no internet.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # Without deep links an operation's path is plain text: a link inside the button that opens
    # the operation is a control in a control (axe nested-interactive) and a target under 24 px.
    "SWAGGER_UI_SETTINGS": {"deepLinking": False},
    # Runs and participants both have a "status"; name their enums apart.
    "ENUM_NAME_OVERRIDES": {
        "RunStatusEnum": "analysis.models.AnalysisRun.Status",
        "ParticipantStatusEnum": "surveys.models.Participant.Status",
    },
    # Django's slug converter (a study's slug in the URL); anything else matches no URL (404).
    "PATH_CONVERTER_OVERRIDES": {"slug": {"type": "string", "pattern": "^[-a-zA-Z0-9_]+$"}},
}

# Sign-in, open-link and API throttle counters (web.ratelimit) must be shared by
# every worker process: they live in Redis when the default cache is Redis
# (REDIS_CACHE_URL), else in the database (web.RateCounter). The database cache's
# table is created by migration web.0001.
CACHES = {"default": {"BACKEND": "django.core.cache.backends.db.DatabaseCache", "LOCATION": "web_cache"}}
REDIS_CACHE_URL = os.environ.get("REDIS_CACHE_URL", "")
if REDIS_CACHE_URL:
    CACHES["default"] = {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_CACHE_URL}

CONTENT_SECURITY_POLICY = os.environ.get("CONTENT_SECURITY_POLICY", DEFAULT_CSP)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"mask_ids": {"()": "web.security.MaskParticipantIdsFilter"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "filters": ["mask_ids"]}},
    "loggers": {
        "django.server": {"handlers": ["console"], "level": "INFO", "propagate": False},
        "gunicorn.access": {"handlers": ["console"], "filters": ["mask_ids"], "level": "INFO", "propagate": False},
        "gunicorn.error": {"handlers": ["console"], "filters": ["mask_ids"], "level": "INFO", "propagate": False},
    },
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
}
