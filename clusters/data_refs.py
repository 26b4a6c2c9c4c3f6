"""Data references of a task (`data`, docs/data.md): the kinds, what each cloud mounts, and `local`'s allowed roots.

One shape for every cloud: `{"kind", "ref", "path", "mode", "name"}` (and `size_gb`, `keep` for `scratch`). The
task document checks the shape (tasks/specs.py); each backend declares the kinds it mounts (`data_kinds`,
clusters/backends/base.py), and what a cloud cannot mount is refused at submission naming `data.N.kind`.
"""

from __future__ import annotations

import os
from typing import Any

PVC, VOLUME, SCRATCH, DIR, OBJECT = "pvc", "volume", "scratch", "dir", "object"
DATA_KINDS = (PVC, VOLUME, SCRATCH, DIR, OBJECT)
KIND_WORDS = {
    PVC: "a Kubernetes PersistentVolumeClaim",
    VOLUME: "an OpenStack Cinder volume (borrowed)",
    SCRATCH: "a volume created for each attempt",
    DIR: "a directory on the host, under an allowed root",
    OBJECT: "an object-store prefix, staged in",
}
# What an attempt makes itself (and so must remove or keep); every other kind is borrowed.
CREATED_KINDS = frozenset({SCRATCH})
MAX_DATA = 20
ENV_PREFIX = "CLOUDPIVOT_DATA_"


def data_kind_errors(spec: dict[str, Any], kinds: frozenset[str], *, cloud: str, what: str) -> list[dict[str, str]]:
    """`data.N.kind` for each reference of a kind the cloud cannot mount, in words with what it can."""
    errors = []
    can = ", ".join(f"'{kind}'" for kind in DATA_KINDS if kind in kinds) or "none yet"
    for index, ref in enumerate(spec.get("data") or []):
        if ref["kind"] not in kinds:
            message = f"the {what} {cloud} cannot mount '{ref['kind']}' references; it can mount: {can}"
            errors.append({"field": f"data.{index}.kind", "message": message})
    return errors


def data_roots(options: dict[str, Any]) -> list[str]:
    """A `local` connection's allowed roots (`data_roots`), each resolved (symlinks followed) as it is now."""
    return [os.path.realpath(root) for root in options.get("data_roots") or [] if os.path.isabs(str(root))]


def dir_ref_problem(ref: str, roots: list[str], *, cloud: str) -> tuple[str, str]:
    """(the resolved directory, "") when `ref` is an existing directory inside one of `roots` once its symlinks are
    resolved; else ("", why in words). `..` parts and relative paths are refused before anything is resolved."""
    if not ref.startswith("/"):
        return "", "must be an absolute path on the host, e.g. /srv/datasets/mnist"
    if ".." in ref.split("/") or "\x00" in ref:
        return "", "must not have '..' parts"
    if not roots:
        return "", f"the {cloud} cloud allows no host directories: its admin has set no `data_roots`"
    real = os.path.realpath(ref)
    allowed = ", ".join(roots)
    if not any(real == root or real.startswith(root.rstrip("/") + "/") for root in roots):
        moved = f" (it leads to {real})" if real != os.path.normpath(ref) else ""
        return "", f"is outside the directories the {cloud} cloud allows{moved}; allowed: {allowed}"
    if not os.path.isdir(real):
        return "", f"no such directory on the host of the {cloud} cloud"
    return real, ""


def data_env(spec: dict[str, Any]) -> dict[str, str]:
    """Where the program finds each reference: `CLOUDPIVOT_DATA_<N>` (and `CLOUDPIVOT_DATA_<NAME>` when it has a
    `name`): a `dir` at its (resolved) host path, a mounted kind at its `path`."""
    env = {}
    for index, ref in enumerate(spec.get("data") or []):
        where = ref["ref"] if ref["kind"] == DIR else ref.get("path") or ""
        if not where:
            continue
        env[f"{ENV_PREFIX}{index}"] = where
        if ref.get("name"):
            env[f"{ENV_PREFIX}{ref['name'].upper()}"] = where
    return env


def pvc_volumes(spec: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The claims a Kubernetes task mounts, `volumes` and `data` of kind pvc alike (one code path), each with the
    field that names its claim: [("volumes.0.claim", volume), ("data.2.ref", volume)]."""
    volumes = [(f"volumes.{i}.claim", dict(volume)) for i, volume in enumerate(spec.get("volumes") or [])]
    for index, ref in enumerate(spec.get("data") or []):
        if ref["kind"] == PVC:
            volume = {"claim": ref["ref"], "mount_path": ref["path"], "read_only": ref.get("mode") != "rw"}
            volumes.append((f"data.{index}.ref", volume))
    return volumes
