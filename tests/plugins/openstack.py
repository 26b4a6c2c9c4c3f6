"""A real OpenStack on loopback (deploy/dev/openstack/up.sh) and the VM's part, played honestly.

The fake virt driver runs no guest. `play_vm` does what cloud-init and systemd would do in it: it reads the
server's user data back from Nova (the API, not CloudPivot's copy), writes the files it lists under a
directory standing in for the VM's root (the host program among them), and starts that very program with
exactly that configuration, as the unit's ExecStart says.
"""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import gzip
import json
import os
import secrets
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from types import SimpleNamespace

import openstack
import openstack.config
import pytest
import yaml

from clusters.models import CloudConnection
from tests import helpers

UP = helpers.BASE_DIR / "deploy" / "dev" / "openstack" / "up.sh"
STATE = Path(os.environ.get("CP_OS_STATE", "/tmp/cloudpivot-openstack"))
CLOUD = "cloudpivot-dev"
# One installation id per test session: our server lists see only this session's servers.
INSTALLATION = f"test-{uuid.uuid4().hex[:8]}"


def pytest_collection_modifyitems(items):
    """Every test on the development OpenStack is marked `openstack`, however it reaches the fixture:
    `-m "not openstack"` runs the rest (.ci/run's embedded half, which leaves the one dev cloud to the other)."""
    for item in items:
        if "openstack_cloud" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.openstack)


@pytest.fixture(scope="session")
def openstack_cloud(tmp_path_factory):
    """The development OpenStack, started (installed, configured) if needed; an admin SDK connection to it."""
    log = tmp_path_factory.mktemp("openstack") / "up.log"
    with log.open("wb") as out:
        result = subprocess.run(["bash", str(UP)], stdout=out, stderr=subprocess.STDOUT, timeout=1200)
    assert result.returncode == 0, f"up.sh failed:\n{log.read_text()[-4000:]}"
    clouds_yaml = STATE / "clouds.yaml"
    config = openstack.config.OpenStackConfig(config_files=[str(clouds_yaml)])
    conn = openstack.connection.Connection(config=config.get_one(cloud=CLOUD))
    sweep_volumes(conn, stale_after=dt.timedelta(hours=3))  # what test sessions that died left in Cinder
    yield SimpleNamespace(clouds_yaml=str(clouds_yaml), cloud=CLOUD, conn=conn)
    tag = f"cloudpivot-{INSTALLATION}"
    for server in conn.compute.servers(tags=tag):  # whatever a failed test left behind
        conn.compute.delete_server(server.id, ignore_missing=True)
    sweep_volumes(conn, installation=INSTALLATION)


def sweep_volumes(conn, *, installation: str = "", stale_after: dt.timedelta | None = None) -> None:
    """Delete test sessions' free Cinder volumes, their snapshots first (Cinder keeps a volume that has any):
    this session's (`installation`), or any test session's made more than `stale_after` ago (CI runs two
    sessions side by side; neither lasts that long). The dev cloud's volume quota is finite."""
    now = dt.datetime.now(dt.UTC)
    for volume in conn.block_storage.volumes(details=True):
        mark = (volume.metadata or {}).get("cloudpivot_installation", "")
        if volume.status != "available" or not mark.startswith("test-"):
            continue
        made = dt.datetime.fromisoformat(volume.created_at).replace(tzinfo=dt.UTC)
        if mark != installation and not (stale_after is not None and now - made > stale_after):
            continue
        for snapshot in conn.block_storage.snapshots(volume_id=volume.id):
            conn.block_storage.delete_snapshot(snapshot, ignore_missing=True)
            conn.block_storage.wait_for_delete(snapshot, interval=1, wait=60)
        conn.block_storage.delete_volume(volume, ignore_missing=True)


@contextlib.contextmanager
def tenant_of_its_own(openstack_cloud, tmp_path: Path, *, cloud: str, hide: tuple[str, ...] = ()):
    """A Keystone project of its own with a member user, a public 4 KiB image named as the project (the
    admin's images are private to the admin's project), and a clouds.yaml (cloud `cloud`) to reach it as that
    user. `hide`: service types left out of its catalog (Keystone's endpoint filter: once a project has
    endpoints associated, its tokens' catalog lists only those), as a cloud without that service."""
    conn = openstack_cloud.conn
    name = f"cp-{cloud}-{INSTALLATION}-{secrets.token_hex(3)}"
    password = secrets.token_urlsafe(16)
    project = conn.identity.create_project(name=name, domain_id="default")
    user = conn.identity.create_user(name=name, password=password, default_project_id=project.id, domain_id="default")
    conn.identity.assign_project_role_to_user(project, user, conn.identity.find_role("member"))
    if hide:
        types = {service.id: service.type for service in conn.identity.services()}
        for endpoint in conn.identity.endpoints():
            if types.get(endpoint.service_id) not in hide:
                conn.identity.put(f"/OS-EP-FILTER/projects/{project.id}/endpoints/{endpoint.id}").raise_for_status()
    auth = conn.config.config["auth"]
    clouds_yaml = tmp_path / f"{cloud}-clouds.yaml"
    entry = {
        "auth": {
            "auth_url": auth["auth_url"],
            "username": name,
            "password": password,
            "project_name": name,
            "user_domain_name": "Default",
            "project_domain_name": "Default",
        },
        "region_name": conn.config.region_name,
        "identity_api_version": 3,
    }
    clouds_yaml.write_text(yaml.safe_dump({"clouds": {cloud: entry}}))
    image = conn.image.create_image(
        name=name, disk_format="raw", container_format="bare", visibility="public", data=b"\0" * 4096
    )
    try:
        yield SimpleNamespace(name=name, project=project, clouds_yaml=str(clouds_yaml), cloud=cloud, image=name)
    finally:
        empty_project(conn, project.id)
        conn.image.delete_image(image, ignore_missing=True)
        conn.identity.delete_user(user, ignore_missing=True)
        conn.identity.delete_project(project, ignore_missing=True)


def tenant_connection(tenant, cloud_id: str, *projects, **options) -> CloudConnection:
    """A connection to a `tenant_of_its_own`, as its member, granted to `projects`; `options` add to the usual."""
    connection = CloudConnection.objects.create(
        cloud_id=cloud_id,
        backend="openstack",
        credentials_ref=tenant.clouds_yaml,
        options={"cloud": tenant.cloud, "flavor": "cp.tiny", "image": tenant.image, "networks": "none", **options},
    )
    connection.projects.add(*projects)
    return connection


def empty_project(conn, project_id: str) -> None:
    """Delete the servers and volumes a test left in a project of its own, before the project goes (Keystone
    would leave them behind, holding the dev cloud's capacity, with no project to find them by)."""
    servers = list(conn.compute.servers(all_projects=True, project_id=project_id))
    for server in servers:
        conn.compute.delete_server(server, ignore_missing=True)
    for server in servers:
        conn.compute.wait_for_delete(server, interval=1, wait=120)
    for volume in conn.block_storage.volumes(all_projects=True, project_id=project_id):
        for snapshot in conn.block_storage.snapshots(all_projects=True, volume_id=volume.id):
            conn.block_storage.delete_snapshot(snapshot, ignore_missing=True)
            conn.block_storage.wait_for_delete(snapshot, interval=1, wait=60)
        with contextlib.suppress(openstack.exceptions.ResourceTimeout):  # detached once its server is gone
            conn.block_storage.wait_for_status(volume, "available", interval=1, wait=60)
        conn.block_storage.delete_volume(volume, ignore_missing=True)


def os_dev_connection(openstack_cloud, settings, *projects) -> CloudConnection:
    """An `os-dev` connection to the development OpenStack, granted to `projects`, with this session's
    installation id set (so what CloudPivot tags and lists there is this session's)."""
    settings.INSTALLATION_ID = INSTALLATION
    connection = CloudConnection.objects.create(
        cloud_id="os-dev",
        backend="openstack",
        credentials_ref=openstack_cloud.clouds_yaml,
        options={"cloud": openstack_cloud.cloud, "flavor": "cp.tiny", "image": "cp-runner-fake", "networks": "none"},
    )
    connection.projects.add(*projects)
    return connection


@pytest.fixture
def os_live(live, world, openstack_cloud, settings):
    """The `live` world (real Daphne, jobs inline) plus an `os-dev` connection to the real OpenStack."""
    settings.INSTALLATION_ID = INSTALLATION
    settings.RUNNER_HEARTBEAT_DEADLINE_SECONDS = 60
    connection = CloudConnection.objects.create(
        cloud_id="os-dev",
        backend="openstack",
        credentials_ref=openstack_cloud.clouds_yaml,
        options={
            "cloud": openstack_cloud.cloud,
            "flavor": "cp.tiny",
            "image": "cp-runner-fake",
            "networks": "none",
            "boot_deadline_seconds": 300,
        },
    )
    connection.projects.add(world.alpha)
    yield SimpleNamespace(connection=connection, conn=openstack_cloud.conn, daphne=live, world=world)
    conn = openstack_cloud.conn
    for server in list(conn.compute.servers(tags=f"cloudpivot-{INSTALLATION}")):  # leave nothing to the next test
        conn.compute.delete_server(server.id, ignore_missing=True)


@pytest.fixture
def vms(tmp_path):
    """play(server_id) → a VM stand-in whose host program runs on this host; all are stopped at the end."""
    started: list[SimpleNamespace] = []

    def play(conn, server_id: str) -> SimpleNamespace:
        vm = play_vm(conn, server_id, tmp_path / f"vm-{len(started)}")
        started.append(vm)
        return vm

    yield play
    for vm in started:
        if vm.process.poll() is None:
            os.killpg(vm.process.pid, signal.SIGKILL)
            vm.process.wait(timeout=5)


def play_vm(conn, server_id: str, root: Path) -> SimpleNamespace:
    """cloud-init + systemd of the VM, from the user data Nova holds for the server."""
    server = conn.compute.get_server(server_id)
    assert server.user_data, "Nova returned no user data for the server"
    text = base64.b64decode(server.user_data).decode()
    assert text.startswith("#cloud-config\n")
    document = yaml.safe_load(text)
    files = {entry["path"]: entry for entry in document["write_files"]}
    for path, entry in files.items():
        target = root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        if entry.get("encoding") == "b64":
            target.write_bytes(base64.b64decode(entry["content"]))
        elif entry.get("encoding") == "gz+b64":
            target.write_bytes(gzip.decompress(base64.b64decode(entry["content"])))
        else:
            assert "encoding" not in entry, entry["encoding"]
            target.write_text(entry["content"])
        target.chmod(int(entry["permissions"], 8))
    assert ["systemctl", "enable", "--now", "cloudpivot-agent.service"] in document["runcmd"]
    unit = files["/etc/systemd/system/cloudpivot-agent.service"]["content"]
    assert "KillMode=process" in unit  # restarting the host program leaves the programs to their supervisors
    exec_start = next(line for line in unit.splitlines() if line.startswith("ExecStart="))
    _python, program, config_path = exec_start.removeprefix("ExecStart=").replace(" --config ", " ").split()
    config = json.loads((root / config_path.lstrip("/")).read_text())
    # The VM's absolute paths, under the stand-in root
    host_config = {key: str(root / v.lstrip("/")) if v.startswith("/") else v for key, v in config.items()}
    (root / "host-agent.json").write_text(json.dumps(host_config))
    log = root / "agent.log"
    process = subprocess.Popen(
        [sys.executable, str(root / program.lstrip("/")), "--config", str(root / "host-agent.json")],
        stdin=subprocess.DEVNULL,
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8", "HOME": str(root)},
    )
    return SimpleNamespace(
        root=root, process=process, log=log, config=config, host_config=host_config, files=files, user_data=text
    )
