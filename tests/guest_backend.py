"""A test backend whose every attempt boots a real guest (tests/guest_vm.py) as a Nova server would be booted:
the user data is exactly what the OpenStack backend's cloudinit module makes for the attempt (its options, its
one-time bootstrap secret), on a config drive; cloud-init and systemd in the guest start the host program,
which bootstraps and speaks protocol v2 to the test's server over QEMU's user network and TLS.

The connection's options: `runs_dir` (a directory per attempt: the overlay disk, config drive, console),
`image_dir` and `accel` (from the session's `guest_host` fixture), `server_port` (the TLS port on loopback the
guest's one address leads to), and the OpenStack options user_data() reads (callback_url, ca_file, …).
"""

from __future__ import annotations

import datetime as dt
import shutil
import time
from pathlib import Path

from clusters.backends.base import AttemptRef, BackendError, ExternalRef, Observation
from clusters.backends.local import LocalBackend
from clusters.backends.openstack import cloudinit
from clusters.backends.openstack.client import DEFAULT_OPTIONS
from tests.guest_vm import KERNEL_LINE, Guest, stop_pid_file

# The guests this process started, by external name (a backend object lives for one pass; the guests do not).
GUESTS: dict[str, Guest] = {}


class GuestBackend(LocalBackend):
    needs_bootstrap_secret = True
    hands_out = False  # started by the reconcile pass, as in a cloud (main's ExecutionBackend.hands_out)

    def ensure_started(self, attempt: AttemptRef) -> ExternalRef:
        guest = GUESTS.get(attempt.external_name)
        if guest is not None and guest.alive():
            return ExternalRef(ref=str(guest.work), adopted=True)
        options = {**DEFAULT_OPTIONS, **self.connection.options}
        text = cloudinit.user_data(options, attempt.bootstrap_secret)
        guest = Guest(
            image_dir=Path(options["image_dir"]),
            work=self.runs_dir / attempt.external_name,
            user_data=text,
            accel=options["accel"],
            server_port=int(options["server_port"]),
            name=attempt.external_name,
        )
        try:
            guest.start()
        except OSError as exc:
            raise BackendError(f"could not start QEMU: {exc}") from exc
        GUESTS[attempt.external_name] = guest
        return ExternalRef(ref=str(guest.work), adopted=False)

    def observe(self, attempts: list[AttemptRef]) -> list[Observation]:
        return [self._observe_one(attempt) for attempt in attempts]

    def _observe_one(self, attempt: AttemptRef) -> Observation:
        guest = GUESTS.get(attempt.external_name)
        if guest is None:
            return Observation(attempt.external_name, exists=False, phase="gone", reason="no guest")
        if guest.alive():
            # Booted: the guest's kernel has printed its first line (Nova's ACTIVE, seen from inside), noted at the
            # first observation that finds it on the console (observations come about once a second).
            if guest.booted_at is None and KERNEL_LINE in guest.console_text():
                guest.booted_at = time.time()
            evidence = {"console": str(guest.console)}
            if guest.booted_at is not None:
                evidence["active_since"] = dt.datetime.fromtimestamp(guest.booted_at, tz=dt.UTC).isoformat()
            return Observation(attempt.external_name, exists=True, phase="running", evidence=evidence)
        return Observation(
            attempt.external_name,
            exists=True,
            phase="gone",
            reason=f"the guest is off; its console ends: {guest.console_tail(800)}",
        )

    def stop(self, attempt: AttemptRef) -> None:
        guest = GUESTS.get(attempt.external_name)
        if guest is not None:
            guest.stop()
        stop_pid_file(self.runs_dir / attempt.external_name / "qemu.pid")

    def cleanup(self, attempt: AttemptRef) -> bool:
        """The server deleted: QEMU ended, its disk gone (the console is kept for the test to read)."""
        self.stop(attempt)
        work = self.runs_dir / attempt.external_name
        for name in ("disk.qcow2", "config-2.iso"):
            (work / name).unlink(missing_ok=True)
        shutil.rmtree(work / "config-2.d", ignore_errors=True)
        return True
