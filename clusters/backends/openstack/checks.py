"""What CloudPivot needs from an OpenStack cloud, each thing checked and said in words (check_cloud, health)."""

from __future__ import annotations

from typing import Any

from clusters.backends.base import BackendError
from clusters.backends.openstack.client import BLOCK_STORAGE_TYPES, OpenStackClient, network_names
from clusters.backends.openstack.cloudinit import DELIVERY_MODES

LISTED = 20  # names listed when a wanted one is missing


def requirements(client: OpenStackClient) -> list[dict[str, Any]]:
    """[{what, ok, required, detail}]: login, the services, and the connection's defaults."""
    results: list[dict[str, Any]] = []
    options = client.options

    def add(what: str, ok: bool, detail: str, required: bool = True) -> None:
        results.append({"what": what, "ok": ok, "required": required, "detail": detail})

    def check_exists(what: str, lookup: Any, configured: bool, existing: Any = None) -> None:
        if not configured:
            add(what.split(" ")[0], False, "no default set in the connection's options")
            return
        try:
            found = client.call(f"looking up {what}", lookup)
        except BackendError as exc:
            add(what, False, exc.message)
            return
        add(what, bool(found), "exists" if found else f"not found in this project{_there_are(client, existing)}")

    try:
        conn = client.conn()
        client.call("authenticating", conn.authorize)
    except BackendError as exc:
        add("authentication (Keystone)", False, exc.message)
        return results
    add("authentication (Keystone)", True, f"token for {client.auth_summary()}")
    types = client.catalog_types()
    for service_type, words in (("compute", "Nova"), ("image", "Glance"), ("network", "Neutron")):
        ok = service_type in types
        add(f"{service_type} service ({words})", ok, "in the catalog" if ok else "missing from the catalog")
    has_cinder = bool(types & BLOCK_STORAGE_TYPES)
    add(
        "block-storage service (Cinder)",
        has_cinder,
        "in the catalog" if has_cinder else "absent: volumes cannot be listed (tasks do not need it)",
        required=False,
    )
    if "compute" in types:
        flavor = options["flavor"]
        check_exists(f"flavor {flavor!r}", lambda: conn.compute.find_flavor(flavor), bool(flavor), conn.compute.flavors)
    if "image" in types:
        image = options["image"]
        check_exists(f"image {image!r}", lambda: conn.image.find_image(image), bool(image), conn.image.images)
    networks = network_names(options["networks"])
    if networks == "none":
        add("networks", True, "none: servers boot without a network (the VM must still reach the callback URL)")
    elif networks == "auto":
        add("networks", True, "auto: Nova gives each server the project's network (or allocates one)")
    elif "network" in types:
        for name in networks:
            find = lambda name=name: conn.network.find_network(name)  # noqa: E731
            check_exists(f"network {name!r}", find, True, conn.network.networks)
    if options["key_name"]:
        key = options["key_name"]
        check_exists(f"key pair {key!r}", lambda: conn.compute.find_keypair(key), True, conn.compute.keypairs)
    mode = options["runner_bootstrap"]
    add("host program", mode in DELIVERY_MODES, delivery_note(mode, options["runner_path"]))
    return results


def delivery_note(mode: str, path: str) -> str:
    if mode == "user_data":
        return f"user_data: the user data carries the host program to {path}; the image needs python3 (3.8+)"
    if mode == "preinstalled":
        return f"preinstalled: the image must hold the host program (cloudpivot-agent.pyz) at {path}"
    return f"runner_bootstrap={mode!r} is not known; use 'user_data' (the default) or 'preinstalled'"


def _there_are(client: OpenStackClient, lister: Any) -> str:
    """ "; there are: a, b" — the names that do exist, so a typo is fixed without a second tool."""
    if lister is None:
        return ""
    try:
        names = sorted({str(item.name) for item in client.call("listing what exists", lambda: list(lister()))})
    except BackendError:
        return ""
    if not names:
        return "; there are none"
    shown = ", ".join(names[:LISTED]) + (f" and {len(names) - LISTED} more" if len(names) > LISTED else "")
    return f"; there are: {shown}"
