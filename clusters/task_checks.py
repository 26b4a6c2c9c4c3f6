"""The cloud-specific half of a task submission: what the cloud refuses, what the project may not use there,
and what the task will really hold (its quota footprint). Called once by tasks.services.submission.

Order: the backend's `validate` (what this cloud cannot run, the node selectors and tolerations the
connection does not allow), then `access_errors` (another project's image or volume: docs/security.md),
then `task_resources` (the connection's default requests, a VM's flavor), which is written into the
normalized spec so admission, usage and the manifest all count and ask the same amounts.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from cloudpivot.accounts.models import Project
from cloudpivot.exceptions import BackendError, InvalidSpec, cloud_error
from clusters.backends import get_backend
from clusters.data_refs import data_kind_errors
from clusters.debug_hold import debug_hold_errors
from clusters.egress import NONE, OPEN, effective_egress, policy_of
from clusters.models import CloudConnection

BACKEND_WORDS = {"local": "local", "kubernetes": "Kubernetes", "openstack": "OpenStack"}


def task_spec_check(*, connection: CloudConnection, project: Project, spec: dict[str, Any]) -> dict[str, Any]:
    """Return the spec with its real `resources`; raise InvalidSpec (400) or PermissionDenied (403) naming the field."""
    doing = f"checking the task for {connection.cloud_id}"
    try:
        backend = get_backend(connection)
        cloud_words = f"{BACKEND_WORDS.get(connection.backend, connection.backend)} cloud"
        _refuse(data_kind_errors(spec, backend.data_kinds, cloud=connection.cloud_id, what=cloud_words))
        errors = backend.validate(spec)
        _refuse(errors)
        _refuse(backend.access_errors(spec, project_id=project.pk, project=project.slug))
        resources = backend.task_resources(spec)
    except BackendError as exc:  # e.g. a connection whose backend kind this version does not have
        raise cloud_error(exc, doing=doing, field="cloud") from None
    _refuse(_more_than_given(spec.get("resources") or {}, resources, connection))
    _refuse(debug_hold_errors(connection, spec))
    egress = _egress(connection, backend.egress_closes, spec.get("network"))
    connection_facts_keep(connection=connection, facts=backend.learned_facts())
    data = {"data": backend.data_resolved(spec)} if spec.get("data") else {}
    return {**spec, "resources": resources, "egress": egress, **data}


def _egress(connection: CloudConnection, closes: frozenset[str], network: Any) -> Any:
    """The task's effective egress (clusters/egress.py), kept in its spec; what the cloud or its policy refuses
    is a 400 naming `network`."""
    cloud = connection.cloud_id
    if isinstance(network, list) and "list" not in closes:
        can = "closes all of the network or none of it" if NONE in closes else "does not close the network"
        ask = 'ask for "none" or "default"' if NONE in closes else 'remove `network` or ask for "default"'
        message = f"the {cloud} cloud {can} and cannot allow a list of destinations; {ask}"
        _refuse([{"field": "network", "message": message}])
    egress, refused = effective_egress(network, connection.options)
    if refused:
        allowed = policy_of(connection.options)["allow"]
        allows = f"it allows: {', '.join(allowed)}" if allowed else "it allows none"
        message = f"the egress policy of the {cloud} cloud does not allow {', '.join(refused)} ({allows})"
        _refuse([{"field": "network", "message": message}])
    if egress == NONE and NONE not in closes:
        why = "this task asks" if network == NONE else "the connection's egress policy asks"
        message = f"{why} for no outbound network, but the {cloud} cloud cannot close it"
        _refuse([{"field": "network", "message": message}])
    return egress if egress in (NONE, OPEN) else list(egress)


def connection_facts_keep(*, connection: CloudConnection, facts: dict[str, Any]) -> None:
    """Keep what a backend learned about its cloud (a flavor's size) so later submissions need no cloud call."""
    if facts:
        connection.facts = {**(connection.facts or {}), **facts}
        CloudConnection.objects.filter(pk=connection.pk).update(facts=connection.facts)


def _refuse(errors: list[dict[str, str]]) -> None:
    if errors:
        raise InvalidSpec(f"invalid task document: {errors[0]['field']}: {errors[0]['message']}", errors=errors)


def _more_than_given(asked: dict[str, Any], given: dict[str, Any], connection: CloudConnection) -> list[dict]:
    """A task may not ask more than its cloud gives it (an OpenStack task gets its connection's flavor)."""
    errors = []
    for key, words in (("cpu", "vCPU"), ("memory_mb", "MB memory")):
        want, have = asked.get(key), given.get(key)
        if want and have and Decimal(str(want)) > Decimal(str(have)):
            message = f"the task asks {want} {words} but a task on the {connection.cloud_id} cloud gets {have}"
            if connection.options.get("flavor"):
                message += f" (its flavor {connection.options['flavor']})"
            errors.append({"field": f"resources.{key}", "message": message})
    return errors
