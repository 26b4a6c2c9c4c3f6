"""The `openstack` execution backend: one Nova server per Attempt, booted with cloud-init that starts the Runner.

The Runner's reports are the truth about the program (uses_runner): the server's status is only
evidence. Observation costs one server LIST per connection per pass (by our installation tag), whatever
the number of tasks (plus one GET for a server in ERROR, whose fault Nova leaves out of lists). The VM's
user data holds a one-time bootstrap secret that the task service issued, not the attempt credential.
"""

from __future__ import annotations

import base64
import datetime as dt
import re
from typing import Any

from django.conf import settings

from clusters.backends.base import (
    TASK_FIELDS_EVERYWHERE,
    AttemptRef,
    BackendError,
    ExecutionBackend,
    ExternalRef,
    FitLimit,
    Health,
    Observation,
)
from clusters.backends.openstack import checks, cloudinit, egress_group, fit, inventory
from clusters.backends.openstack.client import (
    META_ATTEMPT,
    META_INSTALLATION,
    META_TASK,
    OpenStackClient,
    installation_tag,
)
from clusters.backends.openstack.object_store import SwiftStore
from clusters.backends.openstack.observation import server_observation, survivor
from clusters.data_refs import OBJECT
from clusters.models import CloudConnection
from clusters.ownership import check_image_for_project

CONSOLE_TIMEOUT_SECONDS = 10


class OpenStackBackend(ExecutionBackend):
    uses_runner = True
    # A security group per attempt (egress_group.py); with `none` the program also gets a network namespace.
    egress_closes = frozenset({"none", "list"})
    needs_bootstrap_secret = True
    inventory_kinds = inventory.INVENTORY_KINDS
    # A VM of the connection's flavor: an image from Glance, CPU and memory up to the flavor's; no GPUs, no claims.
    task_fields = TASK_FIELDS_EVERYWHERE | {"image", "cpu", "memory_mb"}
    image_choices = "inventory"
    data_kinds = frozenset({OBJECT})  # staged in from the project's Swift by the host program (object_store.py)

    def __init__(self, connection: CloudConnection) -> None:
        self.connection = connection
        self.client = OpenStackClient(connection)
        self.options = self.client.options
        self._learned: dict[str, Any] = {}

    # ------------------------------------------------------------------ interface
    def validate(self, spec: dict[str, Any]) -> list[dict[str, str]]:
        cloud = self.connection.cloud_id
        errors = []
        if (spec.get("resources") or {}).get("gpu"):
            errors.append({"field": "resources.gpu", "message": f"the {cloud} cloud offers no GPU flavors here"})
        for field, what in (("volumes", "volume claims"), ("node_selector", "node selectors"), ("tolerations", "")):
            if spec.get(field):
                errors.append(
                    {
                        "field": field,
                        "message": f"the {cloud} cloud runs tasks in VMs and has no {what or field}; remove `{field}`",
                    }
                )
        for index, ref in enumerate(spec.get("data") or []):
            if ref["kind"] == OBJECT:
                errors += self._object_ref_errors(index, ref)
        if spec.get("outputs") and not self.options["results_container"]:
            message = f"the {cloud} cloud keeps no outputs (its `results_container` option is empty); remove `outputs`"
            errors.append({"field": "outputs", "message": message})
        if self.options["runner_bootstrap"] not in cloudinit.DELIVERY_MODES:
            note = checks.delivery_note(self.options["runner_bootstrap"], self.options["runner_path"])
            errors.append({"field": "cloud", "message": f"the {cloud} cloud is set wrong: {note}"})
        if not (spec.get("image") or self.options["image"]):
            errors.append({"field": "image", "message": f"name a VM image: the {cloud} cloud has no default image"})
        return errors

    def _object_ref_errors(self, index: int, ref: dict[str, Any]) -> list[dict[str, str]]:
        container = ref["ref"].partition("/")[0]
        if not ref.get("path"):
            return [{"field": f"data.{index}.path", "message": "an object reference needs `path`, where it is staged"}]
        if not container:
            return [{"field": f"data.{index}.ref", "message": "name it as container/prefix, e.g. datasets/mnist/"}]
        if container == self.options["results_container"]:  # other projects' outputs live there too
            message = f"the results container {container!r} cannot be staged in; download outputs through their links"
            return [{"field": f"data.{index}.ref", "message": message}]
        return []

    def _container_problem(self, container: str, project: str) -> str:
        """A project reads its own containers: one marked for it (`X-Container-Meta-Cloudpivot-Project`), or any
        unmarked one when the connection serves that project alone (then the account is the project's)."""
        owner = SwiftStore(self.client).container_owner(container)
        cloud = self.connection.cloud_id
        if owner is None:
            return f"the {cloud} cloud's object store has no container {container!r}"
        if owner and owner != project:
            return f"the container {container!r} is another project's"
        if not owner and self.connection.projects.count() > 1:
            return (
                f"the {cloud} cloud serves several projects, so a container must be marked as this project's: "
                f"set the header X-Container-Meta-Cloudpivot-Project: {project} on {container!r}"
            )
        return ""

    def stage_in(self, spec: dict[str, Any], seconds: int) -> list[dict[str, Any]]:
        """The assignment's `stage_in`: one entry per `object` reference, or its error in words (a container gone
        since submission) for the host program to fail the attempt with."""
        store, entries = SwiftStore(self.client), []
        for index, ref in enumerate(spec.get("data") or []):
            if ref["kind"] != OBJECT:
                continue
            try:
                entry = store.stage_in(ref["ref"], ref["path"], seconds)
            except BackendError as exc:
                if not exc.permanent:
                    raise
                entry = {"error": exc.message}
            entries.append({"field": f"data.{index}", **entry})
        return entries

    def output_store(self) -> SwiftStore | None:
        """The project's Swift container, written through temporary URLs (object_store.py)."""
        return SwiftStore(self.client) if self.options["results_container"] else None

    def ensure_started(self, attempt: AttemptRef) -> ExternalRef:
        """Adopt the server named after the attempt (and tagged ours), else create it; never leave two."""
        client = self.client
        conn = client.conn()
        found = self._servers_named(attempt.external_name)
        if found:
            return ExternalRef(ref=survivor(found).id, adopted=True)
        if attempt.external_ref:
            # Recorded once and now gone: creating another would run the program a second time.
            return ExternalRef(ref=attempt.external_ref, adopted=True)
        flavor = client.call(
            "finding the flavor", conn.compute.find_flavor, self.options["flavor"], ignore_missing=False
        )
        self._check_fits(flavor, attempt.spec)
        # The image the submission checked (its id, pinned then), so a name taken over later boots nothing else.
        image_id = attempt.spec.get("image_id")
        if not image_id:
            image_name = attempt.spec.get("image") or self.options["image"]
            image_id = client.call("finding the image", conn.image.find_image, image_name, ignore_missing=False).id
        arguments: dict[str, Any] = {
            "name": attempt.external_name,
            "flavor_id": flavor.id,
            "image_id": image_id,
            "networks": client.networks_argument(),
            "metadata": {
                META_TASK: attempt.task_id,
                META_ATTEMPT: attempt.external_name,
                META_INSTALLATION: str(settings.INSTALLATION_ID),
            },
            "tags": [installation_tag()],
            "user_data": base64.b64encode(self.user_data(attempt.bootstrap_secret).encode()).decode(),
        }
        arguments |= client.placement_arguments()
        if egress_group.closes(attempt):  # before the server, and instead of the connection's groups (they add up)
            group = egress_group.ensure_group(
                client, attempt, callback_url=self.callback_url(), installation=str(settings.INSTALLATION_ID)
            )
            arguments["security_groups"] = [{"name": group}]
        created = client.call(f"creating server {attempt.external_name}", conn.compute.create_server, **arguments)
        # Two workers may both have found nothing and both created: keep the oldest, delete the rest.
        found = self._servers_named(attempt.external_name) or [created]
        kept = survivor(found)
        for extra in found:
            if extra.id != kept.id:
                client.delete_server(extra.id)
        return ExternalRef(ref=kept.id, adopted=kept.id != created.id)

    def observe(self, attempts: list[AttemptRef]) -> list[Observation]:
        if not attempts:
            return []
        by_name: dict[str, list[Any]] = {}
        for server in self.client.servers():
            by_name.setdefault(server.name, []).append(server)
        now = dt.datetime.now(dt.UTC)
        deadline = float(self.options["boot_deadline_seconds"])
        return [
            server_observation(
                attempt,
                by_name.get(attempt.external_name) or [],
                now,
                boot_deadline_seconds=deadline,
                fault_of=self._fault,
            )
            for attempt in attempts
        ]

    def stop(self, attempt: AttemptRef) -> None:
        """The stop the Runner did not carry out: delete the server (retention=keep: shut it off)."""
        conn = self.client.conn()
        for server in self._servers_named(attempt.external_name):
            if self.options["retention"] == "keep":
                if server.status != "SHUTOFF":
                    try:
                        self.client.call(f"stopping server {server.name}", conn.compute.stop_server, server.id)
                    except BackendError as exc:
                        if "SHUTOFF" not in exc.message and exc.kind != "not_found":
                            raise
            else:
                self.client.delete_server(server.id)

    def cleanup(self, attempt: AttemptRef) -> bool:
        """Per retention: delete the attempt's servers (also one created but never recorded); True once none is left."""
        if self.options["retention"] == "keep":
            return True
        servers = self._servers_named(attempt.external_name)
        for server in servers:
            self.client.delete_server(server.id)
        if servers:
            return False
        if egress_group.closes(attempt):  # once the server is gone (its port a moment later: retried until done)
            return egress_group.delete_group(self.client, attempt, installation=str(settings.INSTALLATION_ID))
        return True

    def fetch_logs(self, attempt: AttemptRef, cursor: dict[str, Any]) -> tuple[list, dict[str, Any]]:
        return [], cursor  # the Runner sends the log itself

    def health(self) -> Health:
        missing = [c for c in self.requirements() if c["required"] and not c["ok"]]
        if missing:
            return Health(ok=False, message="; ".join(f"{c['what']}: {c['detail']}" for c in missing))
        where = self.client.auth_summary()
        return Health(ok=True, message=f"authenticated at {where}; compute, image and network services found")

    # ------------------------------------------------------------------ submission: footprint and access
    def task_defaults(self) -> dict[str, Any]:
        return {key: self.options[key] for key in ("image", "flavor") if self.options.get(key)}

    def task_resources(self, spec: dict[str, Any]) -> dict[str, Any]:
        """A task holds its whole VM: the connection flavor's vCPU and RAM (from the connection's facts when known)."""
        size = self.flavor_size(self.options["flavor"])
        return {"cpu": size["vcpus"], "memory_mb": size["memory_mb"], "gpu": 0}

    def flavor_size(self, name: str) -> dict[str, int]:
        """{"vcpus", "memory_mb"} of a flavor: from `connection.facts`, else one cloud read (kept by the caller)."""
        known = ((self.connection.facts or {}).get("flavors") or {}).get(name) or self._learned.get("flavors", {}).get(
            name
        )
        if known:
            return known
        if not name:
            raise BackendError(f"the {self.connection.cloud_id} cloud names no flavor (options.flavor)", kind="auth")
        flavor = self.client.call(
            f"finding flavor {name}", self.client.conn().compute.find_flavor, name, ignore_missing=False
        )
        size = {"vcpus": int(flavor.vcpus or 0), "memory_mb": int(flavor.ram or 0)}
        flavors = {**((self.connection.facts or {}).get("flavors") or {}), name: size}
        self._learned["flavors"] = flavors
        return size

    def learned_facts(self) -> dict[str, Any]:
        return dict(self._learned)

    def fit_limits(self, asked: dict[str, Any]) -> tuple[list, list[str]]:
        """The project's compute quota and the flavor against the largest host (fit.py). A task's server is
        of the connection's flavor; an instance's names its own (`asked["flavor"]`, with its disk_gb)."""
        if not asked.get("flavor"):
            name = self.options["flavor"]
            found = self.client.call(f"finding flavor {name}", self.client.conn().compute.find_flavor, name)
            if found is None:
                return [FitLimit("flavor", 1, None, 0, f"flavor {name} of the {self.connection.cloud_id} cloud")], []
            asked = {**asked, "flavor": name, "disk_gb": found.disk or 0}
        elif self.options.get("root_disk") == "volume":  # an instance's root disk is a Cinder volume, not the host's
            asked = {**asked, "disk_gb": 0}
        return fit.fit_limits(self.client, asked)

    def access_errors(self, spec: dict[str, Any], *, project_id: int, project: str) -> list[dict[str, str]]:
        """The image must not be another project's snapshot (clusters.ownership, the instances' rule too).

        Pins the checked image's id in the spec (`image_id`), so the start boots exactly what was checked."""
        for index, ref in enumerate(spec.get("data") or []):
            if ref["kind"] == OBJECT and (problem := self._container_problem(ref["ref"].partition("/")[0], project)):
                return [{"field": f"data.{index}.ref", "message": problem}]
        name = spec.get("image") or self.options["image"]
        image = self.client.call(f"finding image {name}", self.client.conn().image.find_image, name)
        if image is None:
            return [{"field": "image", "message": f"the {self.connection.cloud_id} cloud has no image {name!r}"}]
        mark = str((image.properties or {}).get("cloudpivot_snapshot") or "")
        check_image_for_project(image_id=image.id, snapshot_mark=mark, project_id=project_id, project_slug=project)
        spec["image_id"] = image.id
        if image.hash_algo and image.hash_value:  # what ran, for the provenance bundle (docs/data.md)
            spec["image_digest"] = f"{image.hash_algo}:{image.hash_value}"
        elif image.checksum:
            spec["image_digest"] = f"md5:{image.checksum}"
        return []

    # ------------------------------------------------------------------ optional abilities
    def requirements(self) -> list[dict[str, Any]]:
        """What CloudPivot needs from this cloud, each checked: {what, ok, required, detail}."""
        return checks.requirements(self.client)

    def inventory(self, kind: str) -> list[dict[str, Any]]:
        return inventory.inventory(self.client, kind)

    def metrics(self) -> dict[str, Any]:
        servers = self.client.servers()
        by_status: dict[str, int] = {}
        for server in servers:
            by_status[server.status] = by_status.get(server.status, 0) + 1
        quotas = inventory.quota_usage(self.client)
        return {"quotas": quotas, "servers": {"total": len(servers), "by_status": by_status}}

    def runner_never_reported(
        self, attempt: AttemptRef, observation: Observation, *, runner_contact_at: Any
    ) -> dict[str, Any] | None:
        """See the module function: for a reconcile loop that ends such a task FAILED at once."""
        return runner_never_reported(self, attempt, observation, runner_contact_at=runner_contact_at)

    def runner_boot_wait(self, attempt: AttemptRef, observation: Observation, *, runner_contact_at: Any) -> str | None:
        """Before the Runner's first call and within the boot deadline, a server that is building or ACTIVE is
        a VM still booting: the task waits (STARTING) instead of going UNKNOWN at the heartbeat deadline."""
        if runner_contact_at is not None or observation.phase != "pending":
            return None
        deadline = self.options["boot_deadline_seconds"]
        evidence = observation.evidence
        if evidence.get("boot_deadline_passed") or evidence.get("booting_for", 0) > float(deadline):
            return None
        return f"waiting for the Runner (booting; up to {float(deadline):g} s)"

    def vm_instances(self) -> tuple[bool, str]:
        return True, "Nova servers"

    # ------------------------------------------------------------------ public helpers
    def user_data(self, bootstrap_secret: str) -> str:
        """cloud-init: the Runner's config and one-time secret (root-only files) and a systemd unit that starts it."""
        return cloudinit.user_data(self.options, bootstrap_secret)

    def callback_url(self) -> str:
        return cloudinit.callback_url(self.options)

    def console_tail(self, ref: str, lines: int = 40) -> str:
        """The last lines of the server's console log (what a VM whose Runner never called printed).

        Only evidence for a failure message, so it gets a short timeout of its own: Nova answers it
        by a call to the compute host, and a slow one must not hold up a reconcile pass.
        """
        try:
            output = self.client.compute_request(
                "reading the console log",
                "POST",
                f"/servers/{ref}/action",
                body={"os-getConsoleOutput": {"length": lines}},
                timeout=CONSOLE_TIMEOUT_SECONDS,
            )
        except BackendError as exc:
            return f"(no console log: {exc.message})"
        return str((output or {}).get("output") or "")

    # ------------------------------------------------------------------ helpers
    def _fault(self, server_id: str) -> dict[str, Any]:
        """Nova leaves `fault` out of server lists: one GET for a server in ERROR (rare; not per pass and task)."""
        try:
            server = self.client.call("reading the server's fault", self.client.conn().compute.get_server, server_id)
        except BackendError as exc:
            return {"message": f"Nova gave no fault message ({exc.message})"}
        return server.fault or {}

    def _servers_named(self, name: str) -> list[Any]:
        servers = self.client.servers(what=f"looking up server {name}", name=f"^{re.escape(name)}$")
        return [s for s in servers if s.name == name and s.status not in ("DELETED", "SOFT_DELETED")]

    def _check_fits(self, flavor: Any, spec: dict[str, Any]) -> None:
        resources = spec.get("resources") or {}
        cpu, memory = resources.get("cpu"), resources.get("memory_mb")
        if (cpu and cpu > (flavor.vcpus or 0)) or (memory and memory > (flavor.ram or 0)):
            raise BackendError(
                f"the task asks for {cpu or '-'} vCPU / {memory or '-'} MB but flavor {flavor.name} has "
                f"{flavor.vcpus} vCPU / {flavor.ram} MB",
                kind="invalid_spec",
            )


def runner_never_reported(
    backend: OpenStackBackend, attempt: AttemptRef, observation: Observation, *, runner_contact_at: Any
) -> dict[str, Any] | None:
    """For reconcile: a server past its boot deadline (ACTIVE, or still in BUILD) whose Runner never made contact.

    Returns {"reason", "console_tail"} (the task should end FAILED: the program never started), else None.
    """
    if runner_contact_at is not None or not observation.evidence.get("boot_deadline_passed"):
        return None
    deadline = backend.options["boot_deadline_seconds"]
    if observation.evidence.get("server_status") == "BUILD":  # nothing booted: no console to show
        return {
            "reason": f"the server never booted: {attempt.external_name} was still being built (BUILD) {deadline} s "
            "after it was created (Nova did not finish it: see the cloud's nova-conductor and nova-compute logs)",
            "console_tail": "",
        }
    return {
        "reason": f"the Runner never reported: server {attempt.external_name} was ACTIVE for more than {deadline} s "
        "without a word from it (is the Runner in the image, and can the VM reach the callback URL?)",
        "console_tail": backend.console_tail(observation.evidence.get("server_id") or attempt.external_ref),
    }
