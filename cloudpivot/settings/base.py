"""CloudPivot settings. Everything comes from environment variables with safe defaults.

No variables at all → the embedded default: SQLite under var/, django-q2's ORM broker,
an in-process channel layer. DATABASE_URL → PostgreSQL; REDIS_URL → channels_redis and
django-q2's Redis broker. See .env.example for every variable.
"""

from __future__ import annotations

import secrets
from pathlib import Path

from cloudpivot.env import env, envsecret
from cloudpivot.secret_box import derived_dev_key as _derived_secrets_key
from cloudpivot.social_env import providers_from_env

BASE_DIR = Path(__file__).resolve().parent.parent.parent
VAR_DIR = Path(env.str("CLOUDPIVOT_VAR_DIR", default=str(BASE_DIR / "var")))


def _private(path: Path, mode: int) -> None:
    """var/ holds the secret key, the database and task state: only this user may look (docs/security.md).

    Tasks on the `local` cloud may run as another user (CLOUDPIVOT_RUN_AS); they must not read these.
    """
    try:
        path.chmod(mode)
    except PermissionError:  # not ours (a shared directory someone chose): leave it as its owner set it
        pass


VAR_DIR.mkdir(parents=True, exist_ok=True, mode=0o700)
_private(VAR_DIR, 0o700)


def _local_secret_key() -> str:
    """A random key kept in var/ so the embedded default needs no configuration and stays stable across restarts."""
    path = VAR_DIR / "secret_key"
    if not path.exists():
        path.touch(mode=0o600)
        path.write_text(secrets.token_urlsafe(50))
    return path.read_text().strip()


SECRET_KEY = envsecret("DJANGO_SECRET_KEY") or _local_secret_key()
# Project secrets are encrypted at rest with these Fernet keys (comma-separated; the first encrypts, all decrypt).
# The embedded default derives one from SECRET_KEY; the production settings require it (docs/security.md).
CLOUDPIVOT_SECRETS_KEY = envsecret("CLOUDPIVOT_SECRETS_KEY") or _derived_secrets_key(SECRET_KEY)
DEBUG = env.bool("DJANGO_DEBUG", default=False)
ALLOWED_HOSTS = env.list("DJANGO_ALLOWED_HOSTS", default=["127.0.0.1", "localhost", "[::1]"])
CSRF_TRUSTED_ORIGINS = env.list("DJANGO_CSRF_TRUSTED_ORIGINS", default=[])

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "cloudpivot.workers",  # before django_q: its `qcluster` command (a bounded stop) is the one that runs
    "django_q",
    "channels",
    "django_htmx",
    "allauth",
    "allauth.account",
    "allauth.socialaccount",
    "allauth.socialaccount.providers.openid_connect",
    "allauth.socialaccount.providers.github",
    "allauth.socialaccount.providers.gitlab",
    "allauth.socialaccount.providers.gitea",
    "cloudpivot.accounts",
    "clusters",
    "tasks",
    "resources",
    "orphans",
    "notifications",
    "tasksets",
    "runner_api",
    "results",
    "usage",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "cloudpivot.security.ContentSecurityPolicyMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "allauth.account.middleware.AccountMiddleware",
    "cloudpivot.accounts.audit.AuditMiddleware",
]
# Shorter stacks for callers that carry their own credential (cloudpivot/handlers.py chooses by path):
# the Runner API and /healthz (host agents, VM Runners, probes) need no cookies, pages or audit of reads;
# the REST API with `Authorization: Bearer` needs no session, CSRF (no cookie to forge), messages, allauth
# or htmx. Every member is async-capable, so a request hops to a thread only for its view.
MACHINE_MIDDLEWARE = ["django.middleware.security.SecurityMiddleware"]
TOKEN_API_MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "cloudpivot.security.ContentSecurityPolicyMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "cloudpivot.accounts.audit.AuditMiddleware",
]
# First in every stack: while the database is away, 503 with Retry-After instead of a 500 (cloudpivot/unavailable.py).
for _stack in (MIDDLEWARE, MACHINE_MIDDLEWARE, TOKEN_API_MIDDLEWARE):
    _stack.insert(0, "cloudpivot.unavailable.DatabaseUnavailableMiddleware")

# Scripts, styles, images and connections (websockets included) only from this server; never framed.
CONTENT_SECURITY_POLICY = env.str(
    "CLOUDPIVOT_CONTENT_SECURITY_POLICY",
    default="default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "object-src 'none'; base-uri 'self'; frame-ancestors 'none'",
)
_DOCS_POLICY = (  # Swagger UI and Redoc start from inline scripts; Redoc runs a worker from a blob
    "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; worker-src 'self' blob:; "
    "img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'self'; frame-ancestors 'none'"
)
CONTENT_SECURITY_POLICY_OVERRIDES = {"/api/docs/": _DOCS_POLICY, "/api/redoc/": _DOCS_POLICY}

ROOT_URLCONF = "cloudpivot.urls"
ASGI_APPLICATION = "cloudpivot.asgi.application"
WSGI_APPLICATION = "cloudpivot.wsgi.application"

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

# ---------------------------------------------------------------- database
# SQLite: WAL lets readers and the single writer overlap; IMMEDIATE transactions take the
# write lock up front, so two writers queue on the busy timeout instead of failing midway.
SQLITE_PATH = VAR_DIR / "cloudpivot.sqlite3"
DATABASES = {"default": env.db("DATABASE_URL", default=f"sqlite:///{SQLITE_PATH}")}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3" and DATABASES["default"]["NAME"] != ":memory:":
    # SQLite gives its -wal and -shm files the database file's mode, so 0600 here covers all three.
    _database = Path(DATABASES["default"]["NAME"])
    if _database.parent.is_dir():
        _database.touch(mode=0o600)
        for _file in (_database, Path(f"{_database}-wal"), Path(f"{_database}-shm")):
            if _file.exists():
                _private(_file, 0o600)
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    DATABASES["default"]["OPTIONS"] = {
        "timeout": 30,
        "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
    # Opening a connection parses the whole schema (~1.7 ms of CPU): a thread that lives on keeps its own.
    # A request thread of the ASGI handler ends with its request, and its connection is closed with it.
    DATABASES["default"]["CONN_MAX_AGE"] = None
elif DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # Under Daphne every request runs in a thread of its own; without a pool each one opens (and
    # closes) a connection, which is slow and, under load, exhausts the server's max_connections.
    DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
        "min_size": env.int("CLOUDPIVOT_DB_POOL_MIN", default=1),
        "max_size": env.int("CLOUDPIVOT_DB_POOL_MAX", default=10),
        "timeout": env.float("CLOUDPIVOT_DB_POOL_TIMEOUT", default=30.0),
    }
USING_SQLITE = DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

# ---------------------------------------------------------------- static files (WhiteNoise, no CDN)
STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
# An image collects them at build time, outside the writable var/ (deploy/container/Containerfile).
STATIC_ROOT = Path(env.str("CLOUDPIVOT_STATIC_ROOT", default=str(VAR_DIR / "staticfiles")))
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}

# ---------------------------------------------------------------- Redis (optional)
REDIS_URL = env.str("REDIS_URL", default="")
# Redis is only a doorbell, a job queue and a cache: when it is away no request may wait long for it.
# A dead address answers at once; an address that swallows packets is given up after a second.
REDIS_TIMEOUTS = {"socket_connect_timeout": 1, "socket_timeout": 5}

# ---------------------------------------------------------------- cache
# Shared by all processes in the scale-out mode, so allauth's login rate limits hold across them.
if REDIS_URL:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": REDIS_URL,
            "OPTIONS": {"socket_connect_timeout": 1, "socket_timeout": 1},
            "KEY_PREFIX": "cloudpivot",
        }
    }

# ---------------------------------------------------------------- Channels
# The channel layer is only a doorbell ("something new at seq N"); the database is the record.
if REDIS_URL:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels_redis.core.RedisChannelLayer", "CONFIG": {"hosts": [REDIS_URL]}}}
else:
    # channels' in-memory layer, ringable from the doorbell sender's thread (cloudpivot/channel_layer.py).
    CHANNEL_LAYERS = {"default": {"BACKEND": "cloudpivot.channel_layer.InProcessChannelLayer"}}

# ---------------------------------------------------------------- django-q2
# Rule from django-q2's docs: `timeout` must be shorter than `retry`, or a slow job runs twice at once.
# The ticker job (tasks.jobs.tick) runs for TICKER_SECONDS, so timeout leaves room for it.
TICKER_SECONDS = env.int("CLOUDPIVOT_TICKER_SECONDS", default=55)
# The ticker's threads for the clouds' calls, one connection's batch each (tasks/services/connection_work.py):
# up to this many slow clouds at once hold up no other. Each holds a database connection while it works (and a
# start its claim's renewal another): keep it well under CLOUDPIVOT_DB_POOL_MAX.
RECONCILE_WORKERS = env.int("CLOUDPIVOT_RECONCILE_WORKERS", default=4)
# How long a ticker at the end of its minute waits for its batches still in flight (inside the job's timeout).
RECONCILE_DRAIN_SECONDS = env.float("CLOUDPIVOT_RECONCILE_DRAIN_SECONDS", default=20.0)
# How long a stopping qcluster waits for its jobs in hand (the ticker's is the longest) before it kills what is
# left of its processes (cloudpivot/workers/stop.py); under the service units' TimeoutStopSec=120.
WORKER_STOP_SECONDS = env.float("CLOUDPIVOT_WORKER_STOP_SECONDS", default=TICKER_SECONDS + 20)
Q_CLUSTER = {
    "name": env.str("CLOUDPIVOT_QUEUE_NAME", default="cloudpivot"),
    # 2 on the embedded default: SQLite takes one writer at a time anyway, and each worker is a Django process
    # (about 25 MB): the idle installation stays under 300 MB (docs/benchmarks.md, idle memory).
    "workers": env.int("CLOUDPIVOT_WORKERS", default=2 if USING_SQLITE else 4),
    "timeout": TICKER_SECONDS + 35,
    "retry": TICKER_SECONDS + 65,
    "max_attempts": 3,
    "catch_up": False,
    "save_limit": 500,
    "ack_failures": True,
    # No step of a task is a job any more (issue 11: the agents' syncs and the reconcile pass do them, woken
    # by doorbells), so what is left (the ticker's hand-over, schedules, instance operations, stops) can wait
    # a second. Measured with tests/bench/bench_idle.py: the ORM broker's poll every 0.1 s alone cost 2.8 %
    # of a core on an idle installation (a query and a connection check each time); every 1 s it is 0.3 %.
    # The Redis broker blocks in BLPOP and does not poll. The guard cycle (worker checks, the status)
    # every second instead of every half second halves what the sentinel costs.
    "poll": 1.0,
    "guard_cycle": 1.0,
    "label": "Background jobs",
}
if REDIS_URL:
    Q_CLUSTER["redis"] = (
        REDIS_URL
        + ("&" if "?" in REDIS_URL else "?")
        + "&".join(f"{key}={value}" for key, value in REDIS_TIMEOUTS.items())
    )
else:
    Q_CLUSTER["orm"] = "default"
# An instance Operation's lease (resources/services/lease.py): renewed every third of it while its worker lives;
# once it has run out the per-minute reaper resumes the Operation in another worker (docs/crash-points.md).
INSTANCE_OPERATION_LEASE_SECONDS = env.float("CLOUDPIVOT_OPERATION_LEASE_SECONDS", default=30)

# ---------------------------------------------------------------- REST framework
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "cloudpivot.accounts.authentication.BearerTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    # IsAuthenticated first (401 before anything else); then ?name= with no value is a 400 (cloudpivot/query_params.py)
    "DEFAULT_PERMISSION_CLASSES": [
        "rest_framework.permissions.IsAuthenticated",
        "cloudpivot.query_params.NoEmptyQueryParameters",
    ],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "cloudpivot.api.exception_handler",
    "DEFAULT_RENDERER_CLASSES": [
        "rest_framework.renderers.JSONRenderer",
        "rest_framework.renderers.BrowsableAPIRenderer",
    ],
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
    # per API token, after authentication and permissions (cloudpivot/accounts/throttling.py, API_TOKEN_RATE)
    "DEFAULT_THROTTLE_CLASSES": ["cloudpivot.accounts.throttling.TokenRateThrottle"],
    # JSON within the document limits (cloudpivot/documents.py): deep nesting is a 400, not a RecursionError
    "DEFAULT_PARSER_CLASSES": [
        "cloudpivot.parsers.BoundedJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
}
# Requests per API token (docs/api.md, "Limits"): "<n>/<s|min|h>", counted per fixed window; over it a 429 with
# Retry-After. Empty or 0 lifts the limit. Counted in the cache (shared by every process with Redis).
API_TOKEN_RATE = env.str("CLOUDPIVOT_API_TOKEN_RATE", default="1200/min")
# Long-polls of the event feed (`GET /api/v1/events?wait=N`) one user may hold at once per web process; more: 429.
FEED_LONG_POLLS_PER_USER = env.int("CLOUDPIVOT_FEED_LONG_POLLS_PER_USER", default=4)
# The event feed and webhooks (docs/api.md, docs/webhooks.md): how long feed entries are kept, and whether
# webhooks may be delivered to loopback, private or link-local addresses (refused by default: SSRF).
EVENT_FEED_RETENTION_DAYS = env.int("CLOUDPIVOT_EVENT_FEED_RETENTION_DAYS", default=30)
WEBHOOK_ALLOW_PRIVATE_TARGETS = env.bool("CLOUDPIVOT_WEBHOOK_ALLOW_PRIVATE_TARGETS", default=False)

# Email (notifications/mail.py: a task's end, a failed operation, for users who opted in), e.g.
# EMAIL_URL=smtp+tls://user:password@smtp.example.org:587; the site URL makes the links in mails absolute.
vars().update(env.email_url("EMAIL_URL", default="smtp://localhost:25"))
DEFAULT_FROM_EMAIL = env.str("CLOUDPIVOT_MAIL_FROM", default="CloudPivot <cloudpivot@localhost>")
CLOUDPIVOT_SITE_URL = env.str("CLOUDPIVOT_SITE_URL", default="http://127.0.0.1:8000")

SPECTACULAR_SETTINGS = {
    "TITLE": "CloudPivot API",
    "DESCRIPTION": "Batch tasks and cloud resources on Kubernetes and OpenStack.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # Every operation's error answers (cloudpivot/openapi.py); the task document as its own component.
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "cloudpivot.openapi.add_error_responses",
    ],
    "COMPONENT_SPLIT_REQUEST": True,
    # Two models have a `state` field: each its own enum by name.
    "ENUM_NAME_OVERRIDES": {
        "TaskStateEnum": "tasks.choices.TaskState",
        "TaskSetStateEnum": "tasksets.choices.TaskSetState",
    },
    # Bodies are documented as JSON (and YAML where a view takes it); the form parsers serve the browsable API.
    "PARSER_WHITELIST": ["cloudpivot.parsers.BoundedJSONParser", "cloudpivot.parsers.YAMLParser"],
}

# ---------------------------------------------------------------- allauth
# Local accounts (username/password) suit small installs; with CLOUDPIVOT_LOCAL_ACCOUNTS=false people log in
# through a provider only, and a superuser's password works at /admin/login/ alone (docs/auth.md).
CLOUDPIVOT_LOCAL_ACCOUNTS = env.bool("CLOUDPIVOT_LOCAL_ACCOUNTS", default=True)
# Whether people may create their own local account on the login page (closed by default in production).
CLOUDPIVOT_SIGNUP_OPEN = env.bool("CLOUDPIVOT_SIGNUP_OPEN", default=True)
# The backends read CLOUDPIVOT_LOCAL_ACCOUNTS on each attempt (cloudpivot/accounts/backends.py).
AUTHENTICATION_BACKENDS = [
    "cloudpivot.accounts.backends.LocalPasswordBackend",
    "cloudpivot.accounts.backends.AccountBackend",
]
ACCOUNT_LOGIN_METHODS = {"username", "email"}
ACCOUNT_SIGNUP_FIELDS = ["email*", "username*", "password1*", "password2*"]
ACCOUNT_EMAIL_VERIFICATION = "none"
ACCOUNT_ADAPTER = "cloudpivot.accounts.adapters.AccountAdapter"
ACCOUNT_FORMS = {"login": "cloudpivot.accounts.forms.LoginForm"}
LOGIN_REDIRECT_URL = "/"
LOGIN_URL = "/accounts/login/"
# OAuth/OIDC providers: from the environment (cloudpivot/social_env.py) and/or the admin's "Social applications".
SOCIALACCOUNT_PROVIDERS = providers_from_env(envsecret)
SOCIALACCOUNT_ADAPTER = "cloudpivot.accounts.adapters.SocialAccountAdapter"
# A provider's user never takes over a local account by matching email; they sign up as a new user.
SOCIALACCOUNT_EMAIL_AUTHENTICATION = False
SOCIALACCOUNT_STORE_TOKENS = False
# OIDC group claim → project roles, applied on every OpenID Connect login (cloudpivot/accounts/group_sync.py):
# JSON {"<group>": {"<project slug>": "reader"|"submitter"|"admin"}, ...}. Empty: memberships are left alone.
CLOUDPIVOT_OIDC_GROUP_MAP = env.str("CLOUDPIVOT_OIDC_GROUP_MAP", default="")
CLOUDPIVOT_OIDC_GROUPS_CLAIM = env.str("CLOUDPIVOT_OIDC_GROUPS_CLAIM", default="groups")
# Whose group claims count: the OpenID Connect apps (their provider ids) trusted to say who is in which group.
# Default: the provider configured from the environment. An issuer that lets users make their own groups
# (a public GitLab, say) must not be listed, or its users could name themselves into a mapped group.
CLOUDPIVOT_OIDC_GROUP_PROVIDERS = env.list(
    "CLOUDPIVOT_OIDC_GROUP_PROVIDERS", default=[env.str("CLOUDPIVOT_OIDC_ID", default="") or "oidc"]
)

# ---------------------------------------------------------------- CloudPivot
# Where the local backend keeps one state directory per attempt (Runner outbox, program output).
RUNS_DIR = Path(env.str("CLOUDPIVOT_RUNS_DIR", default=str(VAR_DIR / "runs")))
# Declared outputs of `local` attempts (docs/data.md): the directory store, one directory per attempt. The host
# agent writes here (the server host is the execution host), the download view reads from here.
RESULTS_DIR = Path(env.str("CLOUDPIVOT_RESULTS_DIR", default=str(VAR_DIR / "results")))
# How long a minted download link of an output works (seconds).
RESULTS_LINK_SECONDS = env.int("CLOUDPIVOT_RESULTS_LINK_SECONDS", default=3600)
# An object store's upload URL (Swift) is signed for the task's time limit plus this long: the time its host
# program has to upload the outputs once the program ended, retrying through an outage of the store.
RESULTS_UPLOAD_SECONDS = env.int("CLOUDPIVOT_RESULTS_UPLOAD_SECONDS", default=6 * 3600)
# The installation's Ed25519 key that signs provenance bundles (docs/data.md, "Provenance"): made on first use,
# mode 0600; its public half is served at /api/v1/provenance/key.
PROVENANCE_KEY_FILE = Path(env.str("CLOUDPIVOT_PROVENANCE_KEY_FILE", default=str(VAR_DIR / "provenance-ed25519.pem")))
# Cloud connections read credential and CA files only under this directory (docs/security.md).
CREDENTIALS_DIR = Path(env.str("CLOUDPIVOT_CREDENTIALS_DIR", default=str(VAR_DIR / "credentials")))
# The URL Runners use to reach this server; for the local backend, this host.
RUNNER_SERVER_URL = env.str("CLOUDPIVOT_RUNNER_SERVER_URL", default=f"http://127.0.0.1:{env.int('PORT', 8000)}")
# The URL this host's agents (the `local` backend) use: `manage.py serve` gives them a web process of their own
# on a port of their own (docs/decisions.md, "The agents' web process"); empty: RUNNER_SERVER_URL.
AGENT_SERVER_URL = env.str("CLOUDPIVOT_AGENT_SERVER_URL", default="")
# true (the default): the bearer-token REST API through Django's WSGI handler in one thread hop under the ASGI
# server, on the threads of cloudpivot/db_threads.py that keep their database connection (cloudpivot/wsgi_bridge.py;
# docs/decisions.md, "Threads that keep their database connection"); false: through Django's ASGI handler.
TOKEN_API_WSGI = env.bool("CLOUDPIVOT_TOKEN_API_WSGI", default=True)
DB_THREADS = env.int("CLOUDPIVOT_DB_THREADS", default=4)  # per web process: cloudpivot/db_threads.py
# The host agents' syncs run on threads of their own, which no user's request can take (issue 34, item 1).
AGENT_DB_THREADS = env.int("CLOUDPIVOT_AGENT_DB_THREADS", default=2)
RUNNER_HEARTBEAT_SECONDS = env.float("CLOUDPIVOT_RUNNER_HEARTBEAT_SECONDS", default=1.0)
# Silence longer than this from a Runner makes its task UNKNOWN (never a silent re-run).
RUNNER_HEARTBEAT_DEADLINE_SECONDS = env.float("CLOUDPIVOT_RUNNER_HEARTBEAT_DEADLINE_SECONDS", default=60.0)
# A gone Runner (or host agent) is started again at most this often per attempt; then the attempt FAILS.
RUNNER_RELAUNCH_LIMIT = env.int("CLOUDPIVOT_RUNNER_RELAUNCH_LIMIT", default=3)
# Events kept per attempt: a program reporting progress without end fills the task's history no further
# (its later progress reports are acknowledged, counted in the seq, and not stored; the log keeps its output).
RUNNER_EVENTS_KEPT_PER_ATTEMPT = env.int("CLOUDPIVOT_RUNNER_EVENTS_KEPT_PER_ATTEMPT", default=1000)
# Overload is shed, not queued (cloudpivot/shedding.py, docs/operations.md): per web process, at most this many
# requests at once (0: no bound), at most this many waiting for a place, each at most this long; beyond, 503
# with Retry-After at once. The probes and the long-polls are not counted.
WEB_MAX_IN_FLIGHT = env.int("CLOUDPIVOT_WEB_MAX_IN_FLIGHT", default=32)
WEB_MAX_QUEUED = env.int("CLOUDPIVOT_WEB_MAX_QUEUED", default=64)
WEB_QUEUE_WAIT_SECONDS = env.float("CLOUDPIVOT_WEB_QUEUE_WAIT_SECONDS", default=5.0)
STOP_GRACE_SECONDS = env.float("CLOUDPIVOT_STOP_GRACE_SECONDS", default=5.0)
# After a stop request, how long the Runner gets to stop the program before the backend stops it.
STOP_WINDOW_SECONDS = env.float("CLOUDPIVOT_STOP_WINDOW_SECONDS", default=15.0)
LOG_MAX_BYTES_PER_TASK = env.int("CLOUDPIVOT_LOG_MAX_BYTES_PER_TASK", default=100 * 1024 * 1024)
# The largest Runner or host agent request body (runner_api/limits.py: a sync carries up to 4 MiB of log bytes).
RUNNER_MAX_REQUEST_BYTES = env.int("CLOUDPIVOT_RUNNER_MAX_REQUEST_BYTES", default=8 * 1024 * 1024)
SPEC_MAX_BYTES = env.int("CLOUDPIVOT_SPEC_MAX_BYTES", default=256 * 1024)
# Task sets (docs/sets.md): the most elements one set may have, and how many of a set's elements wait as PENDING
# Tasks at most (made per reconcile pass as admission takes them); the rest wait in the set row alone.
TASK_SET_MAX_ELEMENTS = env.int("CLOUDPIVOT_TASK_SET_MAX_ELEMENTS", default=100_000)
TASK_SET_AHEAD = env.int("CLOUDPIVOT_TASK_SET_AHEAD", default=100)
# A set body may hold many items: its own size limit, above the task document's.
TASK_SET_MAX_BYTES = env.int("CLOUDPIVOT_TASK_SET_MAX_BYTES", default=16 * 1024 * 1024)
# Identifies this installation in cloud labels/tags, so two installations never adopt each other's objects.
INSTALLATION_ID = env.str("CLOUDPIVOT_INSTALLATION_ID", default="default")

# ---------------------------------------------------------------- metrics (docs/metrics.md)
# How long samples are kept, per resolution: raw, 15-minute averages, hourly averages.
# Retention (cloudpivot/retention.py): archived to RETENTION_ARCHIVE_DIR, then deleted; 0 keeps for ever.
RETENTION_TASK_DAYS = env.float("CLOUDPIVOT_RETENTION_TASK_DAYS", default=90)
RETENTION_AUDIT_DAYS = env.float("CLOUDPIVOT_RETENTION_AUDIT_DAYS", default=365)
# Audit entries the database did not take (docs/audit.md): counted in /metrics, loaded back with
# `manage.py audit_spill --load`.
AUDIT_SPILL_FILE = Path(env.str("CLOUDPIVOT_AUDIT_SPILL_FILE", default=str(VAR_DIR / "audit-spill.jsonl")))
RETENTION_OPERATION_DAYS = env.float("CLOUDPIVOT_RETENTION_OPERATION_DAYS", default=365)
RETENTION_BOOTSTRAP_SECRET_DAYS = env.float("CLOUDPIVOT_RETENTION_BOOTSTRAP_SECRET_DAYS", default=1)
RETENTION_ARCHIVE_DIR = Path(env.str("CLOUDPIVOT_RETENTION_ARCHIVE_DIR", default=str(VAR_DIR / "archive")))
METRICS_RAW_RETENTION_HOURS = env.float("CLOUDPIVOT_METRICS_RAW_RETENTION_HOURS", default=24)
METRICS_15M_RETENTION_DAYS = env.float("CLOUDPIVOT_METRICS_15M_RETENTION_DAYS", default=30)
METRICS_1H_RETENTION_DAYS = env.float("CLOUDPIVOT_METRICS_1H_RETENTION_DAYS", default=365)
# The longest one cloud's figures may take in a sampling pass; a slower cloud is skipped, the others go on.
METRICS_CLOUD_TIMEOUT_SECONDS = env.float("CLOUDPIVOT_METRICS_CLOUD_TIMEOUT_SECONDS", default=20)
# A bearer token a Prometheus server may scrape /metrics with (empty: only staff users may read it).
METRICS_TOKEN = envsecret("CLOUDPIVOT_METRICS_TOKEN", default="")

# ---------------------------------------------------------------- connection health (clusters/health.py)
# The longest one connection's checks may take; a cloud that answers later is recorded as failing.
CLOUD_HEALTH_TIMEOUT_SECONDS = env.float("CLOUDPIVOT_CLOUD_HEALTH_TIMEOUT_SECONDS", default=30)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env.str("CLOUDPIVOT_LOG_LEVEL", default="INFO")},
    "loggers": {"django.db.backends": {"level": "INFO"}},
}
