"""Management commands as an operator runs them: real subprocesses on a fresh embedded database."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests import helpers

pytestmark = pytest.mark.e2e


def manage(var_dir, *args) -> subprocess.CompletedProcess:
    env = {key: value for key, value in os.environ.items() if key not in ("DATABASE_URL", "REDIS_URL")}
    env |= {"DJANGO_SETTINGS_MODULE": "cloudpivot.settings.base", "CLOUDPIVOT_VAR_DIR": str(var_dir)}
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=helpers.BASE_DIR, env=env, capture_output=True, text=True, timeout=120
    )


def test_bootstrap_demo_is_idempotent_and_apitoken_prints_the_token_last(tmp_path):
    assert manage(tmp_path, "migrate", "-v0").returncode == 0
    first = manage(tmp_path, "bootstrap_demo")
    second = manage(tmp_path, "bootstrap_demo", "--token")
    assert first.returncode == second.returncode == 0, first.stderr + second.stderr
    assert any(line.startswith("password: ") for line in first.stdout.splitlines())
    # The same admin, not a new one: its password is not printed again (docs/security.md).
    assert "password: " not in second.stdout and "the password was printed when it was made" in second.stdout
    assert second.stdout.splitlines()[-1].startswith("api token: cpt_")
    plain = second.stdout.splitlines()[-1].removeprefix("api token: ")
    kept = tmp_path / "admin-token"
    assert kept.read_text() == plain and oct(kept.stat().st_mode & 0o777) == "0o600"
    # A restart does not make (or print) another: the token stays the one made, which expires in 30 days.
    third = manage(tmp_path, "bootstrap_demo", "--token")
    assert plain not in third.stdout and third.stdout.splitlines()[-1] == (
        f"api token: the one printed when it was made, kept in {kept} (readable by this user only)"
    )
    kept.unlink()  # lost: a new one is made, the old one revoked
    fourth = manage(tmp_path, "bootstrap_demo", "--token")
    assert fourth.stdout.splitlines()[-1].startswith("api token: cpt_") and plain not in fourth.stdout

    created = manage(tmp_path, "apitoken", "create", "admin", "--name", "ci")
    assert created.returncode == 0, created.stderr
    token = created.stdout.strip().splitlines()[-1]
    assert token.startswith("cpt_") and len(token) > 40
    listing = manage(tmp_path, "apitoken", "list", "admin")
    assert token[:10] in listing.stdout and token not in listing.stdout

    missing = manage(tmp_path, "apitoken", "create", "nobody")
    assert missing.returncode != 0 and "no user named 'nobody'" in missing.stderr
