"""The lister of each cloud kind: what carries this installation's marks, read through the cloud's public client."""

from __future__ import annotations

from clusters.models import CloudConnection
from orphans.listers.base import CloudItem, TaggedLister
from orphans.listers.kubernetes import KubernetesTagged
from orphans.listers.openstack import OpenStackTagged

LISTERS: dict[str, type] = {"openstack": OpenStackTagged, "kubernetes": KubernetesTagged}


def tagged_lister(connection: CloudConnection) -> TaggedLister | None:
    """The lister of a connection's backend, None when its resources are not CloudPivot-tagged cloud objects."""
    lister = LISTERS.get(connection.backend)
    return lister(connection) if lister else None  # `local` runs processes on this host: nothing is tagged


__all__ = ["CloudItem", "TaggedLister", "tagged_lister"]
