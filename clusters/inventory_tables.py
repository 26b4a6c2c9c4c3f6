"""The cloud page's inventory: the inventory service's answers (clusters/inventory.py) as tables of words.

One table per kind the backend offers (Kubernetes: nodes, namespaces, PVCs, our pods; OpenStack: flavors,
images, networks, volumes, servers, quotas), each row a plain list of cell texts. A cloud that does not
answer the first kind ends the walk: its words are shown once instead of waiting out every kind's timeout;
a kind that fails later shows its own words and the other tables stay.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from cloudpivot.exceptions import ApplicationError, CloudUnavailable, PermissionDenied
from clusters.backends import get_backend
from clusters.backends.base import BackendError
from clusters.models import CloudConnection

CELL_LIMIT = 120  # characters of one cell; the API has the whole value
TITLES = {
    "pvcs": "PersistentVolumeClaims",
    "pods": "Pods of CloudPivot tasks",
    "servers": "Servers CloudPivot made",
    "quotas": "The cloud project's quota",
}


@dataclass
class InventoryTable:
    kind: str
    columns: list[str] = field(default_factory=list)
    rows: list[list[str]] = field(default_factory=list)
    error: str = ""  # the cloud's answer in words when this kind could not be listed

    @property
    def title(self) -> str:
        return TITLES.get(self.kind, self.kind.capitalize())


@dataclass
class CloudInventory:
    tables: list[InventoryTable] = field(default_factory=list)
    error: str = ""  # the cloud did not answer (or has no inventory at all)


def inventory_kinds(connection: CloudConnection) -> tuple[str, ...]:
    """The kinds the connection's backend can list (none for `local`), without asking the cloud."""
    try:
        return get_backend(connection).inventory_kinds
    except BackendError:
        return ()


def cloud_inventory_tables(*, connection: CloudConnection, read: Any) -> CloudInventory:
    """The tables; `read(connection=, kind=)` answers one kind (the page passes what its user may see)."""
    kinds = inventory_kinds(connection)
    if not kinds:
        return CloudInventory(error=f"the {connection.get_backend_display()} backend has no inventory to show")
    found = CloudInventory()
    for kind in kinds:
        try:
            answer = read(connection=connection, kind=kind)
        except PermissionDenied:  # a cloud-wide kind, for administrators: not shown to this user at all
            continue
        except CloudUnavailable as exc:
            if not found.tables:  # not even the first kind: the cloud is down, say it once
                found.error = f"{exc.message}; the inventory could not be read"
                return found
            found.tables.append(InventoryTable(kind=kind, error=exc.message))
            continue
        except ApplicationError as exc:  # this kind only: e.g. no Cinder, or no permission for nodes
            found.tables.append(InventoryTable(kind=kind, error=exc.message))
            continue
        found.tables.append(_table(kind, answer["items"]))
    return found


def _table(kind: str, items: list[dict[str, Any]]) -> InventoryTable:
    columns: list[str] = []
    for item in items:
        columns += [key for key in item if key not in columns]
    rows = [[cell_text(item.get(column)) for column in columns] for item in items]
    return InventoryTable(kind=kind, columns=[c.replace("_", " ") for c in columns], rows=rows)


def cell_text(value: Any) -> str:
    """One value in words: lists joined, {type, status} conditions as `Ready=True`, dicts as `key: value`."""
    if value is None or value == "" or value == [] or value == {}:
        text = "—"
    elif isinstance(value, bool):
        text = "yes" if value else "no"
    elif isinstance(value, dict):
        text = ", ".join(f"{key}: {cell_text(inner)}" for key, inner in value.items())
    elif isinstance(value, list | tuple):
        text = ", ".join(_list_item(inner) for inner in value)
    else:
        text = str(value)
    return text if len(text) <= CELL_LIMIT else text[: CELL_LIMIT - 1] + "…"


def _list_item(value: Any) -> str:
    if isinstance(value, dict) and "type" in value and "status" in value:
        return f"{value['type']}={value['status']}"
    if isinstance(value, dict) and "key" in value and "effect" in value:  # a node taint
        return f"{value['key']}:{value['effect']}"
    return cell_text(value)
