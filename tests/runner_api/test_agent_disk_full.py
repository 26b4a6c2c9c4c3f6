"""The host agent's files on a full disk (issue 16, item 2): what must be written waits for room, never crashes.

A real ENOSPC from a small tmpfs of the test's own (tests/plugins/dependencies.py, `small_disk`).
"""

from __future__ import annotations

import json
import os
import threading
from types import SimpleNamespace

from runner_api.agent.cloudpivot_agent import Attempt
from runner_api.agent.cloudpivot_supervisor import write_json_when_room
from tests import helpers
from tests.plugins.dependencies import fill


def test_the_supervisor_holds_the_exit_status_until_there_is_room(small_disk):
    filler = fill(small_disk)
    target = small_disk / "exit.json"
    writer = threading.Thread(target=write_json_when_room, args=(str(target), {"exit_code": 0}), daemon=True)
    writer.start()
    writer.join(1.5)
    assert writer.is_alive() and not target.exists()  # waiting, not dead, not half-written
    assert os.listdir(small_disk) == ["filler"]  # no temporary file left to hold space
    os.remove(filler)
    writer.join(5)
    assert json.loads(target.read_text()) == {"exit_code": 0}


def test_the_agent_keeps_an_event_it_cannot_save_and_saves_it_once_there_is_room(small_disk):
    directory = small_disk / "cp-attempt-1"
    directory.mkdir()
    attempt = Attempt(SimpleNamespace(mark_dirty=lambda: None, hold_until=0.0), str(directory))
    filler = fill(small_disk)
    attempt.add_event("end", "exited", {"exit_code": 0, "signal": None})  # no room: kept in memory, no crash
    assert attempt.unsaved and [event["type"] for event in attempt.outbox["pending"]] == ["exited"]
    assert not (directory / "events.json").exists()
    os.remove(filler)
    attempt.tick(0.0)
    helpers.wait_for(lambda: (directory / "events.json").exists(), timeout=2, what="the outbox saved")
    assert not attempt.unsaved
    assert json.loads((directory / "events.json").read_text())["pending"][0]["type"] == "exited"
