"""Real guests under QEMU (marker `guest`; tests/guest_vm.py boots them, tests/guest_backend.py is the backend).

`guest_host` (session): the image `make guest-image` builds (the same cached step), and the accelerator a probe
boot chose (KVM only when it reaches a known console line in time, TCG otherwise). `guest_cloud`: a Daphne of the
test's own behind a TLS proxy with a self-signed CA, and a `guest` connection whose tasks each boot a guest with
the OpenStack backend's user data; the guest's one reachable address leads to that proxy.
"""

from __future__ import annotations

import signal
from types import SimpleNamespace

import pytest
from django_q.conf import Conf

from clusters.models import CloudConnection
from tests import guest_backend, guest_vm, helpers


def pytest_collection_modifyitems(items):
    """A test that boots a guest is marked `guest` (`-m guest` runs them alone), however it reaches the fixture."""
    for item in items:
        if "guest_host" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.guest)


@pytest.fixture(scope="session")
def guest_host(tmp_path_factory):
    if not guest_vm.qemu_installed():
        pytest.skip("QEMU is not installed: apt-get install qemu-system-x86 qemu-utils (.ci/run installs it)")
    work = tmp_path_factory.mktemp("guest-host")
    image_dir = guest_vm.build_image(work / "build.log")
    kvm, why = guest_vm.probe_kvm(image_dir, work)
    yield SimpleNamespace(image_dir=image_dir, accel="kvm" if kvm else "tcg", accel_reason=why, work=work)
    for guest in list(guest_backend.GUESTS.values()):
        guest.stop()
    guest_backend.GUESTS.clear()


@pytest.fixture(scope="session")
def guest_tls(tmp_path_factory):
    """The CA (a file under the credentials directory: tmp, in the test settings) and the server's certificate."""
    ca, cert, key = guest_vm.make_ca(tmp_path_factory.mktemp("guest-tls"))
    return SimpleNamespace(ca=ca, cert=cert, key=key)


@pytest.fixture
def guest_cloud(guest_host, guest_tls, transactional_db, world, settings, tmp_path, server_logs, monkeypatch):
    """Daphne (its allowed hosts include the guest's address for it) behind TLS, and the `guest` connection."""
    from clusters.backends import BACKENDS

    port = helpers.free_port()
    env = helpers.server_environment(port=port, runs_dir=tmp_path / "runs")
    env["DJANGO_ALLOWED_HOSTS"] = f"127.0.0.1,localhost,{guest_vm.GUEST_SERVER_IP}"
    process = helpers.start_daphne(port=port, env=env, log=server_logs / f"daphne-guest-{port}.log")
    proxy = guest_vm.TlsProxy(guest_tls.cert, guest_tls.key, port).start()
    settings.RUNNER_SERVER_URL = f"http://127.0.0.1:{port}"
    # A guest under TCG boots in tens of seconds: silence before its first word is its boot, not a lost Runner.
    settings.RUNNER_HEARTBEAT_DEADLINE_SECONDS = 300
    monkeypatch.setattr(Conf, "SYNC", True)
    monkeypatch.setitem(BACKENDS, "guest", "tests.guest_backend.GuestBackend")
    connection = CloudConnection.objects.create(
        cloud_id="guest",
        backend="guest",
        options={
            "runs_dir": str(tmp_path / "guests"),
            "image_dir": str(guest_host.image_dir),
            "accel": guest_host.accel,
            "server_port": proxy.port,
            "callback_url": guest_vm.GUEST_SERVER_URL,
            "ca_file": str(guest_tls.ca),
        },
    )
    connection.projects.add(world.alpha)
    yield SimpleNamespace(connection=connection, host=guest_host, port=port, proxy=proxy, world=world)
    for name, guest in list(guest_backend.GUESTS.items()):
        guest.stop()
        del guest_backend.GUESTS[name]
    proxy.stop()
    helpers.stop_process_group(process, sig=signal.SIGKILL)
