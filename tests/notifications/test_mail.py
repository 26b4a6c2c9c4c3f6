"""Mails to people who asked, through Django's SMTP backend to a real SMTP server (aiosmtpd) on loopback."""

from __future__ import annotations

import mailbox
import socket
import subprocess
import sys

import pytest

from notifications import jobs
from resources.models import Operation, OperationState
from tests import builders, helpers


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
    operation = Operation.objects.create(
        project=world.beta, instance=instance, action="start", requested_by=world.charlie
    )
    Operation.objects.filter(pk=operation.pk).update(state=OperationState.FAILED, error_message="no capacity")
    jobs.pump(seconds=0.1)
    assert ("charlie@example.org", "[CloudPivot] start failed") in {(m["To"], m["Subject"]) for m in smtp()}
    assert len(smtp()) == 3  # nothing twice
