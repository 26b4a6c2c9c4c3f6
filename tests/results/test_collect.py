"""The host program's output collection (runner_api/agent/cloudpivot_outputs.py), on real files: globs, directories,
checksums, and what it refuses to pick up (docs/data.md)."""

from __future__ import annotations

import hashlib
import json
import os

from runner_api.agent import cloudpivot_outputs as outputs


def collect(work, store, *declared):
    return outputs.collect_outputs(
        str(work), {"declared": list(declared), "store": {"kind": "directory", "path": str(store)}}
    )


def test_it_copies_globs_and_directories_with_their_sha256(tmp_path):
    work, store = tmp_path / "work", tmp_path / "store"
    (work / "plots" / "sub").mkdir(parents=True)
    (work / "result.csv").write_bytes(b"a,b\n1,2\n")
    (work / "plots" / "one.png").write_bytes(b"\x89PNG" + os.urandom(3000))
    (work / "plots" / "sub" / "two.png").write_bytes(b"two")
    manifest = collect(work, store, {"path": "*.csv"}, {"path": "plots", "to": "figures"})
    assert manifest["complete"] is True and manifest["missing"] == [] and manifest["reason"] == ""
    names = [item["name"] for item in manifest["files"]]
    assert names == ["result.csv", "figures/plots/one.png", "figures/plots/sub/two.png"]
    for item in manifest["files"]:
        data = (store / item["name"]).read_bytes()
        assert item["bytes"] == len(data) and item["sha256"] == hashlib.sha256(data).hexdigest()
        assert "ref" not in item  # the server names the stored object itself


def test_past_a_thousand_files_the_rest_is_one_missing_entry_that_counts_them(tmp_path):
    work, store = tmp_path / "work", tmp_path / "store"
    (work / "parts").mkdir(parents=True)
    for index in range(1003):
        (work / "parts" / f"p{index:04d}").write_bytes(b"x")
    manifest = collect(work, store, {"path": "parts"}, {"path": "nothing-here"})
    assert len(manifest["files"]) == 1000
    assert manifest["missing"][0] == {"name": "nothing-here", "reason": "no file matches it in the work directory"}
    assert manifest["missing"][1] == {
        "name": "parts/p1000",
        "reason": "3 more files are not kept: one manifest lists at most 1000 files",
    }
    assert len(json.dumps(manifest)) < 256 * 1024


def test_a_pattern_that_matches_nothing_is_missing_and_the_rest_is_kept(tmp_path):
    work, store = tmp_path / "work", tmp_path / "store"
    work.mkdir()
    (work / "a.txt").write_text("a")
    manifest = collect(work, store, {"path": "a.txt"}, {"path": "never/*.bin"})
    assert manifest["complete"] is False
    assert manifest["missing"] == [{"name": "never/*.bin", "reason": "no file matches it in the work directory"}]
    assert "1 of 2 outputs not kept" in manifest["reason"]
    assert (store / "a.txt").read_text() == "a"


def test_it_never_follows_a_link_out_of_the_work_directory(tmp_path):
    work, store, outside = tmp_path / "work", tmp_path / "store", tmp_path / "outside"
    work.mkdir()
    outside.mkdir()
    (outside / "secret").write_text("not yours")
    (work / "leak").symlink_to(outside / "secret")
    (work / "door").symlink_to(outside)
    os.mkfifo(work / "pipe")
    manifest = collect(work, store, {"path": "leak"}, {"path": "door/secret"}, {"path": "pipe"})
    reasons = {item["name"]: item["reason"] for item in manifest["missing"]}
    assert manifest["files"] == [] and set(reasons) == {"leak", "door/secret", "pipe"}, manifest
    assert reasons["door/secret"] == "it leads outside the work directory"
    assert reasons["pipe"] == "not a regular file"
    assert not any(store.rglob("*")) if store.exists() else True


def test_a_store_it_cannot_write_to_makes_every_output_missing_with_the_reason(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (work / "a.txt").write_text("a")
    manifest = outputs.collect_outputs(str(work), {"declared": [{"path": "a.txt"}], "store": {"kind": "s3"}})
    assert manifest["complete"] is False
    assert manifest["missing"] == [{"name": "a.txt", "reason": "this host program cannot write to a 's3' store"}]


def test_a_store_that_fails_leaves_the_file_missing_not_half_written(tmp_path):
    work, store = tmp_path / "work", tmp_path / "store"
    work.mkdir()
    (work / "a.txt").write_text("a")
    store.write_text("a file where the directory should be")
    manifest = collect(work, store, {"path": "a.txt"})
    assert manifest["files"] == [] and manifest["missing"][0]["reason"].startswith("could not be stored")


def test_the_agent_reports_why_there_is_no_manifest_when_the_supervisor_died_while_collecting(tmp_path):
    assignment = {"outputs": {"declared": [{"path": "x"}], "store": {"kind": "directory", "path": "/nowhere"}}}
    data = outputs.outputs_event(str(tmp_path), assignment)
    assert data["complete"] is False and "supervisor ended" in data["reason"]
    assert outputs.outputs_event(str(tmp_path), {}) is None


def test_the_supervisor_keeps_the_manifest_and_the_agent_reports_it_before_the_exit(tmp_path):
    import json
    from types import SimpleNamespace

    from runner_api.agent.cloudpivot_agent import Attempt
    from runner_api.agent.cloudpivot_supervisor import keep_outputs

    directory, store = tmp_path / "cp-x-1", tmp_path / "store"
    (directory / "work").mkdir(parents=True)
    (directory / "work" / "a.txt").write_text("a")
    outputs = {"declared": [{"path": "a.txt"}], "store": {"kind": "directory", "path": str(store)}}
    keep_outputs(str(directory), {"workdir": str(directory / "work"), "outputs": outputs})
    assert json.loads((directory / "outputs.json").read_text())["files"][0]["name"] == "a.txt"

    (directory / "assignment.json").write_text(json.dumps({"outputs": outputs}))
    (directory / "exit.json").write_text(json.dumps({"exit_code": 4, "signal": None}))
    attempt = Attempt(SimpleNamespace(mark_dirty=lambda: None, hold_until=0.0), str(directory))
    attempt.ended()
    kinds = [(event["type"], event["data"].get("complete")) for event in attempt.outbox["pending"]]
    assert kinds == [("outputs", True), ("exited", None)]
    assert attempt.outbox["pending"][1]["data"]["exit_code"] == 4  # the copy changes nothing of the exit
