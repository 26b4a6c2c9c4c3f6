"""The admin's connection form: typed fields for what each backend reads, every mistake refused on save.

The typed fields are written into `options` (and, for Kubernetes, `endpoint` and `scope`); "Other options"
holds the rest as JSON. On save: unknown option keys (a misspelled `flavour`), wrong types, credential
files that cannot be read or are not what the backend needs, a clouds.yaml entry that does not exist (the
existing entries are listed) — each on the field at fault. With "Check against the cloud" ticked, the
cloud is asked too (flavor, image, networks, key pair), and what is missing is listed with what exists.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml
from django import forms

from cloudpivot import credentials
from clusters.choices import BackendKind
from clusters.connection_options import option_errors
from clusters.health import connection_checks
from clusters.models import CloudConnection

# form field → (backend, option key, kind): the typed part of `options`
OPENSTACK_FIELDS = {
    "os_cloud": "cloud",
    "os_region": "region",
    "os_flavor": "flavor",
    "os_image": "image",
    "os_networks": "networks",
    "os_key_name": "key_name",
    "os_security_groups": "security_groups",
    "os_availability_zone": "availability_zone",
    "os_boot_deadline_seconds": "boot_deadline_seconds",
    "os_callback_url": "callback_url",
}
KUBERNETES_FIELDS = {
    "k8s_ca_file": "ca_file",
    "k8s_context": "context",
    "k8s_service_account": "service_account",
    "k8s_image_pull_secrets": "image_pull_secrets",
}
DEFAULT_FIELDS = {"k8s_default_cpu": "cpu", "k8s_default_memory_mb": "memory_mb"}
LIST_FIELDS = {"os_security_groups", "k8s_image_pull_secrets"}
# What the cloud checks (clusters/backends/openstack/checks.py) name first → the field at fault
CHECK_FIELDS = {
    "authentication": "credentials_ref",
    "flavor": "os_flavor",
    "image": "os_image",
    "network": "os_networks",
    "networks": "os_networks",
    "key": "os_key_name",
}


def _names(text: str) -> list[str]:
    return [part.strip() for part in (text or "").replace("\n", ",").split(",") if part.strip()]


class CloudConnectionForm(forms.ModelForm):
    # ---------------------------------------------------------------- OpenStack
    os_cloud = forms.CharField(
        label="clouds.yaml entry",
        required=False,
        help_text="The entry (under `clouds:`) of the clouds.yaml named in Credentials. Empty: Credentials "
        "is an application-credential file.",
    )
    os_region = forms.CharField(label="Region", required=False, help_text="Empty: the entry's own region.")
    os_flavor = forms.CharField(label="Flavor", required=False, help_text="Name or id; every task server uses it.")
    os_image = forms.CharField(label="Image", required=False, help_text="Default image (a task may name another).")
    os_networks = forms.CharField(
        label="Networks",
        required=False,
        initial="none",
        help_text="`none`, `auto`, or network names/ids separated by commas.",
    )
    os_key_name = forms.CharField(label="Key pair", required=False)
    os_security_groups = forms.CharField(label="Security groups", required=False, help_text="Names, comma-separated.")
    os_availability_zone = forms.CharField(label="Availability zone", required=False)
    os_boot_deadline_seconds = forms.IntegerField(
        label="Boot deadline (s)",
        required=False,
        min_value=1,
        help_text="How long a task's VM may boot before its Runner must call (empty: 300).",
    )
    os_callback_url = forms.CharField(
        label="Callback URL",
        required=False,
        help_text="How VMs reach CloudPivot (empty: CLOUDPIVOT_RUNNER_SERVER_URL).",
    )
    # ---------------------------------------------------------------- Kubernetes
    k8s_ca_file = forms.CharField(
        label="CA file",
        required=False,
        help_text="The API server's CA bundle (a file under the credentials directory).",
    )
    k8s_context = forms.CharField(label="kubeconfig context", required=False)
    k8s_service_account = forms.CharField(label="Service account of task pods", required=False)
    k8s_image_pull_secrets = forms.CharField(label="Image pull secrets", required=False, help_text="Comma-separated.")
    k8s_default_cpu = forms.FloatField(
        label="Default CPU per task",
        required=False,
        min_value=0.001,
        help_text="What a task that names no resources gets and counts against its quota (empty: 1).",
    )
    k8s_default_memory_mb = forms.IntegerField(
        label="Default memory per task (MB)", required=False, min_value=1, help_text="Empty: 1024."
    )
    # ---------------------------------------------------------------- both
    options = forms.JSONField(
        label="Other options",
        required=False,
        widget=forms.Textarea(attrs={"rows": 4, "cols": 60}),
        help_text="A JSON object of the backend's remaining options (docs/backends/); unknown keys are refused.",
    )
    dispatch_override = forms.BooleanField(
        label="Turn dispatch on without a passing check",
        required=False,
        help_text="Dispatch comes on only when the connection's checks pass; ticking this skips them and is "
        "recorded in the audit trail.",
    )
    check_cloud = forms.BooleanField(
        label="Check against the cloud on save",
        required=False,
        initial=True,
        help_text="Log in and look up the flavor, image, networks and key pair before saving.",
    )

    class Meta:
        model = CloudConnection
        fields = [
            "cloud_id",
            "name",
            "backend",
            "runs_on_host",
            "dispatch_enabled",
            "max_active_tasks",
            "projects",
            "endpoint",
            "scope",
            "credentials_ref",
            "options",
        ]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        options = dict(self.instance.options or {}) if self.instance.pk else {}
        typed = {**OPENSTACK_FIELDS, **KUBERNETES_FIELDS}
        backend = self.instance.backend
        mine = OPENSTACK_FIELDS if backend == BackendKind.OPENSTACK else KUBERNETES_FIELDS
        for name, key in typed.items():
            if name in mine and key in options:
                value = options.pop(key)
                self.initial[name] = ", ".join(value) if isinstance(value, list) else value
        if backend == BackendKind.KUBERNETES and isinstance(options.get("default_resources"), dict):
            defaults = options.pop("default_resources")
            self.initial["k8s_default_cpu"] = defaults.get("cpu")
            self.initial["k8s_default_memory_mb"] = defaults.get("memory_mb")
        self.initial["options"] = options
        if "dispatch_enabled" in self.fields:
            if not self.instance.pk:  # a new connection dispatches only once an admin turns it on, checked
                self.initial["dispatch_enabled"] = False
            self.fields[
                "dispatch_enabled"
            ].help_text = "Off: new tasks wait; running ones go on. Turning it on runs the connection's checks first."
        if "endpoint" in self.fields:
            self.fields["endpoint"].label = "API server URL"
            self.fields["endpoint"].help_text = "Kubernetes only (token mode; a kubeconfig names its own)."
        if "scope" in self.fields:
            self.fields["scope"].label = "Namespace"
            self.fields["scope"].help_text = "Kubernetes only: where task Jobs are made (empty: default)."
        if "credentials_ref" in self.fields:
            self.fields["credentials_ref"].label = "Credentials"
            self.fields["credentials_ref"].help_text = (
                "OpenStack: the path of a clouds.yaml (name its entry below) or of an application-credential "
                "file. Kubernetes: token-file:PATH, kubeconfig:PATH or in-cluster. Or env:CLOUDPIVOT_CLOUD_… "
                "naming a variable that holds the path. Files must lie under the credentials directory."
            )

    # ---------------------------------------------------------------- validation
    def clean(self) -> dict[str, Any]:
        data = super().clean()
        backend = data.get("backend") or self.instance.backend
        options = self._other_options()
        if options is None:
            return data
        typed = OPENSTACK_FIELDS if backend == BackendKind.OPENSTACK else KUBERNETES_FIELDS
        for name, key in typed.items():
            value = data.get(name)
            if value in (None, ""):
                continue
            if name in LIST_FIELDS:
                value = _names(value)
            elif name == "os_networks":
                value = value.strip() if value.strip() in ("none", "auto") else _names(value)
            if key in options:
                self.add_error("options", f"'{key}' is set twice: here and in the field above; keep one")
            options[key] = value
        if backend == BackendKind.KUBERNETES:
            self._default_resources(data, options)
        others = {**OPENSTACK_FIELDS, **KUBERNETES_FIELDS, **dict.fromkeys(DEFAULT_FIELDS, "default_resources")}
        for name in set(others) - set(typed) - (set(DEFAULT_FIELDS) if backend == BackendKind.KUBERNETES else set()):
            if data.get(name) not in (None, ""):
                self.add_error(name, f"not read by {backend} connections; leave it empty")
        for key, words in option_errors(backend, options):
            field = next((n for n, k in typed.items() if k == key), "options")
            self.add_error(field, words)
        data["options"] = options
        if backend == BackendKind.OPENSTACK:
            self._clean_openstack(data, options)
        elif backend == BackendKind.KUBERNETES:
            self._clean_kubernetes(data)
        if not self.errors and data.get("check_cloud") and backend == BackendKind.OPENSTACK:
            self._check_the_cloud(data, options)
        return data

    def _post_clean(self) -> None:
        """Dispatch comes on only for a connection whose checks pass (the instance carries the form's values
        here), or with the audited override."""
        super()._post_clean()
        turned_on = "dispatch_enabled" in self.changed_data and self.cleaned_data.get("dispatch_enabled")
        if self.errors or not turned_on or self.cleaned_data.get("dispatch_override"):
            return
        report = connection_checks(self.instance)
        if not report.ok:
            self.add_error(
                "dispatch_enabled",
                f"cannot turn dispatch on: the connection's check fails: {report.summary}. Fix it and save "
                'again, save with dispatch off, or tick "Turn dispatch on without a passing check".',
            )

    @property
    def dispatch_overridden(self) -> bool:
        """Dispatch turned on with the override: the admin records it in the audit entry."""
        return bool(
            "dispatch_enabled" in self.changed_data
            and self.cleaned_data.get("dispatch_enabled")
            and self.cleaned_data.get("dispatch_override")
        )

    def _default_resources(self, data: dict[str, Any], options: dict[str, Any]) -> None:
        """The two default-resource fields → options.default_resources (what the Kubernetes backend reads)."""
        given = {key: data.get(name) for name, key in DEFAULT_FIELDS.items() if data.get(name) is not None}
        if not given:
            return
        if "default_resources" in options:
            self.add_error("options", "'default_resources' is set twice: here and in the fields above; keep one")
            return
        if isinstance(given.get("cpu"), float) and given["cpu"].is_integer():
            given["cpu"] = int(given["cpu"])
        options["default_resources"] = {"cpu": 1, "memory_mb": 1024} | given

    def _other_options(self) -> dict[str, Any] | None:
        if "options" in self.errors:
            return None
        value = self.cleaned_data.get("options")
        if value in (None, ""):
            return {}
        if not isinstance(value, dict):
            self.add_error("options", 'must be a JSON object, e.g. {"retention": "keep"}')
            return None
        return dict(value)

    def _clean_openstack(self, data: dict[str, Any], options: dict[str, Any]) -> None:
        for name in ("endpoint", "scope"):
            if data.get(name):
                self.add_error(
                    name,
                    "an OpenStack connection reads its endpoint and project from the credentials (clouds.yaml "
                    "entry or application credential); leave this empty",
                )
        path = self._credentials_file(data, required=True)
        if not path:
            return
        try:
            document = yaml.safe_load(Path(path).read_text())
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
            self.add_error("credentials_ref", f"cannot read {path}: {exc}")
            return
        entries = sorted((document.get("clouds") or {}) if isinstance(document, dict) else {})
        entry = options.get("cloud", "")
        if entry:
            if not entries:
                self.add_error("os_cloud", f"{path} is not a clouds.yaml (it has no `clouds:` entries)")
            elif entry not in entries:
                self.add_error("os_cloud", f"{path} has no entry '{entry}'; its entries: {', '.join(entries)}")
            return
        if entries:
            self.add_error(
                "os_cloud",
                f"{path} is a clouds.yaml: name the entry to use (its entries: {', '.join(entries)})",
            )
            return
        needed = ("auth_url", "application_credential_id", "application_credential_secret")
        missing = [key for key in needed if not (isinstance(document, dict) and document.get(key))]
        if missing:
            self.add_error(
                "credentials_ref",
                f"{path} is neither a clouds.yaml nor an application-credential file (missing {', '.join(missing)})",
            )

    def _clean_kubernetes(self, data: dict[str, Any]) -> None:
        ref = (data.get("credentials_ref") or "").strip()
        if ref == "in-cluster":
            return
        path = self._credentials_file(data, required=False)
        if ref.startswith("kubeconfig:") or not ref:
            if not ref and not data.get("endpoint"):
                self.add_error("endpoint", "name the API server URL (or use a kubeconfig: or in-cluster credential)")
            return
        if path and not data.get("endpoint"):
            self.add_error("endpoint", "a token needs the API server URL")

    def _credentials_file(self, data: dict[str, Any], *, required: bool) -> str:
        """The readable file the credentials name ("" after adding the error, or when none is named)."""
        if "credentials_ref" in self.errors:
            return ""
        ref = (data.get("credentials_ref") or "").strip()
        if not ref:
            if required:
                self.add_error("credentials_ref", "name the credentials file (a clouds.yaml or application credential)")
            return ""
        if ref == "in-cluster":
            return ""
        if ref.startswith("env:"):
            return ""  # read where the backend runs (a worker's environment), not necessarily this process's
        path = ref.split(":", 1)[1] if ref.split(":", 1)[0] in ("token-file", "kubeconfig", "file") else ref
        try:
            path = credentials.allowed_file(path)
        except credentials.CredentialsNotAllowed as exc:
            self.add_error("credentials_ref", exc.message)
            return ""
        if not os.path.isfile(path) or not os.access(path, os.R_OK):
            self.add_error("credentials_ref", f"{path} does not exist or CloudPivot cannot read it")
            return ""
        return path

    def _check_the_cloud(self, data: dict[str, Any], options: dict[str, Any]) -> None:
        """Ask the cloud about the defaults, each missing one on its field with what exists."""
        from clusters.backends import get_backend
        from clusters.backends.base import BackendError

        probe = CloudConnection(
            cloud_id=data.get("cloud_id") or "new",
            backend=BackendKind.OPENSTACK,
            credentials_ref=data.get("credentials_ref", ""),
            options=options,
        )
        try:
            results = get_backend(probe).requirements() or []
        except BackendError as exc:
            self.add_error("credentials_ref", f"the cloud could not be checked: {exc.message}")
            return
        for result in results:
            if result["required"] and not result["ok"]:
                field = CHECK_FIELDS.get(result["what"].split(" ")[0], "check_cloud")
                self.add_error(field, f"{result['what']}: {result['detail']}")
