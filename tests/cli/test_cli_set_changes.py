"""`cloudpivot set retry-failed --set/--changes` and `cloudpivot set delete` against a real server and worker."""

from __future__ import annotations

import pytest

from tasks.models import Task
from tasksets.models import TaskSet
from tests.cli.support import spec_file

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_retry_failed_with_changes_then_delete(logged_in, worker, tmp_path):
    spec = spec_file(tmp_path, "spec.json", {"cloud": "local", "command": ["sh", "-c", "test {{index}} != 1"]})
    done = logged_in("set", "submit", "-f", str(spec), "--count", "2", "--wait", timeout=240)
    assert done.returncode == 90, done.stderr
    set_id = done.stderr.split()[2].rstrip(":")
    refused = logged_in("set", "retry-failed", set_id, "--set", "resources.memory_mb=0")
    assert refused.returncode == 84 and "changes.resources.memory_mb" in refused.stderr, refused.stderr
    changes = spec_file(tmp_path, "changes.yaml", "timeout_seconds: 600\n")
    retried = logged_in("set", "retry-failed", set_id, "--changes", str(changes), "--set", "resources.memory_mb=256")
    assert retried.returncode == 0, retried.stderr
    assert "1 failed elements retried with changes" in retried.stdout
    assert logged_in("set", "watch", set_id, timeout=240).returncode == 90  # element 1 fails again, with the changes
    task = Task.objects.get(set_element__task_set_id=set_id, set_element__index=1)
    assert task.attempts_count == 2 and task.timeout_seconds == 600 and task.normalized["resources"]["memory_mb"] == 256
    deleted = logged_in("set", "delete", set_id)
    assert deleted.returncode == 0 and "deleted" in deleted.stdout, deleted.stderr
    assert not TaskSet.objects.filter(pk=set_id).exists() and Task.objects.filter(pk=task.pk).exists()


def test_delete_of_an_active_set_is_refused_until_it_is_cancelled(logged_in, tmp_path):
    spec = spec_file(tmp_path, "spec.json", {"cloud": "local", "command": ["sleep", "30"]})
    logged_in("set", "submit", "-f", str(spec), "--count", "1")
    set_id = str(TaskSet.objects.get().pk)
    refused = logged_in("set", "delete", set_id)
    assert refused.returncode == 87 and "cancel it first" in refused.stderr, refused.stderr
    assert logged_in("set", "cancel", set_id).returncode == 0
    assert logged_in("set", "delete", set_id).returncode == 0
