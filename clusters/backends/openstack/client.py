"""The public client of an OpenStack connection: credentials, one cached SDK Connection, errors in words.

Everything in CloudPivot that talks to an OpenStack cloud (the task backend, Nova instances, the orphan
listers, metrics, check_cloud) goes through one `OpenStackClient`, so timeouts, the token cache and the
words of an error are the same everywhere. `call(what, function, ...)` runs one SDK call and turns
every openstacksdk/keystoneauth exception into a BackendError; `conn()` is the SDK Connection whose
proxies (`compute`, `image`, `network`, `block_storage`) callers hand to `call`.

Credentials (`credentials_ref`): the path of a clouds.yaml (with `options.cloud`, the entry to use), or
of an application-credential file (YAML/JSON: `auth_url`, `application_credential_id`,
`application_credential_secret`) when `options.cloud` is empty; `env:NAME` names an environment variable
holding that path. Secrets are never logged or stored in the database.
"""

from __future__ import annotations

import json
import os
import re
import threading
from pathlib import Path
from typing import Any

import yaml
from django.conf import settings

from cloudpivot import credentials
from cloudpivot.lazy_module import LazyModule
from clusters.backends.base import BackendError, ErrorKind
from clusters.models import CloudConnection

# openstacksdk and keystoneauth1 are imported at the first call, not at start-up (cloudpivot/lazy_module.py).
openstack = LazyModule("openstack")
os_exc = LazyModule("openstack.exceptions")
ks_exc = LazyModule("keystoneauth1.exceptions")

DEFAULT_OPTIONS: dict[str, Any] = {
    "cloud": "",
    "region": "",
    "flavor": "",
    "image": "",
    "networks": "none",
    "key_name": "",
    "security_groups": [],
    "availability_zone": "",
    "runner_bootstrap": "user_data",  # how the VM gets the host program: in the user data, or "preinstalled"
    "runner_path": "/opt/cloudpivot/cloudpivot-agent.pyz",
    "runner_python": "/usr/bin/python3",
    "callback_url": "",
    "ca_file": "",
    "retention": "delete",  # delete: servers go when the attempt ends; keep: stopped ones stay (SHUTOFF)
    "boot_deadline_seconds": 300,  # ACTIVE this long with no word from the Runner: it never started
    "api_timeout_seconds": 30,
    "root_disk": "ephemeral",  # instances: ephemeral (the flavor's disk) or volume (a Cinder volume from the image)
    "results_container": "cloudpivot-results",  # the Swift container of task outputs ("" = keep no outputs)
}
BLOCK_STORAGE_TYPES = {"block-storage", "volumev3", "volume"}
# CloudPivot's marks in a server's metadata (besides the installation tag).
META_TASK = "cloudpivot_task"
META_ATTEMPT = "cloudpivot_attempt"
META_INSTALLATION = "cloudpivot_installation"

# One Connection (and its token) per connection settings, shared by the passes of this process.
_connections: dict[tuple, Any] = {}  # openstack.connection.Connection
_connections_lock = threading.Lock()


def installation_tag() -> str:
    """The Nova tag on every server of this installation (tags: at most 60 characters, no ',' or '/')."""
    return re.sub(r"[,/]", "_", f"cloudpivot-{settings.INSTALLATION_ID}")[:60]


class OpenStackClient:
    def __init__(self, connection: CloudConnection) -> None:
        self.connection = connection
        self.options = {**DEFAULT_OPTIONS, **(connection.options or {})}

    def conn(self) -> Any:
        """The SDK Connection for these settings (cached per process: one token for every pass)."""
        key = (self.connection.pk, self.connection.credentials_ref, json.dumps(self.options, sort_keys=True))
        with _connections_lock:
            conn = _connections.get(key)
            if conn is None:
                conn = self._connect()
                _connections[key] = conn
            return conn

    def call(self, what: str, function: Any, *args: Any, **kwargs: Any) -> Any:
        """Every SDK call goes through here: its exceptions leave this package as BackendError, in words."""
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

    def compute_request(
        self,
        what: str,
        method: str,
        path: str,
        *,
        body: dict[str, Any] | None = None,
        microversion: str | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """A Nova request by path (what the SDK has no call for, or needs a short timeout): its JSON answer."""
        compute = self.conn().compute

        def send() -> dict[str, Any]:
            options: dict[str, Any] = {}
            if body is not None:
                options["json"] = body
            if microversion:
                options["microversion"] = microversion
            if timeout:
                options["timeout"] = timeout
            response = getattr(compute, method.lower())(path, **options)
            os_exc.raise_from_response(response)
            return response.json() if response.content else {}  # some answers have no body (202 of a PUT)

        return self.call(what, send)

    # ------------------------------------------------------------------ shared reads
    def catalog_types(self) -> set[str]:
        """The service types in the token's catalog (empty when it cannot be read)."""
        conn = self.conn()
        try:
            catalog = self.call("reading the service catalog", lambda: conn.session.auth.get_access(conn.session))
        except BackendError:
            return set()
        return {entry.get("type") for entry in (catalog.service_catalog.catalog or [])}

    def has_block_storage(self) -> bool:
        return bool(self.catalog_types() & BLOCK_STORAGE_TYPES)

    def servers(self, *, what: str = "listing servers", **filters: Any) -> list[Any]:
        """Every server of this installation in the project (one LIST by our tag); `filters`: e.g. name."""
        conn = self.conn()
        return self.call(what, lambda: list(conn.compute.servers(details=True, tags=installation_tag(), **filters)))

    def delete_server(self, server_id: str) -> None:
        """Delete a server; already gone is done."""
        try:
            self.call(f"deleting server {server_id}", self.conn().compute.delete_server, server_id, ignore_missing=True)
        except BackendError as exc:
            if exc.kind != "not_found":
                raise

    # ------------------------------------------------------------------ server-create arguments
    def networks_argument(self) -> Any:
        """The `networks` argument of a server create, from the connection's `networks` option."""
        networks = network_names(self.options["networks"])
        if networks in ("none", "auto"):
            return networks
        conn = self.conn()
        found = []
        for name in networks:
            network = self.call(f"finding network {name}", conn.network.find_network, name, ignore_missing=False)
            found.append({"uuid": network.id})
        return found

    def placement_arguments(self) -> dict[str, Any]:
        """The connection's optional server-create arguments (key pair, security groups, zone), where set."""
        arguments: dict[str, Any] = {}
        if self.options["key_name"]:
            arguments["key_name"] = self.options["key_name"]
        if self.options["security_groups"]:
            arguments["security_groups"] = [{"name": name} for name in self.options["security_groups"]]
        if self.options["availability_zone"]:
            arguments["availability_zone"] = self.options["availability_zone"]
        return arguments

    def auth_summary(self) -> str:
        where = self.options["cloud"] or "application credential"
        region = self.options["region"]
        return f"{where}{f' ({region})' if region else ''}"

    # ------------------------------------------------------------------ credentials
    def _connect(self) -> Any:
        path = allowed_credentials_path(self.connection, self.options)
        timeout = float(self.options["api_timeout_seconds"])
        region = self.options["region"] or None
        try:
            if self.options["cloud"]:
                if path and not os.path.exists(path):
                    raise BackendError(f"the clouds.yaml file {path} does not exist", kind="auth")
                config = openstack.config.OpenStackConfig(config_files=[path] if path else None)
                entries = sorted(config.get_cloud_names())
                if self.options["cloud"] not in entries:
                    raise BackendError(
                        f"the clouds.yaml {path or '(default locations)'} has no entry {self.options['cloud']!r}; "
                        f"its entries: {', '.join(entries) or 'none'}",
                        kind="auth",
                    )
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


def network_names(value: Any) -> str | list[str]:
    """The `networks` option read one way everywhere: "none", "auto", or a list of network names or ids.

    A single name given as a string is a list of one (never its letters); "none"/"auto" in a list of one
    mean what they mean alone."""
    if value in (None, "", [], "none"):
        return "none"
    if isinstance(value, str):
        value = [part.strip() for part in value.split(",") if part.strip()]
    names = [str(name).strip() for name in value if str(name).strip()]
    if names in (["none"], ["auto"]):
        return names[0]
    return names or "none"


def allowed_credentials_path(connection: CloudConnection, options: dict[str, Any]) -> str:
    """The credentials file to read, if it and the CA file come from the allowlisted places
    (cloudpivot/credentials.py: files under CREDENTIALS_DIR, variables CLOUDPIVOT_CLOUD_*); else a BackendError."""
    try:
        credentials.check_connection_sources(credentials_ref=connection.credentials_ref, options=options)
        path = _resolve_path(connection.credentials_ref)
        return credentials.allowed_file(path) if path else ""
    except credentials.CredentialsNotAllowed as exc:
        raise BackendError(f"connection {connection.cloud_id}: {exc.field}: {exc.message}", kind="auth") from None


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
    if isinstance(data, dict) and isinstance(data.get("clouds"), dict):
        entries = ", ".join(sorted(data["clouds"])) or "none"
        raise BackendError(
            f"{path} is a clouds.yaml: name the entry to use in options.cloud (its entries: {entries})", kind="auth"
        )
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
