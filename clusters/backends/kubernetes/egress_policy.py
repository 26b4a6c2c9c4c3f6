"""An attempt's egress as a NetworkPolicy (docs/security.md#egress), named like its Job and owned by it.

Its pods are selected by the Job's pod labels (the attempt and the installation); `policyTypes: [Egress]` with
the rules of the task's effective egress (clusters/egress.py):
- `none`: no rule at all, so nothing leaves the pod (not even DNS);
- a list of destinations: DNS to kube-system (port 53, UDP and TCP), then each destination as an `ipBlock`, with
  its port (TCP and UDP) when it names one;
- `open`: no policy (the namespace's own policies, if any, still apply).

Made before the Job, so its pod never runs a moment without it; given the Job as owner once the Job exists
(the cluster's garbage collector removes it with the Job), and deleted by the cleanup as well. A NetworkPolicy
is enforced only where the cluster's network plugin implements them (Calico, Cilium, k3s' own; not flannel
alone): docs/backends/kubernetes.md.
"""

from __future__ import annotations

from typing import Any

from clusters.backends.base import AttemptRef, BackendError
from clusters.backends.kubernetes.client import KubeApiError, KubeClient
from clusters.backends.kubernetes.labels import LABEL_ATTEMPT, LABEL_INSTALLATION, LABEL_TASK, label_value
from clusters.egress import NONE, OPEN, parse_destination, task_egress

DNS_PORTS = [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]
DNS_RULE = {
    "to": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}}}],
    "ports": DNS_PORTS,
}


def policy_name(attempt: AttemptRef) -> str:
    return attempt.external_name


def closes(attempt: AttemptRef) -> bool:
    """Whether the attempt's pods get a NetworkPolicy: its egress is not open."""
    return task_egress(attempt.spec) != OPEN


def egress_rules(egress: Any) -> list[dict[str, Any]]:
    """The policy's `egress` rules for an effective egress that is not `open`."""
    if egress == NONE:
        return []
    rules = [DNS_RULE]
    for destination in egress:
        network, port = parse_destination(destination)
        rule: dict[str, Any] = {"to": [{"ipBlock": {"cidr": str(network)}}]}
        if port is not None:
            rule["ports"] = [{"protocol": "TCP", "port": port}, {"protocol": "UDP", "port": port}]
        rules.append(rule)
    return rules


def policy_manifest(attempt: AttemptRef, *, namespace: str, installation: str) -> dict[str, Any]:
    labels = {
        LABEL_TASK: label_value(attempt.task_id),
        LABEL_ATTEMPT: attempt.external_name,
        LABEL_INSTALLATION: installation,
    }
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": policy_name(attempt), "namespace": namespace, "labels": labels},
        "spec": {
            "podSelector": {"matchLabels": {LABEL_ATTEMPT: attempt.external_name, LABEL_INSTALLATION: installation}},
            "policyTypes": ["Egress"],
            "egress": egress_rules(task_egress(attempt.spec)),
        },
    }


def ensure_policy(client: KubeClient, attempt: AttemptRef, *, installation: str) -> None:
    """Create the attempt's NetworkPolicy, or bring ours up to date (a retried start); another's is refused."""
    name = policy_name(attempt)
    body = policy_manifest(attempt, namespace=client.namespace, installation=installation)
    api = client.networking()
    try:
        client.call(f"creating NetworkPolicy {name}", api.create_namespaced_network_policy, client.namespace, body)
        return
    except KubeApiError as exc:
        if exc.status != 409:
            raise
    existing = client.call(f"reading NetworkPolicy {name}", api.read_namespaced_network_policy, name, client.namespace)
    if (existing.get("metadata") or {}).get("labels") != body["metadata"]["labels"]:
        raise BackendError(
            f"a NetworkPolicy named {name} already exists in namespace {client.namespace} but was not created by "
            "this CloudPivot installation for this attempt; it was left alone",
            kind="invalid_spec",
        )
    client.call(
        f"updating NetworkPolicy {name}",
        api.patch_namespaced_network_policy,
        name,
        client.namespace,
        {"spec": body["spec"]},
    )


def own_policy(client: KubeClient, attempt: AttemptRef, job: dict[str, Any]) -> None:
    """Make the Job the policy's owner, so deleting the Job (or its TTL) deletes the policy too."""
    name = policy_name(attempt)
    owner = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "name": job["metadata"]["name"],
        "uid": job["metadata"].get("uid", ""),
        "blockOwnerDeletion": False,
    }
    patch = {"metadata": {"ownerReferences": [owner]}}
    client.call(
        f"updating NetworkPolicy {name}",
        client.networking().patch_namespaced_network_policy,
        name,
        client.namespace,
        patch,
    )


def delete_policy(client: KubeClient, attempt: AttemptRef) -> None:
    """Delete the attempt's NetworkPolicy; already gone is success."""
    name = policy_name(attempt)
    try:
        client.call(
            f"deleting NetworkPolicy {name}",
            client.networking().delete_namespaced_network_policy,
            name,
            client.namespace,
        )
    except KubeApiError as exc:
        if exc.status != 404:
            raise
