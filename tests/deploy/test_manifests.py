"""deploy/: the Kubernetes manifests and the container image definition (issue 16, item 4).

Renders the base and the example overlay (tests/deploy/kustomize.py, or `kubectl kustomize` where it exists,
which must agree), validates every object against the Kubernetes API schema of a current release (offline:
kubernetes-validate ships the schemas), and checks that what the objects reference exists: images, Secrets
and their keys, ConfigMaps, the ServiceAccount, Roles, Services and their ports, probe paths, the
entrypoint's roles, mounted paths; that every environment variable they set is one CloudPivot reads; and that
the Role grants exactly what the Kubernetes backend asks for. The entrypoint's web role is started for real.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from cryptography.fernet import Fernet
from django.urls import resolve

from clusters.backends.kubernetes.inventory import OPTIONAL_PERMISSIONS, REQUIRED_PERMISSIONS
from tests import helpers
from tests.deploy.kustomize import containers, pod_spec, render

ROOT = helpers.BASE_DIR
KUBERNETES = ROOT / "deploy" / "kubernetes"
BASE = KUBERNETES / "base"
OVERLAY = KUBERNETES / "overlays" / "example"
CONTAINER = ROOT / "deploy" / "container"
ENTRYPOINT = CONTAINER / "entrypoint.sh"
KUBERNETES_RELEASE = "1.37"  # the newest schema kubernetes-validate carries (requirements/dev.txt)
# What the operator brings, not the overlay; each must be named in docs/deploy.md.
OPERATOR_PROVIDED = {("Secret", "cloudpivot-cloud-credentials"), ("Secret", "cloudpivot-tls")}
# The Role's reads beyond inventory.py's tables: claims.py reads each claim a task names (and its DataVolume).
CLAIM_READS = {("get", "", "persistentvolumeclaims"), ("get", "cdi.kubevirt.io", "datavolumes")}
CLUSTER_WIDE = {"nodes", "namespaces"}


@pytest.fixture(scope="module")
def base() -> list[dict[str, Any]]:
    return render(BASE)


@pytest.fixture(scope="module")
def overlay() -> list[dict[str, Any]]:
    return render(OVERLAY)


def _find(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any] | None:
    return next((o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name), None)


def _key(obj: dict[str, Any]) -> tuple[str, str, str]:
    return obj["kind"], obj["metadata"].get("namespace", ""), obj["metadata"]["name"]


def _workloads(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [o for o in objects if pod_spec(o)]


def _secret_keys(secret: dict[str, Any]) -> set[str]:
    return set(secret.get("data", {})) | set(secret.get("stringData", {}))


@pytest.mark.parametrize("directory", [BASE, OVERLAY], ids=["base", "overlay"])
def test_every_object_is_valid_for_a_current_kubernetes(directory):
    objects = render(directory)
    assert objects
    for obj in objects:
        kubernetes_validate.validate(obj, KUBERNETES_RELEASE, strict=True)
    # The validator is really checking: a misspelled field is refused.
    broken = json.loads(json.dumps(objects[0]))
    broken["metadata"]["nmae"] = "x"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, KUBERNETES_RELEASE, strict=True)


@pytest.mark.skipif(
    not shutil.which("kubectl"), reason="kubectl is not installed: the renderer is compared where it is"
)
@pytest.mark.parametrize("directory", [BASE, OVERLAY], ids=["base", "overlay"])
def test_the_renderer_agrees_with_kubectl_kustomize(directory):
    done = subprocess.run(["kubectl", "kustomize", str(directory)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    theirs = {_key(o): o for o in yaml.safe_load_all(done.stdout) if o}
    ours = {_key(o): o for o in render(directory)}
    assert ours == theirs


def test_the_overlay_has_the_parts_of_a_deployment(overlay):
    kinds = {(o["kind"], o["metadata"]["name"]) for o in overlay}
    assert kinds >= {
        ("Deployment", "cloudpivot-web"),
        ("Deployment", "cloudpivot-worker"),
        ("Job", "cloudpivot-migrate"),
        ("ServiceAccount", "cloudpivot"),
        ("Role", "cloudpivot-tasks"),
        ("RoleBinding", "cloudpivot-tasks"),
        ("Service", "cloudpivot"),
        ("Ingress", "cloudpivot"),
        ("PodDisruptionBudget", "cloudpivot-web"),
        ("PodDisruptionBudget", "cloudpivot-worker"),
        ("NetworkPolicy", "cloudpivot-deny-ingress"),
        ("NetworkPolicy", "cloudpivot-web"),
        ("Secret", "cloudpivot"),
        ("ConfigMap", "cloudpivot"),
    }
    assert {
        o["metadata"].get("namespace")
        for o in overlay
        if o["kind"] not in ("Namespace", "ClusterRole", "ClusterRoleBinding")
    } == {"cloudpivot"}
    for workload in _workloads(overlay):
        spec = pod_spec(workload)
        assert spec["securityContext"]["runAsNonRoot"] is True and spec["securityContext"]["runAsUser"] != 0
        for container in containers(workload):
            assert container["resources"]["requests"].keys() >= {"cpu", "memory"}, container["name"]
            assert container["securityContext"]["allowPrivilegeEscalation"] is False
    web = pod_spec(_find(overlay, "Deployment", "cloudpivot-web"))["containers"][0]
    assert (web["livenessProbe"]["httpGet"]["path"], web["readinessProbe"]["httpGet"]["path"]) == (
        "/healthz",
        "/readyz",
    )


def test_every_image_is_the_overlays_and_every_role_the_entrypoints(base, overlay):
    roles = set(re.findall(r"^  ([a-z-]+)\)$", ENTRYPOINT.read_text(), re.MULTILINE))
    assert roles >= {"web", "worker", "migrate", "wait-migrations"}
    images = yaml.safe_load((OVERLAY / "kustomization.yaml").read_text())["images"]
    assert {c["image"] for w in _workloads(base) for c in containers(w)} == {i["name"] for i in images}
    expected = {f"{i['newName']}:{i['newTag']}" for i in images}
    for workload in _workloads(overlay):
        for container in containers(workload):
            assert container["image"] in expected and not container["image"].endswith(":latest")
            assert set(container["args"][:1]) <= roles, (workload["metadata"]["name"], container["args"])


def test_every_secret_configmap_and_key_referenced_exists(overlay):
    documented = (ROOT / "docs" / "deploy.md").read_text()
    for kind, name in OPERATOR_PROVIDED:
        assert name in documented, f"{kind} {name} is the operator's, so docs/deploy.md must say so"

    def exists(kind: str, name: str, key: str | None = None, *, optional: bool = False) -> None:
        found = _find(overlay, kind, name)
        if found is None:
            assert (kind, name) in OPERATOR_PROVIDED, f"{kind} {name} is referenced but neither rendered nor documented"
            return
        keys = _secret_keys(found) if kind == "Secret" else set(found.get("data", {}))
        assert key is None or key in keys or optional, f"{kind} {name} has no key {key}"

    for workload in _workloads(overlay):
        spec = pod_spec(workload)
        exists("ServiceAccount", spec["serviceAccountName"])
        for volume in spec.get("volumes", []):
            if "secret" in volume:
                exists("Secret", volume["secret"]["secretName"], optional=volume["secret"].get("optional", False))
                for item in volume["secret"].get("items", []):
                    exists("Secret", volume["secret"]["secretName"], item["key"])
            if "configMap" in volume:
                exists("ConfigMap", volume["configMap"]["name"])
        for container in containers(workload):
            for source in container.get("envFrom", []):
                if "configMapRef" in source:
                    exists("ConfigMap", source["configMapRef"]["name"])
                if "secretRef" in source:
                    exists("Secret", source["secretRef"]["name"])
            for variable in container.get("env", []):
                ref = variable.get("valueFrom", {})
                if "secretKeyRef" in ref:
                    exists("Secret", ref["secretKeyRef"]["name"], ref["secretKeyRef"]["key"])
                if "configMapKeyRef" in ref:
                    exists("ConfigMap", ref["configMapKeyRef"]["name"], ref["configMapKeyRef"]["key"])
    for ingress in (o for o in overlay if o["kind"] == "Ingress"):
        for tls in ingress["spec"].get("tls", []):
            exists("Secret", tls["secretName"])
        for rule in ingress["spec"]["rules"]:
            for path in rule["http"]["paths"]:
                service = _find(overlay, "Service", path["backend"]["service"]["name"])
                assert service is not None
                assert path["backend"]["service"]["port"]["name"] in {p["name"] for p in service["spec"]["ports"]}
    for binding in (o for o in overlay if o["kind"] in ("RoleBinding", "ClusterRoleBinding")):
        exists(binding["roleRef"]["kind"], binding["roleRef"]["name"])
        for subject in binding["subjects"]:
            assert _find(overlay, subject["kind"], subject["name"])["metadata"]["namespace"] == subject["namespace"]


def test_selectors_and_ports_meet_the_pods_they_mean(overlay):
    pods = [(pod_spec(w), w["spec"]["template"]["metadata"]["labels"]) for w in _workloads(overlay)]

    def selected(selector: dict[str, str]) -> list[dict[str, Any]]:
        chosen = [spec for spec, labels in pods if selector.items() <= labels.items()]
        assert chosen, f"nothing matches {selector}"
        return chosen

    for obj in overlay:
        if obj["kind"] == "Service" and obj["spec"].get("selector"):
            for spec in selected(obj["spec"]["selector"]):
                names = {p["name"] for c in spec["containers"] for p in c.get("ports", [])}
                assert {p["targetPort"] for p in obj["spec"]["ports"]} <= names
        if obj["kind"] in ("PodDisruptionBudget", "NetworkPolicy", "Deployment"):
            selector = obj["spec"].get("selector") or obj["spec"]["podSelector"]
            selected(selector["matchLabels"])
    for workload in _workloads(overlay):
        for container in containers(workload):
            for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
                if probe in container:
                    resolve(container[probe]["httpGet"]["path"])  # a path the server has


def _variables_read() -> set[str]:
    """Every environment variable CloudPivot's code (not its tests) or the image's entrypoint reads."""
    plain = re.compile(
        r"""(?:\benv\.\w+|os\.environ\.get|os\.environ\.setdefault|os\.getenv)\(\s*["']([A-Z][A-Z0-9_]*)["']"""
    )
    indexed = re.compile(r"""os\.environ\[\s*["']([A-Z][A-Z0-9_]*)["']\s*\]""")
    secret = re.compile(r"""\b(?:envsecret|getenv)\(\s*["']([A-Z][A-Z0-9_]*)["']""")  # NAME or NAME_FILE
    names: set[str] = set()
    for path in ROOT.glob("**/*.py"):
        if path.relative_to(ROOT).parts[0] in {".venv", "tests", "var", "cli"}:
            continue
        text = path.read_text()
        names |= set(plain.findall(text)) | set(indexed.findall(text))
        names |= {n for name in secret.findall(text) for n in (name, f"{name}_FILE")}
    names |= set(re.findall(r"\$\{([A-Z][A-Z0-9_]*)", ENTRYPOINT.read_text()))
    return names


def test_every_variable_the_manifests_set_is_one_cloudpivot_reads(overlay):
    read = _variables_read()
    assert {"DATABASE_URL", "REDIS_URL", "DJANGO_SECRET_KEY_FILE", "FORWARDED_ALLOW_IPS"} <= read  # the scan works
    config = _find(overlay, "ConfigMap", "cloudpivot")["data"]
    set_here = set(config)
    for workload in _workloads(overlay):
        for container in containers(workload):
            set_here |= {variable["name"] for variable in container.get("env", [])}
    assert set_here - read == set(), "variables nothing reads"
    # Paths the configuration names are mounted in every container that reads them.
    paths = {name: value for name, value in config.items() if value.startswith("/")}
    for workload in _workloads(overlay):
        for container in containers(workload):
            mounts = [m["mountPath"] for m in container.get("volumeMounts", [])]
            for name, value in paths.items():
                if name == "CLOUDPIVOT_CREDENTIALS_DIR" and workload["metadata"]["name"] == "cloudpivot-migrate":
                    continue  # migrations use no cloud
                if container["name"] == "wait-migrations" and name == "CLOUDPIVOT_CREDENTIALS_DIR":
                    continue
                assert any(value == m or value.startswith(m + "/") for m in mounts), (container["name"], name)
    secret_file = Path(config["DJANGO_SECRET_KEY_FILE"])
    assert secret_file.name in _secret_keys(_find(overlay, "Secret", "cloudpivot"))


def _grants(rules: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    return {(v, g, r) for rule in rules for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]}


def test_the_role_grants_exactly_what_the_kubernetes_backend_asks(overlay):
    def wanted(table):
        return {(verb, group, f"{res}/{sub}" if sub else res) for verb, group, res, sub, _ in table}

    namespaced = wanted(REQUIRED_PERMISSIONS) | {p for p in wanted(OPTIONAL_PERMISSIONS) if p[2] not in CLUSTER_WIDE}
    namespaced = {p for p in namespaced if not (p[1] == "metrics.k8s.io" and p[2] == "nodes")}
    assert _grants(_find(overlay, "Role", "cloudpivot-tasks")["rules"]) == namespaced | CLAIM_READS
    cluster = wanted(OPTIONAL_PERMISSIONS) - namespaced
    assert _grants(_find(overlay, "ClusterRole", "cloudpivot-inventory")["rules"]) == cluster


def test_the_image_runs_as_a_non_root_user_with_the_entrypoint():
    text = (CONTAINER / "Containerfile").read_text()
    user = re.findall(r"^USER (\S+)$", text, re.MULTILINE)
    assert user and user[-1].split(":")[0] not in ("0", "root")
    entrypoint = json.loads(re.search(r"^ENTRYPOINT (.+)$", text, re.MULTILINE).group(1))
    assert entrypoint == ["/opt/cloudpivot/" + str(ENTRYPOINT.relative_to(ROOT))]
    assert os.access(ENTRYPOINT, os.X_OK)
    for source in re.findall(r"^COPY (?!--from)(?:--\S+ )*(\S+) ", text, re.MULTILINE):
        assert (ROOT / source).exists(), source
    read = _variables_read()
    for name in re.findall(r"\b((?:CLOUDPIVOT|DJANGO)_[A-Z0-9_]+)=", text):
        assert name in read, name
    assert "runner_api" not in (ROOT / ".dockerignore").read_text()  # the Runner and the host agent are in it


@pytest.mark.django_db(transaction=True)
def test_the_entrypoint_serves_web_as_the_image_does(tmp_path):
    """The image's layout on this host: static files collected as the Containerfile does, the production
    settings, a secret key file; then `entrypoint.sh web` serves the probes over plain HTTP and the rest over
    the proxy's HTTPS only."""
    port = helpers.free_port()
    (tmp_path / "secret-key").write_text("x" * 50)
    (tmp_path / "secrets-key").write_text(Fernet.generate_key().decode())
    env = helpers.server_environment(port=port, runs_dir=tmp_path / "runs") | {
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "HOST": "127.0.0.1",
        "CLOUDPIVOT_STATIC_ROOT": str(tmp_path / "static"),
    }
    build = env | {
        "CLOUDPIVOT_VAR_DIR": str(tmp_path / "build-var"),
        "DJANGO_SETTINGS_MODULE": "cloudpivot.settings.base",
    }
    collected = subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--noinput", "-v", "0"],
        env=build,
        cwd=ROOT,
        capture_output=True,
        timeout=300,
    )
    assert collected.returncode == 0, collected.stderr
    assert (tmp_path / "static" / "css" / "cloudpivot.css.gz").exists()
    assert subprocess.run([str(ENTRYPOINT), "nonsense"], env=env, capture_output=True).returncode == 64
    waited = subprocess.run([str(ENTRYPOINT), "wait-migrations"], env=env, capture_output=True, timeout=120)
    assert waited.returncode == 0, waited.stderr
    env = env | {
        "DJANGO_SETTINGS_MODULE": "cloudpivot.settings.prod",
        "DJANGO_SECRET_KEY_FILE": str(tmp_path / "secret-key"),
        "CLOUDPIVOT_SECRETS_KEY_FILE": str(tmp_path / "secrets-key"),
    }
    del env["DJANGO_SECRET_KEY"]
    log = tmp_path / "web.log"
    web = subprocess.Popen(
        [str(ENTRYPOINT), "web"], env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT, start_new_session=True
    )
    base = f"http://127.0.0.1:{port}"
    try:
        helpers.wait_for(
            lambda: _status(base + "/healthz") == 200 or web.poll() is not None,
            timeout=60,
            what="the entrypoint's web server",
        )
        assert web.poll() is None, log.read_text()
        assert _status(base + "/readyz") == 200  # plain HTTP, as a kubelet probes
        assert _status(base + "/tasks/") == 301  # everything else to HTTPS (the Ingress's side)
        assert _status(base + "/static/css/cloudpivot.css", {"X-Forwarded-Proto": "https"}) == 200
    finally:
        helpers.stop_process_group(web)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def _status(url: str, headers: dict[str, str] | None = None) -> int:
    opener = urllib.request.build_opener(_NoRedirect)
    try:
        with opener.open(urllib.request.Request(url, headers=headers or {}), timeout=5) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code
    except OSError:
        return 0


def test_retentions_archives_outlive_the_worker_pods(overlay):
    """What retention removes is archived first: the archive is a claim of its own, never an emptyDir (issue 34)."""
    worker = _find(overlay, "Deployment", "cloudpivot-worker")
    spec = pod_spec(worker)
    (container,) = [c for c in spec["containers"] if c["name"] == "worker"]
    archive = next(e["value"] for e in container["env"] if e["name"] == "CLOUDPIVOT_RETENTION_ARCHIVE_DIR")
    mount = next(
        m for m in container["volumeMounts"] if archive == m["mountPath"] or archive.startswith(m["mountPath"] + "/")
    )
    volume = next(v for v in spec["volumes"] if v["name"] == mount["name"])
    claim = volume["persistentVolumeClaim"]["claimName"]
    assert _find(overlay, "PersistentVolumeClaim", claim)["spec"]["accessModes"] == ["ReadWriteMany"]
