"""Retention (issue 12, item 13): old records are archived to a file, then deleted; nothing live is touched."""

from __future__ import annotations

import base64
import datetime as dt
import stat
from io import StringIO

from django.core.management import call_command
from django.utils import timezone

from cloudpivot.accounts.models import AuditEntry
from cloudpivot.retention import archive_path, prune, read_archive
from tasks.choices import CleanupState, TaskState
from tasks.models import Attempt, LogChunk, Task, TaskEvent
from tasks.services.submission import task_submit
from tests.builders import hello_spec


def finished(world, *, days_ago: float, name: str, cleanup: str = CleanupState.DONE) -> Task:
    task, _ = task_submit(user=world.bob, document=hello_spec(name=name))
    when = timezone.now() - dt.timedelta(days=days_ago)
    Task.objects.filter(pk=task.pk).update(state=TaskState.SUCCEEDED, finished_at=when)
    attempt = Attempt.objects.create(
        task=task, number=1, external_name=f"cp-{task.pk}-1", credential_nonce="n", runner_token_hash=name
    )
    Attempt.objects.filter(pk=attempt.pk).update(cleanup_state=cleanup)
    LogChunk.objects.create(task=task, attempt=attempt, stream="stdout", offset=0, position=5, data=b"hi\xff\n")
    return task


def test_finished_tasks_past_retention_are_archived_with_their_log_then_deleted(world, settings, tmp_path):
    settings.RETENTION_ARCHIVE_DIR = tmp_path / "archive"
    settings.RETENTION_TASK_DAYS = 30
    old = finished(world, days_ago=31, name="old")
    recent = finished(world, days_ago=29, name="recent")
    uncleaned = finished(world, days_ago=31, name="uncleaned", cleanup=CleanupState.PENDING)
    running, _ = task_submit(user=world.bob, document=hello_spec(name="running"))
    Task.objects.filter(pk=running.pk).update(
        state=TaskState.RUNNING, created_at=timezone.now() - dt.timedelta(days=99)
    )

    assert prune(dry_run=True)["tasks"] == 1 and Task.objects.count() == 4
    assert prune()["tasks"] == 1

    assert set(Task.objects.values_list("name", flat=True)) == {"recent", "uncleaned", "running"}
    assert not TaskEvent.objects.filter(task_id=old.pk).exists() and not LogChunk.objects.filter(task_id=old.pk)
    path = archive_path("tasks", timezone.now())
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    [record] = read_archive(path)
    assert record["task"]["id"] == str(old.pk) and record["task"]["state"] == "SUCCEEDED"
    assert base64.b64decode(record["log"][0]["data"]) == b"hi\xff\n"
    assert [e["type"] for e in record["events"]] == ["submitted"]
    assert "runner_token_hash" not in record["attempts"][0]
    assert recent.pk and uncleaned.pk  # kept: too recent, and its cloud objects are not cleaned up yet


def test_audit_entries_go_after_their_retention_and_zero_keeps_for_ever(world, settings, tmp_path):
    settings.RETENTION_ARCHIVE_DIR = tmp_path / "archive"
    settings.RETENTION_AUDIT_DAYS = 0
    entry = AuditEntry.objects.create(via="api", action="x", method="POST", path="/p", status_code=200, outcome="ok")
    AuditEntry.objects.filter(pk=entry.pk).update(created_at=timezone.now() - dt.timedelta(days=4000))
    assert "audit" not in prune() and AuditEntry.objects.exists()
    settings.RETENTION_AUDIT_DAYS = 365
    assert prune()["audit"] == 1 and not AuditEntry.objects.exists()
    assert read_archive(archive_path("audit", timezone.now()))[0]["path"] == "/p"


def test_the_prune_command_says_what_it_did(world, settings, tmp_path):
    settings.RETENTION_ARCHIVE_DIR = tmp_path / "archive"
    settings.RETENTION_OPERATION_DAYS = 0
    finished(world, days_ago=400, name="ancient")
    out = StringIO()
    call_command("prune", "--dry-run", stdout=out)
    assert "tasks: would archive and delete 1" in out.getvalue()
    assert "operations: kept for ever" in out.getvalue()
    assert Task.objects.filter(name="ancient").exists()
    call_command("prune", stdout=StringIO())
    assert not Task.objects.filter(name="ancient").exists()
