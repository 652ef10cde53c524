"""Django settings, read from ``MAASCP_*`` environment variables (see docs/settings.md).

Two modes:

* ``embedded`` (default): SQLite under the data folder, a broker that needs no server (kombu's
  filesystem transport), encrypted secrets rows in the database with a key generated into the
  data folder on first run. Nothing needs installing.
* ``production``: PostgreSQL, Redis, and Vault (or an explicit secrets key). Every production
  setting that is missing or malformed is reported at start-up, all at once.
"""

from __future__ import annotations

import ipaddress
import os
import re
import secrets
import tempfile
from pathlib import Path
from urllib.parse import urlsplit

import django_stubs_ext
from cryptography.fernet import Fernet
from redis.backoff import NoBackoff
from redis.retry import Retry

from config.env import Env, database_from_url, generated_once

django_stubs_ext.monkeypatch()  # ModelAdmin[...], ModelChoiceField[...] at run time (typing)
BASE_DIR = Path(__file__).resolve().parent.parent
env = Env()

MODE = env.choice("ENV", "embedded", ("embedded", "production"))
PRODUCTION = MODE == "production"
DATA_DIR = Path(env.string("DATA_DIR", str(BASE_DIR / "var")) or "var").resolve()


SECRET_KEY = env.string("SECRET_KEY", required=PRODUCTION) or (
    ""
    if PRODUCTION
    else generated_once(DATA_DIR / "django-secret-key", lambda: secrets.token_urlsafe(50))
)
# Production refuses a key anyone could guess: shorter than 50 characters, fewer than 16
# different ones ("x" * 50), Django's insecure development prefix, or a placeholder word from an
# example (compose shipped "change-me-to-50-random-characters-...": it passed). Make one with
# `python -c 'import secrets; print(secrets.token_urlsafe(50))'` (deploy/make-secrets does).
PLACEHOLDER_WORDS = ("change-me", "changeme", "change_me", "placeholder", "example", "insecure")
if PRODUCTION and SECRET_KEY:
    _lowered = SECRET_KEY.lower()
    if (
        len(SECRET_KEY) < 50
        or len(set(SECRET_KEY)) < 16
        or any(word in _lowered for word in PLACEHOLDER_WORDS)
    ):
        env.errors.append(
            "MAASCP_SECRET_KEY is guessable (under 50 characters, under 16 different ones, or a "
            "placeholder): use 50 or more random characters"
        )
DEBUG = env.flag("DEBUG", default=False)
if PRODUCTION and DEBUG:  # tracebacks with settings and local values in every error page
    env.errors.append("MAASCP_DEBUG may not be true in production mode")
ALLOWED_HOSTS = env.items(
    "ALLOWED_HOSTS", [] if PRODUCTION else ["localhost", "127.0.0.1", "[::1]"]
)
if PRODUCTION and not ALLOWED_HOSTS:
    env.errors.append("MAASCP_ALLOWED_HOSTS is required in production mode")
CSRF_TRUSTED_ORIGINS = env.items("CSRF_TRUSTED_ORIGINS", [])

# --- database -------------------------------------------------------------------------------
_db_url = env.url(
    "DATABASE_URL",
    f"sqlite:///{DATA_DIR / 'maascp.sqlite3'}",
    schemes=("postgresql", "postgres") if PRODUCTION else ("postgresql", "postgres", "sqlite"),
    required=PRODUCTION,
)
DATABASES = {"default": database_from_url(_db_url or "sqlite:///:memory:")}
# passwords shipped as examples or defaults (compose shipped maascp/maascp): refused in production
KNOWN_PASSWORDS = frozenset(
    {"maascp", "postgres", "redis", "password", "secret", "admin", "change-me", "changeme"}
)


def _known_password(url: str | None) -> bool:
    password = urlsplit(url or "").password
    return password is not None and (
        password.lower() in KNOWN_PASSWORDS
        or any(word in password.lower() for word in PLACEHOLDER_WORDS)
    )


if PRODUCTION and _known_password(_db_url):
    env.errors.append(
        "MAASCP_DATABASE_URL holds a well-known password (a shipped example): set a random one"
    )
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Celery ----------------------------------------------------------------------------------
# Reasoning for each value is in docs/architecture.md ("At-least-once work").
CELERY_TASK_TIME_LIMIT = env.integer("TASK_TIME_LIMIT", 300, minimum=10)
CELERY_TASK_SOFT_TIME_LIMIT = max(CELERY_TASK_TIME_LIMIT - 30, 5)
# The longest countdown any task schedules itself with (polling MAAS by rescheduling).
MAX_TASK_COUNTDOWN = env.integer("MAX_TASK_COUNTDOWN", 300, minimum=1)
VISIBILITY_TIMEOUT = env.integer("VISIBILITY_TIMEOUT", 3 * 3600, minimum=60)
if max(CELERY_TASK_TIME_LIMIT, MAX_TASK_COUNTDOWN) >= VISIBILITY_TIMEOUT:
    env.errors.append(
        "MAASCP_VISIBILITY_TIMEOUT must be larger than MAASCP_TASK_TIME_LIMIT and "
        "MAASCP_MAX_TASK_COUNTDOWN, or Redis redelivers work that is still running"
    )

_broker_dir = DATA_DIR / "broker"
CELERY_BROKER_URL = env.url(
    "BROKER_URL",
    "filesystem://",
    schemes=("redis", "rediss") if PRODUCTION else ("redis", "rediss", "filesystem"),
    required=PRODUCTION,
)
if PRODUCTION and _known_password(CELERY_BROKER_URL):
    env.errors.append(
        "MAASCP_BROKER_URL holds a well-known password (a shipped example): set a random one"
    )
if (CELERY_BROKER_URL or "").startswith("filesystem"):
    for sub in ("queue", "processed", "control"):
        (_broker_dir / sub).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS: dict[str, object] = {
        "data_folder_in": str(_broker_dir / "queue"),
        "data_folder_out": str(_broker_dir / "queue"),
        "processed_folder": str(_broker_dir / "processed"),
        "control_folder": str(_broker_dir / "control"),
        "store_processed": False,
        # A worker whose prefetch is full finds the folder "empty" and sleeps this long
        # (kombu's default: 1 s), which capped the embedded broker at about two hand-offs a
        # second per worker; a tenth of a second costs a directory listing per tick.
        "polling_interval": 0.1,
    }
    _default_results = f"file://{DATA_DIR / 'results'}"
    (DATA_DIR / "results").mkdir(parents=True, exist_ok=True)
else:
    CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": VISIBILITY_TIMEOUT}
    _default_results = CELERY_BROKER_URL or ""
CELERY_RESULT_BACKEND = env.string("RESULT_BACKEND", _default_results)
CELERY_RESULT_BACKEND_TRANSPORT_OPTIONS = {"visibility_timeout": VISIBILITY_TIMEOUT}
CELERY_RESULT_EXPIRES = 24 * 3600
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS = True
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_TRACK_STARTED = True
# Workflow tasks report through the database; only tasks that ask for it store a result.
CELERY_TASK_IGNORE_RESULT = True
# Workers keep the JSON log format of LOGGING instead of Celery's own root handler.
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
CELERY_TASK_ALWAYS_EAGER = False
# Celery's Django fix-up closes the database connection after every task unless this is set;
# maas_domain/celery_signals.py recycles connections the way Django does for requests instead
# (CONN_MAX_AGE, health checks), so a worker keeps its connection across tasks.
CELERY_DB_REUSE_MAX = 1_000_000_000
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
# Regions (docs/operations.md, "Regions"): tasks that talk to a site's MAAS go to its region's
# queue (maas_domain/regions.py); the default region and every central task use this queue,
# Celery's default, which a worker started without -Q consumes.
CELERY_TASK_DEFAULT_QUEUE = "celery"
CELERY_TASK_ROUTES = ("maas_domain.regions.route",)
# Every worker writes a heartbeat naming its queues this often (it expires after three), which
# is how /health/ready, the metrics and the site page know a region has no live worker.
WORKER_HEARTBEAT_SECONDS = env.integer("WORKER_HEARTBEAT_SECONDS", 10, minimum=1)
# Modules whose Celery tasks live beside the code they run (workers import them at start).
CELERY_IMPORTS = (
    "maas_domain.events",
    "workflows.step",
    "workflows.scheduling",
    "reconciliation.services",
    "maas_domain.retention",
    "maas_domain.services.probe",
)
# Workflow engine (docs/architecture.md, "Workflows"): how long an execution owns a workflow
# between heartbeats, how long a dispatched-but-unclaimed step may sit before the sweep sends it
# again, how often the sweep runs, and when repeated deaths or transient errors end a stage.
WORKFLOW_LEASE_SECONDS = env.integer("WORKFLOW_LEASE_SECONDS", 90, minimum=2)
WORKFLOW_DISPATCH_GRACE_SECONDS = env.integer("WORKFLOW_DISPATCH_GRACE_SECONDS", 120, minimum=1)
WORKFLOW_SWEEP_SECONDS = env.integer("WORKFLOW_SWEEP_SECONDS", 10, minimum=1)
WORKFLOW_MAX_LOST_LEASES = env.integer("WORKFLOW_MAX_LOST_LEASES", 3, minimum=1)
WORKFLOW_MAX_STAGE_TRIES = env.integer("WORKFLOW_MAX_STAGE_TRIES", 8, minimum=1)
# Stages that finish at once run one after another in the same execution for up to this long
# (one claim, one short transaction per stage); then the next stage is handed off as usual.
WORKFLOW_CHAIN_SECONDS = env.integer("WORKFLOW_CHAIN_SECONDS", 60, minimum=0)
if WORKFLOW_CHAIN_SECONDS * 2 > CELERY_TASK_SOFT_TIME_LIMIT:
    env.errors.append(
        "MAASCP_WORKFLOW_CHAIN_SECONDS must be at most half of the task soft time limit "
        "(MAASCP_TASK_TIME_LIMIT - 30): a chain must end well before the task is cut off"
    )
# Reconciliation (docs/reconciliation.md). Its schedule is the `reconciliation-dispatch`
# periodic task in the database (admin: Periodic tasks), created once by a migration, so
# operators change it without a deploy; these only bound how runs behave.
RECONCILE_MIN_GAP_SECONDS = env.integer("RECONCILE_MIN_GAP_SECONDS", 30, minimum=0)
RECONCILE_STALE_SECONDS = env.integer("RECONCILE_STALE_SECONDS", 900, minimum=60)
RECONCILE_STUCK_GRACE_SECONDS = env.integer("RECONCILE_STUCK_GRACE_SECONDS", 60, minimum=0)
# Retention (docs/settings.md, maas_domain/retention.py): ages after which bookkeeping rows are
# pruned by the hourly `retention.prune` beat task; 0 keeps that kind forever.
RETENTION_IDEMPOTENCY_HOURS = env.integer("RETENTION_IDEMPOTENCY_HOURS", 24, minimum=0)
RETENTION_OUTBOX_DAYS = env.integer("RETENTION_OUTBOX_DAYS", 7, minimum=0)
RETENTION_RECONCILE_RUN_DAYS = env.integer("RETENTION_RECONCILE_RUN_DAYS", 30, minimum=0)
# History: archived to ARCHIVE_DIR as JSON lines, then pruned (docs/operations.md, "Retention").
RETENTION_TIMELINE_DAYS = env.integer("RETENTION_TIMELINE_DAYS", 180, minimum=0)
RETENTION_AUDIT_DAYS = env.integer("RETENTION_AUDIT_DAYS", 400, minimum=0)
ARCHIVE_DIR = Path(env.string("ARCHIVE_DIR", str(DATA_DIR / "archive")) or "archive").resolve()
CELERY_BEAT_SCHEDULE = {
    "workflow-sweep": {"task": "workflow.sweep", "schedule": float(WORKFLOW_SWEEP_SECONDS)},
    "events-publish": {"task": "events.publish", "schedule": 5.0},
    "retention-prune": {"task": "retention.prune", "schedule": 3600.0},
}
CELERY_TIMEZONE = "UTC"

# --- secrets backend -------------------------------------------------------------------------
VAULT = {
    "ADDR": env.url("VAULT_ADDR", None, schemes=("http", "https")),
    "TOKEN": env.string("VAULT_TOKEN"),
    "ROLE_ID": env.string("VAULT_ROLE_ID"),
    "SECRET_ID": env.string("VAULT_SECRET_ID"),
    "MOUNT": env.string("VAULT_MOUNT", "secret"),
    "PATH_PREFIX": env.string("VAULT_PATH_PREFIX", "maascp"),
    "NAMESPACE": env.string("VAULT_NAMESPACE"),
    "CACERT": env.string("VAULT_CACERT"),
    "TIMEOUT": env.integer("VAULT_TIMEOUT", 10, minimum=1),
}
if VAULT["ADDR"] and not (VAULT["TOKEN"] or (VAULT["ROLE_ID"] and VAULT["SECRET_ID"])):
    env.errors.append(
        "MAASCP_VAULT_ADDR is set: also set MAASCP_VAULT_TOKEN, or MAASCP_VAULT_ROLE_ID "
        "and MAASCP_VAULT_SECRET_ID for AppRole login"
    )
# Every secret crosses this connection: production refuses plain http to the secrets server
# unless the deployment says so (a server on the same host or a trusted link; docs/settings.md)
VAULT_ALLOW_HTTP = env.flag("VAULT_ALLOW_HTTP", default=False)
if PRODUCTION and str(VAULT["ADDR"] or "").startswith("http:") and not VAULT_ALLOW_HTTP:
    env.errors.append(
        "MAASCP_VAULT_ADDR is plain http: every secret would cross the network in the clear; "
        "use https (MAASCP_VAULT_CACERT for its CA) or set MAASCP_VAULT_ALLOW_HTTP=true"
    )
SECRETS_BACKEND = "vault" if VAULT["ADDR"] else "database"
# Fernet keys for the database backend, newest first (comma-separated allows key rotation).
_secrets_keys = env.items("SECRETS_KEY", [])
if SECRETS_BACKEND == "database" and not _secrets_keys:
    if PRODUCTION:
        env.errors.append(
            "production mode needs a secrets backend: set MAASCP_VAULT_ADDR (preferred) or "
            "MAASCP_SECRETS_KEY (a Fernet key) for encrypted database rows"
        )
    else:
        _secrets_keys = [
            generated_once(DATA_DIR / "secrets.key", lambda: Fernet.generate_key().decode())
        ]
for _key in _secrets_keys:
    try:
        Fernet(str(_key).encode())
    except ValueError:
        env.errors.append("MAASCP_SECRETS_KEY must be url-safe base64 Fernet keys (32 bytes)")
SECRETS_KEYS = _secrets_keys
# How long a process keeps a version of a MAAS API key it read (versions never change; 0: never).
SECRETS_CACHE_SECONDS = env.integer("SECRETS_CACHE_SECONDS", 300, minimum=0)

# --- node-facing side ---------------------------------------------------------------------------
# The control plane as nodes reach it (enrollment, agent bootstrap); a site may override it.
# Required in production: the default is only right for the embedded stack on this machine.
NODE_API_URL = (
    env.url("NODE_API_URL", None, schemes=("http", "https"), required=PRODUCTION)
    or "http://127.0.0.1:8000"
)
NODE_AGENT_VERSION = env.string("NODE_AGENT_VERSION", "1.4.2") or "1.4.2"
if not re.fullmatch(r"[A-Za-z0-9._+-]{1,64}", NODE_AGENT_VERSION):
    env.errors.append("MAASCP_NODE_AGENT_VERSION must be 1-64 characters of [A-Za-z0-9._+-]")
from maas_domain import urlsafety as _urlsafety  # noqa: E402 (plain functions, no models)

try:
    _urlsafety.split(NODE_API_URL)
except ValueError as _exc:
    env.errors.append(f"MAASCP_NODE_API_URL is not usable in a first-boot payload: {_exc}")
else:
    # nodes call this host: a deployment that forgot it in MAASCP_ALLOWED_HOSTS answered every
    # node call 400 (docs/settings.md)
    _node_host = (urlsplit(NODE_API_URL).hostname or "").lower()
    _node_host = f"[{_node_host}]" if ":" in _node_host else _node_host
    if _node_host and _node_host not in ALLOWED_HOSTS and "*" not in ALLOWED_HOSTS:
        ALLOWED_HOSTS.append(_node_host)
# The CA certificates nodes trust to reach NODE_API_URL (the CA that signed its TLS
# certificate), for every site without its own ``ca_bundle_pem`` (docs/settings.md, "Node
# trust"). Embedded: the stack's own CA, generated into the data folder; production: a PEM file,
# or none (then every site must bring its own, and is refused without one).
from maas_domain import pki as _pki  # noqa: E402 (certificate parsing only, no models)

_node_ca_file = env.string("NODE_CA_FILE")
NODE_CA_PEM = ""
if _node_ca_file:
    try:
        NODE_CA_PEM = Path(_node_ca_file).read_text()
    except OSError as _exc:
        env.errors.append(f"MAASCP_NODE_CA_FILE cannot be read: {_exc.strerror}")
    else:
        if _bad_ca := _pki.ca_bundle_error(NODE_CA_PEM) or (
            "" if NODE_CA_PEM.strip() else "the file is empty"
        ):
            env.errors.append(f"MAASCP_NODE_CA_FILE: {_bad_ca}")
            NODE_CA_PEM = ""
elif not PRODUCTION:
    _ca_path = DATA_DIR / "node-ca.pem"
    if not _ca_path.exists() or _pki.ca_bundle_error(_ca_path.read_text()):
        DATA_DIR.mkdir(parents=True, exist_ok=True)
        _ca_tmp = _ca_path.with_name(f".node-ca.{os.getpid()}")  # processes may race here
        _ca_tmp.write_text(_pki.self_signed_ca("maascp embedded node CA", days=3650))
        os.replace(_ca_tmp, _ca_path)
    NODE_CA_PEM = _ca_path.read_text()
# Hosts nodes may fetch first-boot content from (the site bootstrap bundle, the node-agent
# bootstrap), for sites without their own list; the NODE_API_URL host is always allowed.
# Entries: host names, addresses or *.domain (docs/security.md).
PAYLOAD_ALLOWED_HOSTS = [h.lower() for h in env.items("PAYLOAD_ALLOWED_HOSTS", [])]
if _bad_host := _urlsafety.hosts_error(PAYLOAD_ALLOWED_HOSTS):
    env.errors.append(f"MAASCP_PAYLOAD_ALLOWED_HOSTS: {_bad_host}")
# Link-local and cloud metadata addresses (169.254.0.0/16, fe80::/10, ...) are refused as MAAS,
# bundle and agent targets unless this is set (a lab whose MAAS really lives there).
ALLOW_LINK_LOCAL_TARGETS = env.flag("ALLOW_LINK_LOCAL_TARGETS", default=False)
# API tokens always expire: the default lifetime and the longest allowed (days).
API_TOKEN_DAYS = env.integer("API_TOKEN_DAYS", 90, minimum=1)
API_TOKEN_MAX_DAYS = env.integer("API_TOKEN_MAX_DAYS", 365, minimum=1)
if API_TOKEN_DAYS > API_TOKEN_MAX_DAYS:
    env.errors.append("MAASCP_API_TOKEN_DAYS must not exceed MAASCP_API_TOKEN_MAX_DAYS")
# Limits on every door (maas_domain/throttling.py, docs/security.md).
API_MUTATIONS_PER_MINUTE = env.integer("API_MUTATIONS_PER_MINUTE", 120, minimum=1)
# The buffering proxy in front of the listeners (docs/operations.md): requests from these
# addresses carry the client's address in X-Forwarded-For (maas_domain/throttling.py).
TRUSTED_PROXIES: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = ()
for _proxy in env.items("TRUSTED_PROXIES", []):
    try:
        TRUSTED_PROXIES += (ipaddress.ip_network(_proxy, strict=False),)
    except ValueError:
        env.errors.append(f"MAASCP_TRUSTED_PROXIES: {_proxy!r} is not an address or network")
NODE_REQUESTS_PER_MINUTE = env.integer("NODE_REQUESTS_PER_MINUTE", 600, minimum=1)
NODE_REFUSALS_PER_MINUTE = env.integer("NODE_REFUSALS_PER_MINUTE", 20, minimum=1)
# MAAS diagnostics fetched on request (?diagnostics=refresh, the admin's node and workflow pages)
# per token or user; a machine is fetched at most once per 10 s whoever asks
# (maas_domain/diagnostics.py)
DIAGNOSTICS_REFRESHES_PER_MINUTE = env.integer("DIAGNOSTICS_REFRESHES_PER_MINUTE", 20, minimum=1)
NODE_REFUSAL_EVENTS = env.integer("NODE_REFUSAL_EVENTS", 10, minimum=1)
ADMIN_LOGIN_FAILURES = env.integer("ADMIN_LOGIN_FAILURES", 5, minimum=1)
ADMIN_LOGIN_FAILURES_PER_ADDRESS = env.integer("ADMIN_LOGIN_FAILURES_PER_ADDRESS", 20, minimum=1)
# Serve the node-facing routes only on their own listener (config/wsgi_node.py): the main one
# (API + admin) then has none of them, so node networks need reach only the node listener.
SEPARATE_NODE_LISTENER = env.flag("SEPARATE_NODE_LISTENER", default=False)
# A site probe older than this does not satisfy the onboarding guardrail.
PROBE_MAX_AGE_SECONDS = env.integer("PROBE_MAX_AGE_SECONDS", 3600, minimum=60)

# --- domain events (outbox) ---------------------------------------------------------------------
_default_sink = "redis" if (CELERY_BROKER_URL or "").startswith("redis") else "log"
EVENT_SINK = env.choice("EVENT_SINK", _default_sink, ("redis", "webhook", "log"))
EVENT_REDIS_URL = env.url(
    "EVENT_REDIS_URL",
    CELERY_BROKER_URL if _default_sink == "redis" else None,
    schemes=("redis", "rediss"),
)
EVENT_STREAM = env.string("EVENT_STREAM", "maascp.events") or "maascp.events"
EVENT_WEBHOOK_URL = env.url("EVENT_WEBHOOK_URL", None, schemes=("http", "https"))
if EVENT_SINK == "webhook" and not EVENT_WEBHOOK_URL:
    env.errors.append("MAASCP_EVENT_SINK=webhook needs MAASCP_EVENT_WEBHOOK_URL")
if EVENT_SINK == "redis" and not EVENT_REDIS_URL:
    env.errors.append("MAASCP_EVENT_SINK=redis needs MAASCP_EVENT_REDIS_URL (or a Redis broker)")

# --- MAAS client defaults ----------------------------------------------------------------------
MAAS_CONNECT_TIMEOUT = float(env.integer("MAAS_CONNECT_TIMEOUT", 5, minimum=1))
MAAS_READ_TIMEOUT = float(env.integer("MAAS_READ_TIMEOUT", 30, minimum=1))
# A probe answers an operator waiting at a screen: it gives up on a slow MAAS much sooner.
MAAS_PROBE_TIMEOUT = float(env.integer("MAAS_PROBE_TIMEOUT", 10, minimum=1))
# Every MAAS request has an overall deadline (body included) and a body cap; a redirect is never
# followed (docs/security.md). 10,000 machines list in ~71 MB.
MAAS_REQUEST_DEADLINE = float(env.integer("MAAS_REQUEST_DEADLINE", 120, minimum=5))
MAAS_MAX_RESPONSE_BYTES = env.integer("MAAS_MAX_RESPONSE_MB", 256, minimum=1) << 20

# --- metrics and log shipping (docs/observability.md) -------------------------------------------
# Event metrics go to per-process files in this directory (prometheus_client multiprocess mode);
# the admin scrape endpoint merges the files of every process sharing it. Production defaults to
# a directory local to the host/container; the embedded processes share the data folder's.
METRICS_DIR = Path(
    env.string(
        "METRICS_DIR",
        str(Path(tempfile.gettempdir()) / "maascp-metrics" if PRODUCTION else DATA_DIR / "metrics"),
    )
    or "metrics"
).resolve()
try:
    METRICS_DIR.mkdir(parents=True, exist_ok=True)
except OSError as exc:
    env.errors.append(f"MAASCP_METRICS_DIR={METRICS_DIR} cannot be created: {exc.strerror}")
# Must be set before prometheus_client is first imported (it picks multiprocess mode then).
os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(METRICS_DIR)
# A worker with a port serves its own metrics there (a private directory, wiped at its start).
WORKER_METRICS_PORT = env.integer("WORKER_METRICS_PORT", 0, minimum=0)
WORKER_METRICS_ADDR = env.string("WORKER_METRICS_ADDR", "0.0.0.0") or "0.0.0.0"  # noqa: S104
# Optional direct push of the JSON log lines to Loki (besides stdout), batched in a thread.
LOKI_URL = env.url("LOKI_URL", None, schemes=("http", "https"))
LOKI_TENANT = env.string("LOKI_TENANT")
LOKI_LABELS: dict[str, str] = {}
for _pair in env.items("LOKI_LABELS", []):
    _name, _, _value = _pair.partition("=")
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", _name.strip()) or not _value.strip():
        env.errors.append(
            f"MAASCP_LOKI_LABELS: {_pair!r} is not name=value (names: letters, digits, _)"
        )
        continue
    LOKI_LABELS[_name.strip()] = _value.strip()

# --- cache (rate-limit counters; shared by every web process in production) ---------------------
_cache_url = env.url(
    "CACHE_URL",
    CELERY_BROKER_URL if (CELERY_BROKER_URL or "").startswith("redis") else None,
    schemes=("redis", "rediss"),
)
CACHES: dict[str, dict[str, object]] = {
    "default": (
        {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": _cache_url,
            "KEY_PREFIX": "maascp",
            # Redis down or hung is a 503 within seconds (maas_domain/throttling.py), never a
            # request held for ever; one retry on a fresh connection after a Redis restart
            "OPTIONS": {
                "socket_connect_timeout": 2,
                "socket_timeout": 2,
                "retry": Retry(NoBackoff(), 1),
            },
        }
        if _cache_url
        else {
            "BACKEND": "django.core.cache.backends.filebased.FileBasedCache",
            "LOCATION": str(DATA_DIR / "cache"),
        }
    )
}

# --- Django ----------------------------------------------------------------------------------
INSTALLED_APPS = [
    "maas_domain.admin_apps.ControlPlaneAdminConfig",  # django.contrib.admin with a throttled login
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI and Redoc assets, served as static files (no CDN)
    "django_celery_beat",
    "maas_domain",
    "workflows",
    "onboarding",
    "decommission",
    "reconciliation",
    "repair",
]
if not PRODUCTION:
    # Development tools: the MAAS simulator (`manage.py simulate_maas`) and the embedded runner
    # with its demo (`manage.py run_embedded`). Production settings and the image leave them out.
    INSTALLED_APPS += ["maas_simulator", "devtools"]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "csp.middleware.CSPMiddleware",  # CONTENT_SECURITY_POLICY below
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "maas_domain.middleware.CorrelationIdMiddleware",
    "maas_domain.api.body.BodyGuardMiddleware",
    "maas_domain.middleware.ListenerMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # last: undeclared query parameters are refused, dry runs rehearsed (docs/api.md)
    "maas_domain.api.query.QueryMiddleware",
]

ROOT_URLCONF = "config.urls"
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
WSGI_APPLICATION = "config.wsgi.application"
ASGI_APPLICATION = "config.asgi.application"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]

# Every answer carries a Content-Security-Policy (django-csp; docs/security.md, T20): scripts,
# frames, forms and connections from this origin only, so a value an operator or MAAS wrote that
# slipped past escaping still runs nothing. Inline style attributes stay allowed (Django's admin
# and Redoc set them); no page of ours has an inline script (maas_domain/static/maascp/).
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'", "'unsafe-inline'"],
        "img-src": ["'self'", "data:"],
        "font-src": ["'self'", "data:"],
        "connect-src": ["'self'"],
        "worker-src": ["'self'", "blob:"],  # Redoc's worker
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    }
}

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = Path(env.string("STATIC_ROOT", str(DATA_DIR / "static")) or "static")
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
WHITENOISE_USE_FINDERS = not PRODUCTION
if not PRODUCTION:
    STATIC_ROOT.mkdir(parents=True, exist_ok=True)

SESSION_COOKIE_SECURE = env.flag("SECURE_COOKIES", default=PRODUCTION)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
# Behind a TLS-terminating proxy (docs/operations.md): trust its X-Forwarded-Proto, tell
# browsers to use https only, and send plain-http visitors there.
TLS_TERMINATED = env.flag("TLS_TERMINATED", default=False)
if TLS_TERMINATED:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_SSL_REDIRECT = True
    SECURE_REDIRECT_EXEMPT = [r"^health/", r"^api/v1/node/"]  # probes and nodes on the inside
    SECURE_HSTS_SECONDS = env.integer("HSTS_SECONDS", 31536000, minimum=0)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = False
    SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = True
SECURE_CONTENT_TYPE_NOSNIFF = True

CSRF_FAILURE_VIEW = "maas_domain.api.exceptions.csrf_failure"
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        # First class decides the WWW-Authenticate header, which makes anonymous calls 401.
        "maas_domain.auth.ApiTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    # Authorization by action class, failing closed (maas_domain/access.py, docs/security.md).
    "DEFAULT_PERMISSION_CLASSES": ["maas_domain.access.ActionPermission"],
    "DEFAULT_PARSER_CLASSES": ["maas_domain.api.body.StrictJSONParser"],
    "DEFAULT_RENDERER_CLASSES": [
        "rest_framework.renderers.JSONRenderer",
        "rest_framework.renderers.BrowsableAPIRenderer",
    ],
    "DEFAULT_PAGINATION_CLASS": "maas_domain.api.pagination.Pagination",
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "EXCEPTION_HANDLER": "maas_domain.api.exceptions.exception_handler",
    "DEFAULT_SCHEMA_CLASS": "maas_domain.api.schema.AutoSchema",
    "DEFAULT_THROTTLE_CLASSES": ["maas_domain.throttling.MutationThrottle"],
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
}

# The OpenAPI document (docs/api.md, "OpenAPI"); docs/openapi.yaml is generated from it.
SPECTACULAR_SETTINGS = {
    "TITLE": "MAAS control plane API",
    "DESCRIPTION": (
        "Onboard, reimage and decommission machines through MAAS: sites, profiles, SKUs, nodes, "
        "allocations, workflows and their recovery verbs, reconciliation. Every error has the "
        "same body (`Error`). See docs/api.md in the repository."
    ),
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["maas_domain.access.ActionPermission"],  # the read role, as every GET
    "SCHEMA_PATH_PREFIX": r"/api/v1/(admin|node)",
    "SCHEMA_PATH_PREFIX_TRIM": False,
    "COMPONENT_SPLIT_REQUEST": True,
    "ENUM_GENERATE_CHOICE_DESCRIPTION": False,
    "SORT_OPERATION_PARAMETERS": True,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "ENUM_NAME_OVERRIDES": {
        "WorkflowStateEnum": "maas_domain.work.WorkflowState",
        "NodeStateEnum": "maas_domain.models.inventory.NodeState",
        "DecommissionModeEnum": "decommission.models.Mode",
        "BatchStateEnum": "onboarding.models.BatchState",
        "ActiveStatusEnum": "maas_domain.models.sites.SiteStatus",
        "NodeReportStatusEnum": "onboarding.api.node.NODE_REPORT_STATUSES",
        "VerbEnum": "workflows.api.VERB_NAMES",
        "EvidenceKindEnum": "maas_domain.models.evidence.EvidenceKind",
        "KindEnum": "reconciliation.models.DriftKind",
    },
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "maas_domain.api.schema.error_component_hook",
    ],
}

LOG_LEVEL = env.choice("LOG_LEVEL", "INFO", ("DEBUG", "INFO", "WARNING", "ERROR"))
# Every handler redacts secret shapes (docs/security.md); a new handler must list both filters.
_LOG_FILTERS = ["context", "redact"]
_log_handlers: dict[str, dict[str, object]] = {
    "console": {"class": "logging.StreamHandler", "formatter": "json", "filters": _LOG_FILTERS}
}
if LOKI_URL:  # the JSON lines go to stdout and, batched in a thread, to Loki
    _log_handlers["loki"] = {
        "()": "maas_domain.observability.loki.LokiHandler",
        "url": LOKI_URL,
        "labels": LOKI_LABELS,
        "tenant": LOKI_TENANT,
        "formatter": "json",
        "filters": _LOG_FILTERS,
    }
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {
        "context": {"()": "maas_domain.logging.ContextFilter"},
        "redact": {"()": "maas_domain.logging.RedactFilter"},
    },
    "formatters": {"json": {"()": "maas_domain.logging.JsonFormatter"}},
    "handlers": _log_handlers,
    "root": {"handlers": list(_log_handlers), "level": LOG_LEVEL},
    "loggers": {
        "django.db.backends": {"level": "WARNING"},
        "kombu.connection": {"level": "ERROR"},
        # These log request headers and bodies at DEBUG (the MAAS OAuth signature is the token
        # secret in clear; bodies carry IPMI passwords and user data): WARNING whatever
        # MAASCP_LOG_LEVEL says (docs/security.md).
        **{
            name: {"level": "WARNING"}
            for name in ("requests_oauthlib", "oauthlib", "urllib3", "hvac")
        },
    },
}

# Every MAASCP_* variable the settings read (used by the docker-compose test).
KNOWN_ENV_VARS = frozenset(env.known)
env.check()
