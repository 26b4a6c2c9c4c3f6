"""A small kustomize: only what deploy/kubernetes uses, so CI renders it with PyPI and Debian alone.

Neither PyPI (pykustomize needs Python 3.14) nor Debian ships a kustomize this project can install, so this
renders the subset the manifests use, and refuses everything else by name (docs/decisions.md, "Rendering
the Kubernetes manifests"): `resources` (files and directories), `namespace`, `images`, `replicas` and
`patches` given by `path` (strategic merge, restricted to maps and to lists Kubernetes replaces whole).
Where `kubectl kustomize` exists, tests/deploy/test_manifests.py checks both render the same objects.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

KEYS = {"apiVersion", "kind", "namespace", "resources", "images", "replicas", "patches"}
CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding", "PersistentVolume", "StorageClass"}
# Lists a strategic merge patch merges by a key (containers by name, ...): a patch here would be merged, not
# replaced, by kustomize; this renderer does not do that, so it refuses such patches.
MERGED_LISTS = {
    "containers",
    "initContainers",
    "env",
    "envFrom",
    "volumes",
    "volumeMounts",
    "ports",
    "imagePullSecrets",
}


class Unsupported(Exception):
    pass


def render(directory: Path) -> list[dict[str, Any]]:
    directory = Path(directory)
    kustomization = yaml.safe_load((directory / "kustomization.yaml").read_text())
    unknown = set(kustomization) - KEYS
    if unknown:
        raise Unsupported(f"{directory}/kustomization.yaml: {', '.join(sorted(unknown))} not supported here")
    objects: list[dict[str, Any]] = []
    for entry in kustomization.get("resources", []):
        path = directory / entry
        objects += render(path) if path.is_dir() else [o for o in yaml.safe_load_all(path.read_text()) if o]
    for patch in kustomization.get("patches", []):
        if set(patch) != {"path"}:
            raise Unsupported(f"{directory}: only patches given by `path` are supported, not {patch}")
        for body in yaml.safe_load_all((directory / patch["path"]).read_text()):
            target = _target(objects, body["kind"], body["metadata"]["name"], patch["path"])
            target.update(_merge(target, body, patch["path"]))
    if "namespace" in kustomization:
        _set_namespace(objects, kustomization["namespace"])
    for image in kustomization.get("images", []):
        _set_image(objects, image)
    for replicas in kustomization.get("replicas", []):
        target = next(
            (o for o in objects if o["metadata"]["name"] == replicas["name"] and "replicas" in o["spec"]), None
        )
        if target is None:
            raise Unsupported(f"{directory}: replicas for {replicas['name']}, which has none")
        target["spec"]["replicas"] = replicas["count"]
    return objects


def _target(objects: list[dict[str, Any]], kind: str, name: str, where: str) -> dict[str, Any]:
    for obj in objects:
        if obj["kind"] == kind and obj["metadata"]["name"] == name:
            return obj
    raise Unsupported(f"patch {where}: no {kind} {name} to patch")


def _merge(base: Any, patch: Any, where: str, key: str = "") -> Any:
    if isinstance(base, dict) and isinstance(patch, dict):
        merged = copy.deepcopy(base)
        for name, value in patch.items():
            if value is None:
                merged.pop(name, None)
            else:
                merged[name] = _merge(base.get(name), value, where, name)
        return merged
    if isinstance(patch, list) and key in MERGED_LISTS:
        raise Unsupported(f"patch {where}: the list {key} would be merged by key; not supported here")
    return copy.deepcopy(patch)


def _set_namespace(objects: list[dict[str, Any]], namespace: str) -> None:
    for obj in objects:
        if obj["kind"] not in CLUSTER_SCOPED:
            obj["metadata"]["namespace"] = namespace
        if obj["kind"] in ("RoleBinding", "ClusterRoleBinding"):
            for subject in obj.get("subjects", []):
                # kustomize's default: a ServiceAccount subject said to be in `default` follows the namespace
                if subject.get("kind") == "ServiceAccount" and subject.get("namespace") == "default":
                    subject["namespace"] = namespace


def pod_spec(obj: dict[str, Any]) -> dict[str, Any] | None:
    spec = obj.get("spec", {})
    if obj["kind"] == "Pod":
        return spec
    if obj["kind"] == "CronJob":
        return spec["jobTemplate"]["spec"]["template"]["spec"]
    return spec.get("template", {}).get("spec")


def containers(obj: dict[str, Any]) -> list[dict[str, Any]]:
    spec = pod_spec(obj) or {}
    return spec.get("initContainers", []) + spec.get("containers", [])


def _set_image(objects: list[dict[str, Any]], image: dict[str, str]) -> None:
    for obj in objects:
        for container in containers(obj):
            name, _, tag = container["image"].partition(":")
            if name == image["name"]:
                container["image"] = f"{image.get('newName', name)}:{image.get('newTag', tag)}".rstrip(":")
