"""The `openstack` backend: one Nova server per Attempt, booted with cloud-init that starts the Runner.

The only module that imports `openstack` (openstacksdk). Connection settings (docs/backends/openstack.md):

- `credentials_ref`: the path of a clouds.yaml (with `options.cloud`, the entry to use), or of an
  application-credential file (YAML/JSON: `auth_url`, `application_credential_id`,
  `application_credential_secret`) when `options.cloud` is empty; `env:NAME` names an environment
  variable holding that path. Secrets are never logged or stored in the database.
- `options`: `cloud`, `region`, `flavor`, `image`, `networks` (`"none"` or a list of network names/IDs),
  `key_name`, `security_groups`, `availability_zone`, `runner_bootstrap` (`preinstalled`), `runner_path`,
  `runner_python`, `callback_url` (how VMs reach CloudPivot; default settings.RUNNER_SERVER_URL),
  `ca_file` (a CA bundle on this host, copied into the VM for the Runner), `retention` (`delete` or `keep`),
  `boot_deadline_seconds`, `api_timeout_seconds`.

The Runner's reports are the truth about the program (uses_runner): the server's status is only
evidence. Observation costs one server LIST per connection per pass (by our installation tag), whatever
the number of tasks (plus one GET for a server in ERROR, whose fault Nova leaves out of lists). The VM's
user data holds a one-time bootstrap secret, not the attempt credential (runner_api/bootstrap.py).
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import os
import re
import threading
from pathlib import Path
from typing import Any

import openstack
import openstack.config
import openstack.connection
import openstack.exceptions as os_exc
import yaml
from django.conf import settings
from keystoneauth1 import exceptions as ks_exc

from clusters.backends.base import AttemptRef, BackendError, ErrorKind, ExternalRef, Health, Observation
from clusters.models import CloudConnection

META_TASK = "cloudpivot_task"
META_ATTEMPT = "cloudpivot_attempt"
META_INSTALLATION = "cloudpivot_installation"
RUNNER_DIR = "/etc/cloudpivot"
RUNNER_CONFIG = f"{RUNNER_DIR}/runner.json"
RUNNER_BOOTSTRAP = f"{RUNNER_DIR}/bootstrap"
RUNNER_CA = f"{RUNNER_DIR}/ca.pem"
RUNNER_STATE = "/var/lib/cloudpivot"
RUNNER_UNIT = "/etc/systemd/system/cloudpivot-runner.service"

DEFAULT_OPTIONS: dict[str, Any] = {
    "cloud": "",
    "region": "",
    "flavor": "",
    "image": "",
    "networks": "none",
    "key_name": "",
    "security_groups": [],
    "availability_zone": "",
    "runner_bootstrap": "preinstalled",
    "runner_path": "/opt/cloudpivot/cloudpivot_runner.py",
    "runner_python": "/usr/bin/python3",
    "callback_url": "",
    "ca_file": "",
    "retention": "delete",  # delete: servers go when the attempt ends; keep: stopped ones stay (SHUTOFF)
    "boot_deadline_seconds": 300,  # ACTIVE this long with no word from the Runner: it never started
    "api_timeout_seconds": 30,
}
BOOTSTRAP_MODES = ("preinstalled",)  # "fetch" (Runner downloaded from CloudPivot, checked by SHA-256) is planned
GONE_STATUSES = {"SHUTOFF", "DELETED", "SOFT_DELETED", "SHELVED", "SHELVED_OFFLOADED"}
INVENTORY_KINDS = ("flavors", "images", "networks", "volumes", "servers", "quotas")

# One Connection (and its token) per connection settings, shared by the passes of this process.
_connections: dict[tuple, openstack.connection.Connection] = {}
_connections_lock = threading.Lock()


CONSOLE_TIMEOUT_SECONDS = 10


def installation_tag() -> str:
    """The Nova tag on every server of this installation (tags: at most 60 characters, no ',' or '/')."""
    return re.sub(r"[,/]", "_", f"cloudpivot-{settings.INSTALLATION_ID}")[:60]


class OpenStackBackend:
    uses_runner = True
    inventory_kinds = INVENTORY_KINDS

    def __init__(self, connection: CloudConnection) -> None:
        self.connection = connection
        self.options = {**DEFAULT_OPTIONS, **(connection.options or {})}

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
        if self.options["runner_bootstrap"] not in BOOTSTRAP_MODES:
            errors.append(
                {
                    "field": "cloud",
                    "message": f"the {cloud} cloud is set to runner_bootstrap={self.options['runner_bootstrap']!r}, "
                    "which this version cannot do; use 'preinstalled'",
                }
            )
        if not (spec.get("image") or self.options["image"]):
            errors.append({"field": "image", "message": f"name a VM image: the {cloud} cloud has no default image"})
        return errors

    def ensure_started(self, attempt: AttemptRef) -> ExternalRef:
        """Adopt the server named after the attempt (and tagged ours), else create it; never leave two."""
        conn = self._conn()
        found = self._servers_named(conn, attempt.external_name)
        if found:
            return ExternalRef(ref=_survivor(found).id, adopted=True)
        if attempt.external_ref:
            # Recorded once and now gone: creating another would run the program a second time.
            return ExternalRef(ref=attempt.external_ref, adopted=True)
        flavor = self._call("finding the flavor", conn.compute.find_flavor, self._flavor(), ignore_missing=False)
        self._check_fits(flavor, attempt.spec)
        image_name = attempt.spec.get("image") or self.options["image"]
        image = self._call("finding the image", conn.image.find_image, image_name, ignore_missing=False)
        networks = self._networks(conn)
        from runner_api.bootstrap import bootstrap_secret_issue

        secret = bootstrap_secret_issue(attempt_id=attempt.attempt_id, runner_credential=attempt.runner_credential)
        arguments: dict[str, Any] = {
            "name": attempt.external_name,
            "flavor_id": flavor.id,
            "image_id": image.id,
            "networks": networks,
            "metadata": {
                META_TASK: attempt.task_id,
                META_ATTEMPT: attempt.external_name,
                META_INSTALLATION: str(settings.INSTALLATION_ID),
            },
            "tags": [installation_tag()],
            "user_data": base64.b64encode(self.user_data(secret).encode()).decode(),
        }
        arguments |= self._placement_arguments()
        created = self._call(f"creating server {attempt.external_name}", conn.compute.create_server, **arguments)
        # Two workers may both have found nothing and both created: keep the oldest, delete the rest.
        found = self._servers_named(conn, attempt.external_name) or [created]
        survivor = _survivor(found)
        for extra in found:
            if extra.id != survivor.id:
                self._delete(conn, extra.id)
        return ExternalRef(ref=survivor.id, adopted=survivor.id != created.id)

    def observe(self, attempts: list[AttemptRef]) -> list[Observation]:
        if not attempts:
            return []
        servers = self.list_servers()
        by_name: dict[str, list[Any]] = {}
        for server in servers:
            by_name.setdefault(server.name, []).append(server)
        now = dt.datetime.now(dt.UTC)
        return [self._observation(attempt, by_name.get(attempt.external_name) or [], now) for attempt in attempts]

    def stop(self, attempt: AttemptRef) -> None:
        """The stop the Runner did not carry out: delete the server (retention=keep: shut it off)."""
        conn = self._conn()
        servers = self._servers_named(conn, attempt.external_name)
        for server in servers:
            if self.options["retention"] == "keep":
                if server.status != "SHUTOFF":
                    try:
                        self._call(f"stopping server {server.name}", conn.compute.stop_server, server.id)
                    except BackendError as exc:
                        if "SHUTOFF" not in exc.message and exc.kind != "not_found":
                            raise
            else:
                self._delete(conn, server.id)

    def cleanup(self, attempt: AttemptRef) -> bool:
        """Per retention: delete the attempt's servers (also one created but never recorded); True once none is left."""
        if self.options["retention"] == "keep":
            return True
        conn = self._conn()
        servers = self._servers_named(conn, attempt.external_name)
        for server in servers:
            self._delete(conn, server.id)
        return not servers

    def fetch_logs(self, attempt: AttemptRef, cursor: dict[str, Any]) -> tuple[list, dict[str, Any]]:
        return [], cursor  # the Runner sends the log itself

    def health(self) -> Health:
        checks = self.requirements()
        missing = [c for c in checks if c["required"] and not c["ok"]]
        if missing:
            return Health(ok=False, message="; ".join(f"{c['what']}: {c['detail']}" for c in missing))
        where = self._auth_summary()
        return Health(ok=True, message=f"authenticated at {where}; compute, image and network services found")

    def requirements(self) -> list[dict[str, Any]]:
        """What CloudPivot needs from this cloud, each checked: {what, ok, required, detail}."""
        results: list[dict[str, Any]] = []

        def add(what: str, ok: bool, detail: str, required: bool = True) -> None:
            results.append({"what": what, "ok": ok, "required": required, "detail": detail})

        try:
            conn = self._conn()
            self._call("authenticating", conn.authorize)
        except BackendError as exc:
            add("authentication (Keystone)", False, exc.message)
            return results
        add("authentication (Keystone)", True, f"token for {self._auth_summary()}")
        types = self._catalog_types(conn)
        for service_type, words in (("compute", "Nova"), ("image", "Glance"), ("network", "Neutron")):
            ok = service_type in types
            add(f"{service_type} service ({words})", ok, "in the catalog" if ok else "missing from the catalog")
        has_cinder = bool(types & {"block-storage", "volumev3", "volume"})
        add(
            "block-storage service (Cinder)",
            has_cinder,
            "in the catalog" if has_cinder else "absent: volumes cannot be listed (tasks do not need it)",
            required=False,
        )
        if "compute" in types:
            flavor = self._flavor()
            self._check_exists(add, f"flavor {flavor!r}", lambda: conn.compute.find_flavor(flavor), bool(flavor))
        if "image" in types:
            image = self.options["image"]
            self._check_exists(add, f"image {image!r}", lambda: conn.image.find_image(image), bool(image))
        networks = self.options["networks"]
        if networks in ("none", None, "", []):
            add("networks", True, "none: servers boot without a network (the VM must still reach the callback URL)")
        elif "network" in types:
            for name in networks:
                self._check_exists(add, f"network {name!r}", lambda name=name: conn.network.find_network(name), True)
        if self.options["key_name"]:
            key = self.options["key_name"]
            self._check_exists(add, f"key pair {key!r}", lambda: conn.compute.find_keypair(key), True)
        mode = self.options["runner_bootstrap"]
        add(
            "runner bootstrap",
            mode in BOOTSTRAP_MODES,
            f"{mode}: the image must hold the Runner at {self.options['runner_path']}"
            if mode in BOOTSTRAP_MODES
            else f"{mode!r} is not available in this version; use 'preinstalled'",
        )
        return results

    def inventory(self, kind: str) -> list[dict[str, Any]]:
        conn = self._conn()
        if kind == "flavors":
            flavors = self._call("listing flavors", lambda: list(conn.compute.flavors(details=True)))
            return [
                {"id": f.id, "name": f.name, "vcpus": f.vcpus, "ram_mb": f.ram, "disk_gb": f.disk}
                for f in sorted(flavors, key=lambda f: (f.vcpus or 0, f.ram or 0, f.name or ""))
            ]
        if kind == "images":
            images = self._call("listing images", lambda: list(conn.image.images()))
            return [
                {
                    "id": i.id,
                    "name": i.name,
                    "status": i.status,
                    "size_bytes": i.size,
                    "disk_format": i.disk_format,
                    "visibility": i.visibility,
                }
                for i in images
            ]
        if kind == "networks":
            networks = self._call("listing networks", lambda: list(conn.network.networks()))
            return [
                {
                    "id": n.id,
                    "name": n.name,
                    "status": n.status,
                    "shared": n.is_shared,
                    "external": n.is_router_external,
                }
                for n in networks
            ]
        if kind == "volumes":
            if not self._catalog_types(conn) & {"block-storage", "volumev3", "volume"}:
                raise BackendError(
                    f"the {self.connection.cloud_id} cloud has no block-storage (Cinder) service, so it has no volumes",
                    kind="not_found",
                )
            volumes = self._call("listing volumes", lambda: list(conn.block_storage.volumes(details=True)))
            return [{"id": v.id, "name": v.name, "status": v.status, "size_gb": v.size} for v in volumes]
        if kind == "servers":
            return [_server_summary(s) for s in self.list_servers()]
        if kind == "quotas":
            return self._quota_usage(conn)
        raise BackendError(
            f"unknown resource kind '{kind}' for the {self.connection.cloud_id} cloud; kinds: "
            + ", ".join(INVENTORY_KINDS),
            kind="not_found",
        )

    def metrics(self) -> dict[str, Any]:
        conn = self._conn()
        servers = self.list_servers()
        by_status: dict[str, int] = {}
        for server in servers:
            by_status[server.status] = by_status.get(server.status, 0) + 1
        return {"quotas": self._quota_usage(conn), "servers": {"total": len(servers), "by_status": by_status}}

    # ------------------------------------------------------------------ public helpers
    def list_servers(self) -> list[Any]:
        """Every server of this installation in the project: one LIST call (by our tag)."""
        conn = self._conn()
        return self._call("listing servers", lambda: list(conn.compute.servers(details=True, tags=installation_tag())))

    def user_data(self, bootstrap_secret: str) -> str:
        """cloud-init: the Runner's config and one-time secret (root-only files) and a systemd unit that starts it."""
        config: dict[str, str] = {
            "server_url": self.callback_url(),
            "credential_file": f"{RUNNER_STATE}/credential",
            "bootstrap_file": RUNNER_BOOTSTRAP,
            "state_dir": f"{RUNNER_STATE}/state",
        }
        files: list[dict[str, str]] = []
        if self.options["ca_file"]:
            try:
                ca = Path(self.options["ca_file"]).read_text()
            except OSError as exc:
                raise BackendError(f"cannot read the CA file {self.options['ca_file']}: {exc}", kind="auth") from None
            files.append({"path": RUNNER_CA, "owner": "root:root", "permissions": "0644", "content": ca})
            config["ca_file"] = RUNNER_CA
        files += [
            {"path": RUNNER_CONFIG, "owner": "root:root", "permissions": "0600", "content": json.dumps(config)},
            {"path": RUNNER_BOOTSTRAP, "owner": "root:root", "permissions": "0600", "content": bootstrap_secret},
            {"path": RUNNER_UNIT, "owner": "root:root", "permissions": "0644", "content": self._unit()},
        ]
        document = {
            "write_files": files,
            "runcmd": [
                ["systemctl", "daemon-reload"],
                ["systemctl", "enable", "--now", "cloudpivot-runner.service"],
            ],
        }
        return "#cloud-config\n" + yaml.safe_dump(document, sort_keys=False, width=4096)

    def callback_url(self) -> str:
        return (self.options["callback_url"] or settings.RUNNER_SERVER_URL).rstrip("/")

    def console_tail(self, ref: str, lines: int = 40) -> str:
        """The last lines of the server's console log (what a VM whose Runner never called printed).

        Only evidence for a failure message, so it gets a short timeout of its own: Nova answers it
        by a call to the compute host, and a slow one must not hold up a reconcile pass.
        """
        conn = self._conn()

        def read() -> dict[str, Any]:
            response = conn.compute.post(
                f"/servers/{ref}/action",
                json={"os-getConsoleOutput": {"length": lines}},
                timeout=CONSOLE_TIMEOUT_SECONDS,
            )
            os_exc.raise_from_response(response)
            return response.json()

        try:
            output = self._call("reading the console log", read)
        except BackendError as exc:
            return f"(no console log: {exc.message})"
        return str((output or {}).get("output") or "")

    def runner_never_reported(self, attempt: AttemptRef, observation: Observation, *, runner_contact_at: Any):
        """See the module function: for a reconcile loop that ends such a task FAILED at once."""
        return runner_never_reported(self, attempt, observation, runner_contact_at=runner_contact_at)

    # ------------------------------------------------------------------ helpers
    def _observation(self, attempt: AttemptRef, servers: list[Any], now: dt.datetime) -> Observation:
        name = attempt.external_name
        server = next((s for s in servers if s.id == attempt.external_ref), None) or (
            _survivor(servers) if servers else None
        )
        if server is None:
            return Observation(
                name,
                exists=False,
                phase="gone",
                reason=f"server {name} ({attempt.external_ref or 'no id recorded'}) is no longer in the project: "
                "it was deleted outside CloudPivot",
                evidence={"server_id": attempt.external_ref, "server_status": "absent"},
            )
        evidence: dict[str, Any] = {
            "server_id": server.id,
            "server_status": server.status,
            "task_state": server.task_state,
            "power_state": server.power_state,
        }
        status = server.status
        if status == "BUILD":
            return Observation(
                name, exists=True, phase="pending", reason="the server is being built", evidence=evidence
            )
        if status == "ACTIVE":
            launched = _parse_time(server.launched_at)
            if launched:
                evidence["active_since"] = launched.isoformat()
                evidence["boot_deadline_passed"] = (now - launched).total_seconds() > float(
                    self.options["boot_deadline_seconds"]
                )
            return Observation(
                name,
                exists=True,
                phase="pending",
                reason="the server is ACTIVE; only the Runner's events say whether the program runs",
                evidence=evidence,
            )
        if status == "ERROR":
            fault = server.fault or self._fault(server.id)
            message = fault.get("message") or "Nova gave no fault message"
            evidence["fault"] = message
            if fault.get("code"):
                evidence["fault_code"] = fault["code"]
            return Observation(
                name, exists=True, phase="failed", reason=f"the server went to ERROR: {message}", evidence=evidence
            )
        if status in GONE_STATUSES:
            words = "shut off" if status == "SHUTOFF" else status.lower().replace("_", " ")
            why = "as CloudPivot asked" if attempt.stop_requested and status == "SHUTOFF" else "outside CloudPivot"
            return Observation(
                name, exists=True, phase="gone", reason=f"the server was {words} {why}", evidence=evidence
            )
        return Observation(
            name,
            exists=True,
            phase="unknown",
            reason=f"the server is {status}{f' ({server.task_state})' if server.task_state else ''}",
            evidence=evidence,
        )

    def _fault(self, server_id: str) -> dict[str, Any]:
        """Nova leaves `fault` out of server lists: one GET for a server in ERROR (rare; not per pass and task)."""
        try:
            server = self._call("reading the server's fault", self._conn().compute.get_server, server_id)
        except BackendError as exc:
            return {"message": f"Nova gave no fault message ({exc.message})"}
        return server.fault or {}

    def _servers_named(self, conn: Any, name: str) -> list[Any]:
        pattern = f"^{re.escape(name)}$"
        servers = self._call(
            f"looking up server {name}",
            lambda: list(conn.compute.servers(details=True, name=pattern, tags=installation_tag())),
        )
        return [s for s in servers if s.name == name and s.status not in ("DELETED", "SOFT_DELETED")]

    def _delete(self, conn: Any, server_id: str) -> None:
        try:
            self._call(f"deleting server {server_id}", conn.compute.delete_server, server_id, ignore_missing=True)
        except BackendError as exc:
            if exc.kind != "not_found":
                raise

    def _flavor(self) -> str:
        return self.options["flavor"]

    def _networks(self, conn: Any) -> Any:
        networks = self.options["networks"]
        if networks in ("none", None, "", []):
            return "none"
        if networks == "auto":
            return "auto"
        found = []
        for name in networks:
            network = self._call(f"finding network {name}", conn.network.find_network, name, ignore_missing=False)
            found.append({"uuid": network.id})
        return found

    def _check_fits(self, flavor: Any, spec: dict[str, Any]) -> None:
        resources = spec.get("resources") or {}
        cpu, memory = resources.get("cpu"), resources.get("memory_mb")
        if (cpu and cpu > (flavor.vcpus or 0)) or (memory and memory > (flavor.ram or 0)):
            raise BackendError(
                f"the task asks for {cpu or '-'} vCPU / {memory or '-'} MB but flavor {flavor.name} has "
                f"{flavor.vcpus} vCPU / {flavor.ram} MB",
                kind="invalid_spec",
            )

    def _check_exists(self, add: Any, what: str, lookup: Any, configured: bool) -> None:
        if not configured:
            add(what.split(" ")[0], False, "no default set in the connection's options")
            return
        try:
            found = self._call(f"looking up {what}", lookup)
        except BackendError as exc:
            add(what, False, exc.message)
            return
        add(what, bool(found), "exists" if found else "not found in this project")

    def _catalog_types(self, conn: Any) -> set[str]:
        try:
            catalog = self._call("reading the service catalog", lambda: conn.session.auth.get_access(conn.session))
        except BackendError:
            return set()
        return {entry.get("type") for entry in (catalog.service_catalog.catalog or [])}

    def _quota_usage(self, conn: Any) -> list[dict[str, Any]]:
        limits = self._call("reading compute limits", conn.compute.get_limits).absolute
        rows = [
            ("instances", limits.instances_used, limits.instances),
            ("vcpus", limits.total_cores_used, limits.total_cores),
            ("ram_mb", limits.total_ram_used, limits.total_ram),
            ("server_groups", limits.server_groups_used, limits.server_groups),
        ]
        return [
            {"resource": name, "used": used, "limit": None if limit in (None, -1) else limit}
            for name, used, limit in rows
        ]

    def _unit(self) -> str:
        return (
            "[Unit]\nDescription=CloudPivot Runner\nWants=network-online.target\nAfter=network-online.target\n\n"
            "[Service]\nType=simple\n"
            f"ExecStart={self.options['runner_python']} {self.options['runner_path']} --config {RUNNER_CONFIG}\n"
            # 2 = bad configuration, 3 = credential refused, 75 = another Runner holds the lock: retrying cannot help
            "Restart=on-failure\nRestartSec=5\nRestartPreventExitStatus=2 3 75\n\n"
            "[Install]\nWantedBy=multi-user.target\n"
        )

    def _auth_summary(self) -> str:
        where = self.options["cloud"] or "application credential"
        region = self.options["region"]
        return f"{where}{f' ({region})' if region else ''}"

    def _conn(self) -> Any:
        key = (self.connection.pk, self.connection.credentials_ref, json.dumps(self.options, sort_keys=True))
        with _connections_lock:
            conn = _connections.get(key)
            if conn is None:
                conn = self._connect()
                _connections[key] = conn
            return conn

    def _connect(self) -> Any:
        path = _resolve_path(self.connection.credentials_ref)
        timeout = float(self.options["api_timeout_seconds"])
        region = self.options["region"] or None
        try:
            if self.options["cloud"]:
                if path and not os.path.exists(path):
                    raise BackendError(f"the clouds.yaml file {path} does not exist", kind="auth")
                config = openstack.config.OpenStackConfig(config_files=[path] if path else None)
                region_config = config.get_one(cloud=self.options["cloud"], region_name=region, api_timeout=timeout)
                return openstack.connection.Connection(config=region_config)
            if not path:
                raise BackendError(
                    "no credentials: set options.cloud (with credentials_ref = a clouds.yaml path) "
                    "or credentials_ref = an application-credential file",
                    kind="auth",
                )
            data = _read_credential_file(path)
            return openstack.connection.Connection(
                auth_type="v3applicationcredential",
                auth={
                    "auth_url": data["auth_url"],
                    "application_credential_id": data["application_credential_id"],
                    "application_credential_secret": data["application_credential_secret"],
                },
                region_name=region or data.get("region_name"),
                api_timeout=timeout,
            )
        except openstack.exceptions.ConfigException as exc:
            raise BackendError(f"cannot use the cloud settings: {exc}", kind="auth") from None

    def _placement_arguments(self) -> dict[str, Any]:
        """The connection's optional server-create arguments (key pair, security groups, zone), where set."""
        arguments: dict[str, Any] = {}
        if self.options["key_name"]:
            arguments["key_name"] = self.options["key_name"]
        if self.options["security_groups"]:
            arguments["security_groups"] = [{"name": name} for name in self.options["security_groups"]]
        if self.options["availability_zone"]:
            arguments["availability_zone"] = self.options["availability_zone"]
        return arguments

    def _call(self, what: str, function: Any, *args: Any, **kwargs: Any) -> Any:
        """Every SDK call goes through here: its exceptions leave this module as BackendError, in words."""
        try:
            return function(*args, **kwargs)
        except BackendError:
            raise
        except os_exc.ResourceNotFound as exc:
            raise BackendError(f"{what}: not found ({_message(exc)})", kind="not_found") from None
        except os_exc.HttpException as exc:
            raise BackendError(f"{what}: {_message(exc)}", kind=_kind(exc)) from None
        except ks_exc.Unauthorized as exc:
            raise BackendError(f"{what}: the cloud refused the credentials ({exc})", kind="auth") from None
        except (ks_exc.ConnectFailure, ks_exc.ConnectTimeout, ks_exc.DiscoveryFailure) as exc:
            raise BackendError(f"{what}: the cloud did not answer ({exc})", kind="transient") from None
        except ks_exc.ClientException as exc:
            raise BackendError(f"{what}: {exc}", kind="transient") from None
        except os_exc.SDKException as exc:
            raise BackendError(f"{what}: {exc}", kind="transient") from None


def runner_never_reported(
    backend: OpenStackBackend, attempt: AttemptRef, observation: Observation, *, runner_contact_at: Any
) -> dict[str, Any] | None:
    """For reconcile: an ACTIVE server past its boot deadline whose Runner never made contact.

    Returns {"reason", "console_tail"} (the task should end FAILED: the program never started), else None.
    """
    if runner_contact_at is not None or not observation.evidence.get("boot_deadline_passed"):
        return None
    deadline = backend.options["boot_deadline_seconds"]
    return {
        "reason": f"the Runner never reported: server {attempt.external_name} was ACTIVE for more than {deadline} s "
        "without a word from it (is the Runner in the image, and can the VM reach the callback URL?)",
        "console_tail": backend.console_tail(observation.evidence.get("server_id") or attempt.external_ref),
    }


def _survivor(servers: list[Any]) -> Any:
    return min(servers, key=lambda s: (s.created_at or "", s.id))


def _server_summary(server: Any) -> dict[str, Any]:
    metadata = server.metadata or {}
    return {
        "id": server.id,
        "name": server.name,
        "status": server.status,
        "task_state": server.task_state,
        "task": metadata.get(META_TASK),
        "attempt": metadata.get(META_ATTEMPT),
        "flavor": (server.flavor or {}).get("original_name") or (server.flavor or {}).get("id"),
        "created_at": server.created_at,
        "launched_at": server.launched_at,
        "fault": (server.fault or {}).get("message"),
    }


def _parse_time(value: Any) -> dt.datetime | None:
    if not value:
        return None
    try:
        parsed = dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)


def _resolve_path(ref: str) -> str:
    ref = (ref or "").strip()
    if ref.startswith("env:"):
        return os.environ.get(ref[4:], "")
    return ref.removeprefix("file:")


def _read_credential_file(path: str) -> dict[str, Any]:
    try:
        data = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise BackendError(f"cannot read the application-credential file {path}: {exc}", kind="auth") from None
    needed = ("auth_url", "application_credential_id", "application_credential_secret")
    if not isinstance(data, dict) or any(not data.get(key) for key in needed):
        raise BackendError(f"the application-credential file {path} must set {', '.join(needed)}", kind="auth")
    return data


def _message(exc: Any) -> str:
    details = getattr(exc, "details", None) or ""
    text = details if isinstance(details, str) and details else str(getattr(exc, "message", "") or exc)
    return text.strip()[:500]


def _kind(exc: Any) -> ErrorKind:
    status = int(getattr(exc, "status_code", 0) or 0)
    text = _message(exc).lower()
    if status in (401,):
        return "auth"
    if status == 413 or "quota" in text:
        return "quota"
    if status == 403:
        return "auth"
    if status == 404:
        return "not_found"
    if status == 400:
        return "invalid_spec"
    return "transient"
