"""Test settings: the same as base (SQLite or DATABASE_URL/REDIS_URL), with faster hashing."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from cloudpivot.settings.base import *  # noqa: F403
from cloudpivot.settings.base import DATABASES, Q_CLUSTER, VAR_DIR

# MD5 first for speed; PBKDF2 still verifies passwords saved the production way.
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher", "django.contrib.auth.hashers.PBKDF2PasswordHasher"]
# Set CLOUDPIVOT_TEST_DB_SUFFIX to run two test sessions side by side on one machine.
_suffix = os.environ.get("CLOUDPIVOT_TEST_DB_SUFFIX", "main")
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # A file, not :memory:, so Daphne and qcluster subprocesses in end-to-end tests see the same database.
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / f"test-{_suffix}.sqlite3")}
else:
    DATABASES["default"]["TEST"] = {"NAME": f"test_{DATABASES['default']['NAME']}_{_suffix}"}
# A queue name of its own per test run, so a Redis shared with other runs never mixes their jobs.
Q_CLUSTER["name"] = os.environ.get("CLOUDPIVOT_QUEUE_NAME", f"cloudpivot-test-{os.getpid()}")
# Serve static files straight from the app directories: tests do not run collectstatic.
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = True
LOGGING = {"version": 1, "disable_existing_loggers": False}
# The tests' token files (pytest's tmp_path) and the dev OpenStack's clouds.yaml live under the temp directory.
CREDENTIALS_DIR = Path(os.environ.get("CLOUDPIVOT_CREDENTIALS_DIR", tempfile.gettempdir()))
