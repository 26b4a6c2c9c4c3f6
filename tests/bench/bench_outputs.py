"""Uploads of declared outputs to Swift beside the `swift upload` command, in the same run (issue 28).

Collected only by `make bench-outputs` (the development OpenStack must be up). Two shapes, each sent twice:
by `swift upload` (python3-swiftclient, the admin's credentials, its default 10 object threads) and by the host
program's own collection (`collect_outputs`, run as the VM's supervisor runs it: system python3, the standard
library, one prefix-scoped temporary URL). Wall time, throughput and the CPU of each process tree; ours as a
share of `swift upload`'s throughput. CloudPivot's server takes no part in the bytes: it signs one URL per
attempt (its cost is printed too). BENCH_SHORT=1: 100 MB and 200 files.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

from clusters.backends.openstack.client import OpenStackClient
from clusters.backends.openstack.object_store import SwiftStore
from clusters.models import CloudConnection
from tasks.services.submission import task_submit
from tests import helpers
from tests.bench.served import tree_cpu

pytestmark = [pytest.mark.django_db(transaction=True)]

SHORT = os.environ.get("BENCH_SHORT") == "1"
BIG_MB = 100 if SHORT else 1024
SMALL_FILES = 200 if SHORT else 1000
OPENSTACK = Path(__file__).resolve().parents[2] / "deploy" / "dev" / "openstack"
AGENT = Path(__file__).resolve().parents[2] / "runner_api" / "agent"
COLLECT = (
    "import json, sys; sys.path.insert(0, sys.argv[1]); from cloudpivot_outputs import collect_outputs; "
    "m = collect_outputs(sys.argv[2], json.loads(sys.argv[3])); "
    "print(json.dumps({'files': len(m['files']), 'missing': m['missing'][:3]}))"
)


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(command: list[str]) -> tuple[float, float, str]:
    """Wall seconds, CPU seconds of the process and its children, its output."""
    cpu, start = children_cpu(), time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    assert done.returncode == 0, done.stderr[-2000:]
    return wall, children_cpu() - cpu, done.stdout


def make_files(root: Path) -> tuple[Path, Path]:
    big = root / "big"
    big.mkdir()
    block = os.urandom(16 * 1024 * 1024)
    with (big / "model.bin").open("wb") as out:
        for _ in range(BIG_MB // 16):
            out.write(block)
    small = root / "small" / "parts"
    small.mkdir(parents=True)
    for index in range(SMALL_FILES):
        (small / f"part-{index:04d}.txt").write_bytes(os.urandom(10 * 1024))
    return big, small.parent


def test_outputs_upload_beside_swift_upload(openstack_cloud, tmp_path):
    connection = CloudConnection(
        cloud_id="bench", backend="openstack", credentials_ref=openstack_cloud.clouds_yaml,
        options={"cloud": openstack_cloud.cloud, "results_container": "cloudpivot-bench"},
    )  # fmt: skip
    store = SwiftStore(OpenStackClient(connection))
    store.upload_target("cp/warm-up/", 60)  # the token and the container's key, once per process
    big, small = make_files(tmp_path)
    rows = []
    for label, workdir, declared, size in (
        (f"1 file of {BIG_MB} MB", big, [{"path": "model.bin"}], BIG_MB * 1024 * 1024),
        (f"{SMALL_FILES} files of 10 KB", small, [{"path": "parts"}], SMALL_FILES * 10 * 1024),
    ):
        for run in range(2):
            swift = ["bash", "-c", f". {OPENSTACK}/env.sh && cd {workdir} && swift upload bench-swift-cli-{run} ."]
            s_wall, s_cpu, _ = timed(swift)
            cpu = time.process_time()
            target = store.upload_target(f"cp/bench-{run}-{len(rows)}/", 3600)
            sign_ms = (time.process_time() - cpu) * 1000
            outputs = json.dumps({"declared": declared, "store": target})
            o_wall, o_cpu, printed = timed(["/usr/bin/python3", "-c", COLLECT, str(AGENT), str(workdir), outputs])
            report = json.loads(printed)
            assert report["missing"] == [], report
            mb = size / 1e6
            rows.append(
                f"| {label} (run {run + 1}) | {s_wall:.2f} s, {mb / s_wall:.0f} MB/s, CPU {s_cpu:.2f} s "
                f"| {o_wall:.2f} s, {mb / o_wall:.0f} MB/s, CPU {o_cpu:.2f} s | {s_wall / o_wall:.0%} "
                f"| {sign_ms:.1f} ms |"
            )
    rows += stage_in_rows(openstack_cloud, store, big, tmp_path)
    for run in range(2):  # leave the dev store as it was
        subprocess.run(
            ["bash", "-c", f". {OPENSTACK}/env.sh && swift delete bench-swift-cli-{run}"], capture_output=True
        )
    store.delete_prefix("cp/")
    print(
        "\n| what | `swift upload` / `swift download` | CloudPivot's host program | ours / swift (throughput) "
        "| server: signing |"
    )
    print("|---|---|---|---|---|")
    print("\n".join(rows))
    sys.stdout.flush()


STAGE = (
    "import json, sys; sys.path.insert(0, sys.argv[1]); from cloudpivot_stage import stage_in; "
    "problem = stage_in([json.loads(sys.argv[2])]); assert not problem, problem"
)


def stage_in_rows(openstack_cloud, store: SwiftStore, big: Path, tmp_path: Path) -> list[str]:
    """The big file staged in (an `object` reference) beside `swift download` of the same object."""
    rows = []
    store.client.conn().object_store.create_container(name="bench-inputs")
    subprocess.run(
        ["bash", "-c", f". {OPENSTACK}/env.sh && cd {big} && swift upload bench-inputs model.bin"], check=True
    )
    size = (big / "model.bin").stat().st_size
    for run in range(2):
        into = tmp_path / f"swift-download-{run}"
        into.mkdir()
        download = f". {OPENSTACK}/env.sh && cd {into} && swift download bench-inputs model.bin"
        s_wall, s_cpu, _ = timed(["bash", "-c", download])
        cpu = time.process_time()
        entry = store.stage_in("bench-inputs/", str(tmp_path / f"staged-{run}"), 3600)
        sign_ms = (time.process_time() - cpu) * 1000
        o_wall, o_cpu, _ = timed(["/usr/bin/python3", "-c", STAGE, str(AGENT), json.dumps(entry)])
        assert (tmp_path / f"staged-{run}" / "model.bin").stat().st_size == size
        mb = size / 1e6
        rows.append(
            f"| stage in 1 file of {BIG_MB} MB (run {run + 1}) "
            f"| {s_wall:.2f} s, {mb / s_wall:.0f} MB/s, CPU {s_cpu:.2f} s "
            f"| {o_wall:.2f} s, {mb / o_wall:.0f} MB/s, CPU {o_cpu:.2f} s | {s_wall / o_wall:.0%} | {sign_ms:.1f} ms |"
        )
    subprocess.run(["bash", "-c", f". {OPENSTACK}/env.sh && swift delete bench-inputs"], capture_output=True)
    return rows


def served_task(os_live, vms, document: dict) -> tuple[float, float, float]:
    """(CloudPivot's CPU, the VM stand-in's CPU, wall seconds) over a task's whole life, served."""
    server_before = sum(tree_cpu([os_live.daphne.process.pid]).values()) + time.process_time()
    children_before, start = children_cpu(), time.perf_counter()
    task, _ = task_submit(user=os_live.world.bob, document={"cloud": "os-dev", **document})
    task = helpers.drive(task, {"STARTING"}, timeout=60)
    server = helpers.wait_for(
        lambda: (s := os_live.conn.compute.get_server(task.attempts.get().external_ref)).status == "ACTIVE" and s,
        timeout=60,
        what="the server ACTIVE",
    )
    vm = vms(os_live.conn, server.id)
    task = helpers.drive(task, {"SUCCEEDED", "FAILED", "UNKNOWN"}, timeout=600)
    assert task.state == "SUCCEEDED", task.state_reason
    vm.process.wait(timeout=60)
    execution_cpu = children_cpu() - children_before  # the VM stand-in, reaped: its whole tree
    server_cpu = sum(tree_cpu([os_live.daphne.process.pid]).values()) + time.process_time() - server_before
    return server_cpu, execution_cpu, time.perf_counter() - start


def test_a_served_task_leaves_the_bytes_to_the_execution(os_live, vms):
    """CloudPivot's share of a task that uploads one big output, beside the same task without the output and
    running as long: Daphne's process tree and this process (the reconcile passes and jobs run here inline, as a
    worker would, polling the whole time), and the VM stand-in's tree (host program, supervisor, program)."""
    write = (
        "b = bytes(range(256)) * 65536\nwith open('big.bin', 'wb') as f:\n"
        f"    for _ in range({BIG_MB // 16}): f.write(b)\n"
    )
    with_output = served_task(os_live, vms, {"command": ["python3", "-c", write], "outputs": [{"path": "big.bin"}]})
    pause = f"import time; time.sleep({with_output[2] - 8:.1f})"  # about as long, with nothing to upload
    without = served_task(os_live, vms, {"command": ["python3", "-c", write + pause]})
    print(
        f"\nserved, {BIG_MB} MB output: CloudPivot {with_output[0]:.2f} s CPU, VM {with_output[1]:.2f} s, "
        f"{with_output[2]:.1f} s"
    )
    print(f"served, no output, as long: CloudPivot {without[0]:.2f} s CPU, VM {without[1]:.2f} s, {without[2]:.1f} s")
    extra_server, extra_vm = with_output[0] - without[0], with_output[1] - without[1]
    print(f"the output's cost: CloudPivot {extra_server:+.2f} s CPU; the execution {extra_vm:+.2f} s")
