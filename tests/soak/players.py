"""The soak's players (tests/soak/soak.py): the kubelet of each kmock cluster and the VMs of the OpenStack."""

from __future__ import annotations

import os
import signal
import threading
import time
import uuid
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tests.soak.soak import Plan


# ------------------------------------------------------------------------------------------------ players
class KubeletPlayer(threading.Thread):
    """The kubelet of one kmock cluster: schedule → run → write the pod log → finish, as each Job's plan says.

    Every uid seen under a Job name is kept: two uids under one attempt's name would be a duplicate Job."""

    def __init__(self, kube, plans: list[Plan]) -> None:
        super().__init__(name="kubelet-player", daemon=True)
        self.kube, self.plans = kube, plans
        self.by_hex: dict[str, Plan] = {}
        self.uids: dict[str, set[str]] = defaultdict(set)
        self.started: dict[str, tuple[float, int]] = {}
        self.finished: set[str] = set()
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.is_set():
            try:
                self.step()
            except Exception:  # noqa: BLE001 - the server thread answers between calls; the next step looks again
                pass
            self.halt.wait(0.2)

    def plan(self, task_hex: str) -> Plan | None:
        if task_hex not in self.by_hex:  # submitted since the last look
            self.by_hex = {uuid.UUID(p.task_id).hex: p for p in self.plans if p.task_id}
        return self.by_hex.get(task_hex)

    def step(self) -> None:
        now = time.monotonic()
        for name, job in self.kube.jobs().items():
            self.uids[name].add(job["metadata"]["uid"])
            if name in self.finished:
                continue
            plan = self.plan(name.split("-")[1])
            if plan is None:
                continue
            attempt = int(name.rsplit("-", 1)[1])
            try:
                if name not in self.started:
                    self.kube.schedule(name)
                    self.kube.run(name)
                    self.kube.log(name, plan.text)
                    hold = plan.hold_seconds if plan.holds_on_run(attempt) else 0
                    self.started[name] = (now + hold, 3 if plan.fails_on_run(attempt) else 0)
                elif now >= self.started[name][0]:
                    self.kube.finish(name, self.started[name][1])
                    self.finished.add(name)
            except Exception:  # noqa: BLE001 - no pod yet, or the Job was deleted (cancelled) meanwhile
                continue


class VmPlayer(threading.Thread):
    """cloud-init + systemd of each ACTIVE server of this installation (tests/plugins/openstack.py: play_vm).

    Every server id seen under an attempt's name is kept: two would be a duplicate server."""

    def __init__(self, conn, tag: str, root: Path) -> None:
        super().__init__(name="vm-player", daemon=True)
        self.conn, self.tag, self.root = conn, tag, root
        self.servers: dict[str, set[str]] = defaultdict(set)
        self.played: dict[str, Any] = {}
        self.halt = threading.Event()
        self.errors: list[str] = []

    def run(self) -> None:
        from tests.plugins.openstack import play_vm

        while not self.halt.is_set():
            try:
                for server in self.conn.compute.servers(tags=self.tag):
                    if server.status == "DELETED":
                        continue
                    self.servers[server.name].add(server.id)
                    if server.status == "ACTIVE" and server.id not in self.played:
                        self.played[server.id] = play_vm(self.conn, server.id, self.root / f"vm-{len(self.played)}")
            except Exception as exc:  # noqa: BLE001 - kept for the report; the next round looks again
                self.errors.append(repr(exc))
            self.halt.wait(1.0)

    def describe(self) -> list[str]:
        """For a soak that did not settle: each server Nova holds now, whether it was played, its Runner's log end."""
        lines = [f"vm player errors (last 5 of {len(self.errors)}): {self.errors[-5:]}"]
        try:
            servers = list(self.conn.compute.servers(tags=self.tag))
        except Exception as exc:  # noqa: BLE001 - a report, not a check
            return [*lines, f"Nova's server list failed: {exc!r}"]
        for server in servers:
            vm = self.played.get(server.id)
            state = "never played"
            if vm:
                state = (
                    f"played, Runner {'running' if vm.process.poll() is None else f'exited {vm.process.returncode}'}"
                )
            lines.append(
                f"server {server.name} {server.id}: {server.status} (task_state {server.task_state}, "
                f"created {server.created_at}, launched {server.launched_at}); {state}"
            )
            if vm and vm.log.exists():
                lines.append("  runner.log ends: " + vm.log.read_text(errors="replace")[-600:].replace("\n", "\n  "))
        return lines

    def stop(self) -> None:
        self.halt.set()
        self.join(180)  # its round may be waiting for a slow Nova: a Runner it starts then must be stopped too
        for vm in list(self.played.values()):
            if vm.process.poll() is None:
                os.killpg(vm.process.pid, signal.SIGKILL)
                vm.process.wait(timeout=5)
