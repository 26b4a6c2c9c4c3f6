"""The crash-point switch (cloudpivot/crash_points.py): off unless set, kills at the N-th hit, refused in production."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys

import pytest
from cryptography.fernet import Fernet

from cloudpivot import crash_points
from cloudpivot.crash_points import ENV, CrashSpecError, crash_point, crash_spec
from tests import helpers


def run(code: str, **env: str) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if k != ENV} | env
    return subprocess.run(
        [sys.executable, "-c", code], cwd=helpers.BASE_DIR, env=environment, capture_output=True, text=True, timeout=60
    )


# Three hits of one point, a line printed after each: how many lines came out says where the process died.
THREE_HITS = """
from cloudpivot.crash_points import crash_point
for n in (1, 2, 3):
    crash_point("start.created")
    print(n, flush=True)
"""


def test_the_spec_names_a_known_point_and_an_optional_count():
    assert crash_spec(None) is None and crash_spec("") is None and crash_spec("  ") is None
    assert crash_spec("start.created") == ("start.created", 1)
    assert crash_spec("agent.launched:3") == ("agent.launched", 3)
    with pytest.raises(CrashSpecError, match="unknown crash point 'start.creatd'"):
        crash_spec("start.creatd")
    for count in ("0", "x", "-1"):
        with pytest.raises(CrashSpecError, match="whole number"):
            crash_spec(f"start.created:{count}")


def test_off_unless_set(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    crash_point("start.created")  # would kill the test process if it fired
    assert crash_points.hits("start.created") == 0


def test_a_point_not_in_the_list_is_a_programming_error(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    with pytest.raises(CrashSpecError, match="not in cloudpivot.crash_points.POINTS"):
        crash_point("start.typo")


def test_other_points_pass_and_their_hits_are_not_counted():
    result = run(THREE_HITS, **{ENV: "cleanup.removed"})
    assert (result.returncode, result.stdout.split()) == (0, ["1", "2", "3"])


@pytest.mark.parametrize(("value", "printed"), [("start.created", []), ("start.created:2", ["1"])])
def test_the_process_is_killed_at_the_nth_hit(value, printed):
    result = run(THREE_HITS, **{ENV: value})
    assert result.returncode == -signal.SIGKILL
    assert result.stdout.split() == printed
    assert "crash point start.created reached" in result.stderr


def test_a_misspelt_point_in_the_environment_fails_loudly_instead_of_never_crashing():
    result = run(THREE_HITS, **{ENV: "start.creatd"})
    assert result.returncode == 1 and "unknown crash point 'start.creatd'" in result.stderr


def test_the_host_agent_copy_kills_at_the_nth_hit_too():
    code = """
from runner_api.agent.cloudpivot_supervisor import crash_point
for n in (1, 2, 3):
    crash_point("agent.launched")
    print(n, flush=True)
"""
    assert run(code).stdout.split() == ["1", "2", "3"]
    result = run(code, **{ENV: "agent.launched:3"})
    assert (result.returncode, result.stdout.split()) == (-signal.SIGKILL, ["1", "2"])


@pytest.mark.e2e
def test_production_settings_refuse_to_start_with_the_switch_set():
    environment = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"} | {
        "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
        "CLOUDPIVOT_SECRETS_KEY": Fernet.generate_key().decode(),
        "DJANGO_ALLOWED_HOSTS": "cloudpivot.example.org",
    }
    check = [sys.executable, "manage.py", "check", "--settings", "cloudpivot.settings.prod"]
    ok = subprocess.run(check, cwd=helpers.BASE_DIR, env=environment, capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stderr
    refused = subprocess.run(
        check,
        cwd=helpers.BASE_DIR,
        env=environment | {ENV: "start.created"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert refused.returncode != 0
    assert "ImproperlyConfigured: CLOUDPIVOT_CRASH_AT is set" in refused.stderr
