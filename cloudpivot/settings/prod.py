"""Production: everything from the environment (see docs/deploy.md), plus strict transport security."""

from __future__ import annotations

import os
from urllib.parse import urlsplit

from django.core.exceptions import ImproperlyConfigured

from cloudpivot.env import env, envsecret
from cloudpivot.secret_box import key_problem
from cloudpivot.settings.base import *  # noqa: F403

# The embedded default keeps a generated key in var/; a production server must be given one, or sessions,
# Runner and agent credentials would change with whatever disk the process happens to start on.
if not envsecret("DJANGO_SECRET_KEY"):
    raise ImproperlyConfigured(
        "DJANGO_SECRET_KEY (or DJANGO_SECRET_KEY_FILE) must be set with the production settings: "
        "generate one with `python -c 'import secrets; print(secrets.token_urlsafe(50))'`"
    )
# Project secrets are encrypted with this key; deriving it from DJANGO_SECRET_KEY (the embedded default) would
# tie every stored secret to that key and put both in one place.
_secrets_key = envsecret("CLOUDPIVOT_SECRETS_KEY")
if not _secrets_key or key_problem(_secrets_key):
    raise ImproperlyConfigured(
        "CLOUDPIVOT_SECRETS_KEY (or CLOUDPIVOT_SECRETS_KEY_FILE) must be set with the production settings"
        + (f" ({key_problem(_secrets_key)})" if _secrets_key else "")
        + ": generate one with "
        + "`python -c 'from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())'`"
    )
# The crash-point switch kills the process at named steps (cloudpivot/crash_points.py): for tests, never a server.
if os.environ.get("CLOUDPIVOT_CRASH_AT"):
    raise ImproperlyConfigured(
        "CLOUDPIVOT_CRASH_AT is set: it SIGKILLs the process at a named step and is for tests only; "
        "unset it to start with the production settings"
    )
# Redis carries the doorbells, the job queue and the channel layer: anyone who reaches it could queue work. A
# Redis across the network (a Kubernetes Service, another host) must ask for a password; one on the loopback
# or a Unix socket is reachable from this host only.
_redis = urlsplit(REDIS_URL) if REDIS_URL else None  # noqa: F405
if (
    _redis
    and _redis.scheme != "unix"
    and _redis.hostname not in ("127.0.0.1", "::1", "localhost")
    and not _redis.password
):
    raise ImproperlyConfigured(
        f"REDIS_URL names {_redis.hostname} without a password: set Redis's requirepass (or an ACL user) and put "
        "it in the URL (redis://:PASSWORD@host:6379/0); only a Redis on the loopback may go without"
    )
# Accounts come from an admin or an identity provider; anyone reaching the login page may not make one.
CLOUDPIVOT_SIGNUP_OPEN = env.bool("CLOUDPIVOT_SIGNUP_OPEN", default=False)

SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SESSION_COOKIE_SECURE = True
CSRF_COOKIE_SECURE = True
SECURE_HSTS_SECONDS = env.int("DJANGO_HSTS_SECONDS", default=31536000)
SECURE_HSTS_INCLUDE_SUBDOMAINS = True
SECURE_SSL_REDIRECT = env.bool("DJANGO_SSL_REDIRECT", default=True)
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$"]  # probes speak plain HTTP to the pod
SECURE_HSTS_PRELOAD = env.bool("DJANGO_HSTS_PRELOAD", default=False)
# Joining the browsers' HSTS preload list is the operator's decision (DJANGO_HSTS_PRELOAD), not a default.
SILENCED_SYSTEM_CHECKS = [] if SECURE_HSTS_PRELOAD else ["security.W021"]
