"""Real guests under QEMU (issue 31 items 2 and 3): the Debian 12 image `make guest-image` builds, booted with
its own kernel and initrd, a config drive laid out as Nova writes one (label config-2,
openstack/latest/{meta_data.json,user_data}) carrying a user data unchanged, the serial console in a file, and
QEMU's user-mode network with `restrict=on`: the guest reaches nothing but the one `guestfwd` address that
leads to a port on this host's loopback (GUEST_SERVER_IP:GUEST_SERVER_PORT → 127.0.0.1:<port>).

KVM is used only where a probe boot reaches a known console line in time; TCG otherwise (the same guests).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import threading
import time
import uuid
from pathlib import Path

from tests import helpers

BUILD = helpers.BASE_DIR / "deploy" / "guest-image" / "build.sh"
QEMU = "qemu-system-x86_64"
# The address the guest calls CloudPivot at (QEMU's guestfwd: only this address leaves the guest).
GUEST_SERVER_IP = "10.0.2.100"
GUEST_SERVER_PORT = 443
GUEST_SERVER_URL = f"https://{GUEST_SERVER_IP}"
# A line the kernel prints once it has unpacked itself and its initrd and runs user space.
PROBE_LINE = "as init process"
KERNEL_LINE = "Linux version"


def qemu_installed() -> bool:
    return all(shutil.which(tool) for tool in (QEMU, "qemu-img", "genisoimage", "socat"))


def build_image(log: Path, timeout: float = 1800) -> Path:
    """The image's directory (deploy/guest-image/build.sh: cached by the hash of its inputs)."""
    with log.open("wb") as out:
        result = subprocess.run(["bash", str(BUILD)], stdout=out, stderr=subprocess.STDOUT, timeout=timeout)
    text = log.read_text()
    assert result.returncode == 0, f"make guest-image failed:\n{text[-4000:]}"
    image_dir = Path(text.strip().splitlines()[-1])
    if not image_dir.is_absolute():
        image_dir = helpers.BASE_DIR / image_dir
    assert (image_dir / "debian12.qcow2").exists(), text[-2000:]
    return image_dir


def kernel_args(*extra: str) -> str:
    return " ".join(("console=ttyS0,115200", "panic=-1", *extra))


def probe_kvm(image_dir: Path, work: Path, timeout: float = 20) -> tuple[bool, str]:
    """(KVM works, why): a boot of the image's kernel and initrd alone must print PROBE_LINE within `timeout`."""
    if not (os.path.exists("/dev/kvm") and os.access("/dev/kvm", os.R_OK | os.W_OK)):
        return False, "no usable /dev/kvm"
    console = work / "kvm-probe.console"
    command = [QEMU, "-accel", "kvm", "-m", "256", "-smp", "1", "-display", "none", "-no-reboot"]
    command += ["-serial", f"file:{console}", "-kernel", str(image_dir / "vmlinuz")]
    command += ["-initrd", str(image_dir / "initrd.img"), "-append", kernel_args("loglevel=7", "rdinit=/bin/true")]
    started = time.monotonic()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    try:
        while time.monotonic() - started < timeout:
            if console.exists() and PROBE_LINE in console.read_text(errors="replace"):
                return True, f"KVM reached {PROBE_LINE!r} in {time.monotonic() - started:.1f} s"
            if process.poll() is not None:
                error = process.stderr.read().decode(errors="replace").strip()
                return False, f"KVM probe exited {process.returncode} before {PROBE_LINE!r}: {error[-300:]}"
            time.sleep(0.1)
        tail = console.read_text(errors="replace")[-300:] if console.exists() else ""
        return False, f"KVM probe hung: no {PROBE_LINE!r} within {timeout:.0f} s (console ends {tail!r})"
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)


def config_drive(path: Path, user_data: str, *, instance_id: str, name: str) -> Path:
    """An ISO 9660 config drive as Nova's configdrive writer makes one (the same genisoimage options)."""
    tree = path.with_suffix(".d")
    latest = tree / "openstack" / "latest"
    latest.mkdir(parents=True, exist_ok=True)
    meta = {"uuid": instance_id, "name": name, "hostname": name, "launch_index": 0, "availability_zone": "nova"}
    (latest / "meta_data.json").write_text(json.dumps(meta))
    (latest / "user_data").write_text(user_data)
    command = ["genisoimage", "-o", str(path), "-ldots", "-allow-lowercase", "-allow-multidot", "-l"]
    command += ["-publisher", "CloudPivot tests", "-quiet", "-J", "-r", "-V", "config-2", str(tree)]
    subprocess.run(command, check=True, capture_output=True, timeout=60)
    return path


class Guest:
    """One QEMU guest: start() boots it; its serial console is `console`; `monitor` answers QEMU's monitor."""

    def __init__(self, *, image_dir: Path, work: Path, user_data: str, accel: str, server_port: int, name: str):
        self.image_dir, self.work, self.user_data, self.accel = image_dir, work, user_data, accel
        self.server_port, self.name = server_port, name
        self.console = work / "console.log"
        # A UNIX socket's path must be under 108 bytes: a short one in tmp, whatever the test's directory.
        self.monitor_path = Path(tempfile.gettempdir()) / f"cp-qemu-{uuid.uuid4().hex[:12]}.sock"
        self.process: subprocess.Popen | None = None
        self.started_at: float | None = None  # time.time() when QEMU was started
        self.booted_at: float | None = None  # time.time() when its kernel's first line was seen on the console

    def command(self) -> list[str]:
        accel = ["-accel", "kvm"] if self.accel == "kvm" else ["-accel", "tcg", "-cpu", "max"]
        # guestfwd's cmd: runs once per guest connection (its tcp: target would be one connection, made at start)
        forward = f"guestfwd=tcp:{GUEST_SERVER_IP}:{GUEST_SERVER_PORT}-cmd:socat - TCP:127.0.0.1:{self.server_port}"
        return [
            QEMU,
            *accel,
            *("-m", "512", "-smp", "1", "-display", "none", "-nodefaults"),
            *("-serial", f"file:{self.console}", "-monitor", f"unix:{self.monitor_path},server,nowait"),
            *("-kernel", str(self.image_dir / "vmlinuz"), "-initrd", str(self.image_dir / "initrd.img")),
            *("-append", kernel_args("loglevel=6", "root=/dev/vda", "rw")),
            *("-drive", f"file={self.work / 'disk.qcow2'},if=virtio,format=qcow2"),
            *("-drive", f"file={self.work / 'config-2.iso'},if=virtio,format=raw,readonly=on"),
            *("-netdev", f"user,id=net0,restrict=on,{forward}", "-device", "virtio-net-pci,netdev=net0"),
        ]

    def start(self) -> Guest:
        self.work.mkdir(parents=True, exist_ok=True)
        base = self.image_dir / "debian12.qcow2"
        subprocess.run(
            ["qemu-img", "create", "-q", "-f", "qcow2", "-F", "qcow2", "-b", str(base), str(self.work / "disk.qcow2")],
            check=True,
            timeout=60,
        )
        config_drive(self.work / "config-2.iso", self.user_data, instance_id=str(uuid.uuid4()), name=self.name)
        self.started_at = time.time()
        self.process = subprocess.Popen(
            self.command(),
            stdout=(self.work / "qemu.log").open("ab"),
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        (self.work / "qemu.pid").write_text(str(self.process.pid))
        try:  # QEMU refuses a bad option at once: say so in words rather than leave a guest that never boots
            self.process.wait(timeout=1)
        except subprocess.TimeoutExpired:
            return self
        raise OSError(f"QEMU exited {self.process.returncode}: {(self.work / 'qemu.log').read_text()[-600:]}")

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def console_text(self) -> str:
        return self.console.read_text(errors="replace") if self.console.exists() else ""

    def console_tail(self, chars: int = 3000) -> str:
        return self.console_text()[-chars:]

    def wait_console(self, text: str, timeout: float) -> float:
        """Seconds since start until `text` is on the console; fails with the console tail."""
        helpers.wait_for(
            lambda: text in self.console_text() or not self.alive(),
            timeout=timeout,
            interval=0.2,
            what=lambda: f"{text!r} on the guest's console; it ends:\n{self.console_tail()}",
        )
        assert text in self.console_text(), f"QEMU exited; the console ends:\n{self.console_tail()}"
        return time.time() - (self.started_at or 0)

    def monitor(self, command: str) -> str:
        """A QEMU human-monitor command (set_link net0 off, system_reset, …); its answer."""
        with socket.socket(socket.AF_UNIX) as sock:
            sock.settimeout(10)
            sock.connect(str(self.monitor_path))
            sock.recv(4096)  # the banner and prompt
            sock.sendall(command.encode() + b"\n")
            time.sleep(0.3)
            return sock.recv(65536).decode(errors="replace")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)
        self.monitor_path.unlink(missing_ok=True)


def stop_pid_file(path: Path) -> None:
    """Kill the QEMU whose pid `path` holds (a guest a backend started in another object)."""
    with contextlib.suppress(OSError, ValueError, ProcessLookupError):
        os.killpg(int(path.read_text().strip()), signal.SIGKILL)


def make_ca(work: Path) -> tuple[Path, Path, Path]:
    """A self-signed CA and a server certificate for GUEST_SERVER_IP: (ca.pem, server.pem, server.key)."""
    work.mkdir(parents=True, exist_ok=True)
    ca, ca_key = work / "ca.pem", work / "ca.key"
    cert, key, csr = work / "server.pem", work / "server.key", work / "server.csr"
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    run = lambda *args: subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)  # noqa: E731
    run("req", "-x509", *ec, "-keyout", str(ca_key), "-out", str(ca), "-days", "3", "-subj", "/CN=CloudPivot test CA")
    run("req", *ec, "-keyout", str(key), "-out", str(csr), "-subj", f"/CN={GUEST_SERVER_IP}")
    extensions = work / "server.ext"
    extensions.write_text(f"subjectAltName=IP:{GUEST_SERVER_IP}\nextendedKeyUsage=serverAuth\n")
    run(
        *("x509", "-req", "-in", str(csr), "-CA", str(ca), "-CAkey", str(ca_key), "-CAcreateserial", "-days", "3"),
        *("-extfile", str(extensions), "-out", str(cert)),
    )
    return ca, cert, key


class TlsProxy:
    """TLS terminated on 127.0.0.1:<port> (a thread of this process), each connection piped to `target_port`."""

    def __init__(self, cert: Path, key: Path, target_port: int):
        self.context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.context.load_cert_chain(cert, key)
        self.target_port = target_port
        self.port = helpers.free_port()
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._run, name="tls-proxy", daemon=True)

    def start(self) -> TlsProxy:
        self.thread.start()
        assert self.ready.wait(10), "the TLS proxy did not start"
        return self

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        server = self.loop.run_until_complete(
            asyncio.start_server(self._serve, "127.0.0.1", self.port, ssl=self.context)
        )
        self.ready.set()
        try:
            self.loop.run_forever()
        finally:
            server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            writer.close()
            return
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer), return_exceptions=True)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    finally:
        with contextlib.suppress(Exception):
            writer.close()
