"""Mails to people who asked, through Django's SMTP backend to a real SMTP server (aiosmtpd) on loopback."""

from __future__ import annotations

import datetime as dt
import mailbox
import socket
import subprocess
import sys

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from cloudpivot.accounts.models import Role
from notifications import jobs
from tests import builders, helpers
from usage import jobs as usage_jobs


@pytest.fixture
def smtp(settings, tmp_path):
    port = helpers.free_port()
    maildir = tmp_path / "maildir"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "aiosmtpd",
            "-n",
            "-l",
            f"127.0.0.1:{port}",
            "-c",
            "aiosmtpd.handlers.Mailbox",
            str(maildir),
        ],
        start_new_session=True,
    )
    helpers.wait_for(lambda: answers(port), timeout=15, what="the SMTP server to listen")
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", port
    yield lambda: list(mailbox.Maildir(str(maildir), create=False)) if maildir.exists() else []
    helpers.stop_process_group(process)


def answers(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


def unfolded(header: str) -> str:
    """A long header as a mail reader shows it (RFC 5322 unfolding: the line breaks go, the spaces stay)."""
    return header.replace("\r\n", "").replace("\n", "")


def test_it_mails_the_owner_when_a_task_ends_as_they_asked(world, api, smtp):
    assert api("bob").get("/api/v1/email-preferences").json() == {
        "email": "bob@example.org",
        "task_end": "none",
        "operation_failed": False,
    }
    assert api("bob").put("/api/v1/email-preferences", {"task_end": "failures"}, format="json").status_code == 200
    bad = api("alice").put("/api/v1/email-preferences", {"task_end": "sometimes"}, format="json")
    assert bad.status_code == 400 and bad.json()["errors"][0]["field"] == "task_end"
    api("charlie").put("/api/v1/email-preferences", {"task_end": "all", "operation_failed": True}, format="json")
    jobs.pump(seconds=0.1)  # the first pass marks where mail starts: nothing of the past is mailed

    failed = builders.finished(world.bob, exit_code=3, name="nightly")
    builders.finished(world.bob)  # succeeded: bob asked for failures only
    ok = builders.finished(world.charlie, name="report")
    builders.finished(world.alice)  # alice asked for nothing
    jobs.pump(seconds=0.1)
    mails = {(m["To"], m["Subject"]) for m in smtp()}
    assert mails == {
        ("bob@example.org", "[CloudPivot] task nightly FAILED"),
        ("charlie@example.org", "[CloudPivot] task report SUCCEEDED"),
    }
    body = next(m for m in smtp() if m["To"] == "bob@example.org").get_payload()
    assert str(failed.pk) in body and "exit code: 3" in body
    assert str(ok.pk) in next(m for m in smtp() if m["To"] == "charlie@example.org").get_payload()

    instance = builders.instance_row(connection=world.local, project=world.beta, owner=world.charlie)
    builders.operation_failed(instance=instance, user=world.charlie, message="no capacity")
    jobs.pump(seconds=0.1)
    assert ("charlie@example.org", "[CloudPivot] start failed") in {(m["To"], m["Subject"]) for m in smtp()}
    assert len(smtp()) == 3  # nothing twice


def test_a_projects_admins_are_mailed_at_80_and_at_100_percent_of_its_budget_once_a_month(world, client, smtp):
    jobs.pump(seconds=0.1)  # the mail cursor starts here
    now = timezone.now()
    month = now.strftime("%Y-%m")
    builders.ran(world.bob, began=now - dt.timedelta(seconds=60), ended=now, cpu=60)  # 1 core-hour this month
    get_user_model().objects.filter(pk=world.rita.pk).update(email="")  # an admin without an address: no mail
    world.alpha.memberships.filter(user=world.rita).update(role=Role.ADMIN)
    root = get_user_model().objects.create_superuser("root", "root@example.org", "pw")
    client.force_login(root)
    saved = client.post(
        "/admin/usage/projectbudget/add/", {"project": world.alpha.pk, "core_hours": "1.20", "hard_stop": "on"}
    )
    assert saved.status_code == 302, saved.content.decode()[:2000]  # the save sweeps at once: 83.3 %
    jobs.pump(seconds=0.1)
    [warning] = smtp()
    assert (warning["To"], unfolded(warning["Subject"])) == (
        "alice@example.org",
        f"[CloudPivot] budget warning: project alpha at 83.3 % for {month}",
    )
    body = warning.get_payload()
    assert f"Project alpha has used 1.00 of its 1.20 core-hour budget for {month} (83.3 %)." in body
    assert "At 100 % new tasks will be held (hard stop)" in body
    assert f"/projects/alpha/usage/?month={month}" in body

    usage_jobs.sweep()  # the next minute's sweep: nothing new, no second mail
    jobs.pump(seconds=0.1)
    assert len(smtp()) == 1

    builders.ran(world.bob, began=now - dt.timedelta(seconds=60), ended=now, cpu=60)  # 2 core-hours
    usage_jobs.sweep()
    usage_jobs.sweep()
    jobs.pump(seconds=0.1)
    [exhausted] = [m for m in smtp() if "exhausted" in m["Subject"]]
    assert (exhausted["To"], unfolded(exhausted["Subject"])) == (
        "alice@example.org",
        f"[CloudPivot] budget exhausted: project alpha at 166.7 % for {month}, new tasks held",
    )
    body = exhausted.get_payload()
    assert f"Project alpha has used 2.00 of its 1.20 core-hour budget for {month} (166.7 %)." in body
    assert "New tasks are held: they wait PENDING until the budget is raised or the month is over." in body
    assert len(smtp()) == 2  # bob (a submitter) and rita (no address) got none, alice none twice
