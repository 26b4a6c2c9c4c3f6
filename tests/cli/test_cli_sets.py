"""`cloudpivot set …` against a real server and worker: a set submitted with --wait runs to its end on the local
cloud, and its exit status says whether every element succeeded."""

from __future__ import annotations

import json

import pytest

from tasksets.models import TaskSet
from tests.cli.support import spec_file

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_set_submit_wait_runs_every_element_and_exits_0(logged_in, worker, tmp_path):
    spec = spec_file(tmp_path, "spec.yaml", "cloud: local\nname: shard\ncommand: [sh, -c, 'test $N = {{N}}']\n")
    items = tmp_path / "params.jsonl"
    items.write_text("\n".join(json.dumps({"N": n}) for n in range(4)) + "\n")
    done = logged_in(
        "set", "submit", "-f", str(spec), "--items", str(items), "--max-running", "2", "--wait", timeout=240
    )
    assert done.returncode == 0, done.stderr
    assert "4 succeeded" in done.stderr and "FINISHED (exit status 0)" in done.stderr
    set_id = done.stderr.split()[2].rstrip(":")
    task_set = TaskSet.objects.get(pk=set_id)
    assert task_set.materialized == 4 and task_set.state == "FINISHED"
    shown = logged_in.json("set", "get", set_id)
    assert shown["counts"]["succeeded"] == 4
    assert [row["id"] for row in logged_in.json("set", "list")] == [set_id]
    assert logged_in("set", "retry-failed", set_id).returncode == 87  # nothing failed: a conflict


def test_a_set_with_a_failed_element_exits_90_and_retry_failed_runs_it_again(logged_in, worker, tmp_path):
    spec = spec_file(tmp_path, "spec.json", {"cloud": "local", "command": ["sh", "-c", "test {{index}} != 1"]})
    done = logged_in("set", "submit", "-f", str(spec), "--count", "3", "--wait", timeout=240)
    assert done.returncode == 90, done.stderr
    assert "1 failed" in done.stderr
    set_id = done.stderr.split()[2].rstrip(":")
    retried = logged_in("set", "retry-failed", set_id)
    assert retried.returncode == 0 and "1 failed elements retried" in retried.stdout
    refused = logged_in("set", "submit", "-f", str(spec), "--count", "0")
    assert refused.returncode == 84 and "count" in refused.stderr
