"""Settings of the test OpenID Connect provider; everything instance-specific comes from OIDC_TEST_* variables."""

from __future__ import annotations

import os
from pathlib import Path

HERE = Path(__file__).resolve().parent
SECRET_KEY = os.environ["OIDC_TEST_SECRET_KEY"]
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1"]
ROOT_URLCONF = "tests.oidc_provider.urls"
USE_TZ = True
TIME_ZONE = "UTC"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "oauth2_provider",
]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
]
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [HERE / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {"context_processors": ["django.template.context_processors.request"]},
    }
]
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": os.environ["OIDC_TEST_DATABASE"]}}
# CloudPivot runs on the same host under another port: a cookie name of its own keeps the sessions apart.
SESSION_COOKIE_NAME = "oidc_provider_session"
CSRF_COOKIE_NAME = "oidc_provider_csrftoken"
PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]
LOGIN_URL = "/login/"
OAUTH2_PROVIDER = {
    "OIDC_ENABLED": True,
    "OIDC_RSA_PRIVATE_KEY": Path(os.environ["OIDC_TEST_RSA_KEY_FILE"]).read_text(),
    "OAUTH2_VALIDATOR_CLASS": "tests.oidc_provider.validator.GroupsClaimValidator",
    "SCOPES": {"openid": "OpenID Connect", "profile": "Your name and groups", "email": "Your email address"},
    "PKCE_REQUIRED": True,
}
LOGGING = {"version": 1, "disable_existing_loggers": False}
