"""Submit page input: a form for the common fields and a raw JSON/YAML editor.

Both only parse what the browser sends into a task document; the document itself is
checked by tasks.services.task_submit, whose field errors (dotted paths such as
`command.1`) are put back next to the field at fault.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from django import forms
from django.conf import settings
from django.core.validators import MaxValueValidator
from django.forms.utils import ErrorDict
from django.urls import reverse

from cloudpivot.documents import DocumentError, load_json_or_yaml
from tasks.models import Task
from tasks.portal import task_document
from tasks.submit_choices import SubmitChoices

# The document's fields the form has: always shown, and (CLOUD_FIELDS) where the chosen cloud runs them.
CLOUD_FIELDS = ("image", "env", "workdir", "labels", "volumes", "secrets", "debug_hold_minutes")
FORM_FIELDS = ("cloud", "project", "name", "command", "timeout_seconds", "retry_limit", *CLOUD_FIELDS)
RESOURCE_FIELDS = ("cpu", "memory_mb", "gpu")


class SpecErrorsMixin:
    """Put InvalidSpec.errors on the form: each dotted path onto the field it belongs to."""

    def add_spec_errors(self, errors: list[dict[str, str]]) -> None:
        for error in errors:
            field, message = self.field_for(error.get("field") or "", error.get("message") or "invalid")
            self.add_error(field, message)

    def field_for(self, path: str, message: str) -> tuple[str | None, str]:
        raise NotImplementedError

    def describe_errors(self) -> None:
        """Point each invalid field's input at its error text, so screen readers read it with the field."""
        for name in self.errors:
            if name in self.fields:
                field = self[name]
                ids = [f"{field.auto_id}_errors"] + ([f"{field.auto_id}_helptext"] if field.help_text else [])
                self.fields[name].widget.attrs["aria-describedby"] = " ".join(ids)


def new_idempotency_key() -> str:
    return f"portal-{uuid.uuid4()}"


def _text_area(rows: int) -> forms.Textarea:
    return forms.Textarea(attrs={"rows": rows, "spellcheck": "false", "autocapitalize": "off", "class": "mono"})


def _lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) of the non-blank lines of a text area."""
    rows = [(number, line.rstrip("\r")) for number, line in enumerate(text.split("\n"), start=1)]
    return [(number, line) for number, line in rows if line.strip()]


def _key_values(text: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for number, line in _lines(text):
        key, sep, value = line.partition("=")
        if not sep:
            raise forms.ValidationError(f"Line {number}: expected KEY=VALUE, got {line.strip()!r}.")
        found[key.strip()] = value
    return found


class TaskSubmitForm(SpecErrorsMixin, forms.Form):
    """The task document as fields. Which of the cloud-dependent ones are shown and sent is the chosen cloud's
    answer (`offered`: backend.task_fields, tasks/submit_choices.py); a field it does not run is left out."""

    cloud = forms.ChoiceField(label="Cloud")
    project = forms.ChoiceField(label="Project", required=False)
    name = forms.CharField(label="Name", required=False, max_length=200)
    command = forms.CharField(
        label="Command",
        widget=_text_area(4),
        help_text="One argument per line, run as is (no shell). Blank lines are ignored.",
    )
    image = forms.CharField(label="Image", required=False, max_length=500)
    cpu = forms.FloatField(label="CPU", required=False, min_value=0.001, max_value=1024, help_text="Cores, e.g. 0.5.")
    memory_mb = forms.IntegerField(label="Memory (MB)", required=False, min_value=1)
    gpu = forms.IntegerField(label="GPUs", required=False, min_value=0, max_value=64)
    volumes = forms.CharField(
        label="Volumes",
        required=False,
        widget=_text_area(2),
        help_text="CLAIM:/mount/path, one per line; add :ro to mount read-only. Claims your project may use.",
    )
    secrets = forms.CharField(
        label="Secrets",
        required=False,
        widget=_text_area(2),
        help_text="One project secret per line, by name: NAME (as the variable NAME), NAME=VARIABLE, or "
        "NAME=/path/of/file. Only the name is stored with the task.",
    )
    env = forms.CharField(
        label="Environment", required=False, widget=_text_area(3), help_text="KEY=VALUE, one per line."
    )
    workdir = forms.CharField(
        label="Working directory", required=False, max_length=1000, help_text="Absolute path; empty: the default."
    )
    labels = forms.CharField(
        label="Labels", required=False, widget=_text_area(2), help_text="KEY=VALUE, one per line, to find tasks by."
    )
    timeout_seconds = forms.IntegerField(label="Timeout (seconds)", required=False, help_text="Empty: no timeout.")
    retry_limit = forms.IntegerField(
        label="Retry limit", initial=0, help_text="How often a failed run is retried automatically."
    )
    debug_hold_minutes = forms.IntegerField(
        label="Debug hold (minutes)",
        required=False,
        min_value=0,
        help_text="If an attempt fails, keep its pod or VM this long to get into it; empty: cleaned up at once.",
    )
    idempotency_key = forms.CharField(widget=forms.HiddenInput, required=False, max_length=200)

    def __init__(
        self,
        *args: Any,
        clouds: list[str],
        projects: list[str],
        choices: SubmitChoices | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.choices = choices or SubmitChoices()
        self.offered = self.choices.fields
        self.fields["cloud"].choices = [(c, c) for c in clouds]
        options = [(p, p) for p in projects]
        self.fields["project"].choices = options if len(options) == 1 else [("", "Choose a project"), *options]
        refresh = {
            "hx-post": reverse("tasks:task_create"),
            "hx-trigger": "change",
            "hx-include": "#submit-form",
            "hx-vals": '{"refresh": "1"}',
            "hx-select": "#submit-cloud-fields",
            "hx-target": "#submit-cloud-fields",
            "hx-swap": "outerHTML",
        }
        for name in ("cloud", "project"):  # another cloud or project: its fields, and what was typed kept
            self.fields[name].widget.attrs.update(refresh)
        self._image_widget()
        self._help_from_defaults()

    def _image_widget(self) -> None:
        image = self.fields["image"]
        defaults = self.choices.defaults
        if self.shown("image") and not defaults.get("image") and self.choices.connection is not None:
            image.required = True  # the cloud has no image of its own to fall back on (Kubernetes)
            cloud = self.choices.connection.cloud_id
            image.error_messages["required"] = f"Name the image to run: the {cloud} cloud has no default image."
        if self.choices.image_choices == "inventory" and self.choices.images:
            current = str(self["image"].value() or "")
            options = list(self.choices.images)
            if current and current not in {value for value, _ in options}:  # typed elsewhere, or cloned: kept
                options.insert(0, (current, f"{current} (not in this cloud's list)"))
            empty = f"The cloud's default image ({defaults['image']})" if defaults.get("image") else "Choose an image"
            image.widget = forms.Select(choices=[("", empty), *options])
            image.help_text = f"The images of the {self.choices.connection.cloud_id} cloud (Glance)."
        else:
            image.widget = forms.TextInput(
                attrs={"list": "image-choices", "spellcheck": "false", "autocapitalize": "off", "class": "mono"}
            )
            image.widget.attrs["placeholder"] = defaults.get("image") or "python:3.12-slim"
            image.help_text = (
                "A container image reference; your recent ones are offered as you type."
                if self.choices.image_choices == "recent"
                else self.choices.problem
            )

    def _help_from_defaults(self) -> None:
        defaults = self.choices.defaults
        if defaults.get("flavor"):
            for name in ("cpu", "memory_mb"):
                self.fields[name].help_text = f"At most the flavor {defaults['flavor']}'s; the task gets the whole VM."
        for name, unit in (("cpu", "core"), ("memory_mb", "MB")):
            if defaults.get(name):
                plural = "s" if unit == "core" and defaults[name] != 1 else ""
                self.fields[name].help_text = f"Empty: the cloud's default, {defaults[name]:g} {unit}{plural}."
        limit = self.choices.debug_hold_limit
        if limit:  # the server says the same in words (clusters/debug_hold.py); the form says it first
            hold = self.fields["debug_hold_minutes"]
            hold.validators.append(MaxValueValidator(limit))
            hold.widget.attrs["max"] = limit
            hold.help_text += f" At most {limit} on this cloud."
        if self.choices.secret_names:
            self.fields["secrets"].help_text += " This project's secrets: " + ", ".join(self.choices.secret_names) + "."

    def unchecked(self) -> TaskSubmitForm:
        """A refresh shows what was typed with no errors yet: nothing was sent, so there is nothing to refuse."""
        self._errors = ErrorDict()  # Django validates on the first read of `errors`; an empty dict means "not yet"
        return self

    def kept(self) -> list[Any]:
        """The cloud-dependent fields the chosen cloud does not run but that hold something: sent along hidden,
        so choosing that cloud again gives back what was typed (document() leaves them out)."""
        names = [*CLOUD_FIELDS, *RESOURCE_FIELDS]
        return [self[name] for name in names if not self.shown(name) and self[name].value() not in (None, "")]

    def shown(self, name: str) -> bool:
        """Whether the chosen cloud runs this field (the template shows it, document() sends it)."""
        return name in self.offered

    def clean_command(self) -> list[str]:
        args = [line for _, line in _lines(self.cleaned_data["command"])]
        if not args:
            raise forms.ValidationError("Enter the program to run, one argument per line.")
        return args

    def clean_env(self) -> dict[str, str]:
        return _key_values(self.cleaned_data["env"])

    def clean_labels(self) -> dict[str, str]:
        return {key: value.strip() for key, value in _key_values(self.cleaned_data["labels"]).items()}

    def clean_volumes(self) -> list[dict[str, Any]]:
        volumes = []
        for number, line in _lines(self.cleaned_data["volumes"]):
            claim, sep, path = line.strip().partition(":")
            if not sep or not claim or not path:
                raise forms.ValidationError(f"Line {number}: expected CLAIM:/mount/path, got {line.strip()!r}.")
            read_only = path.endswith(":ro")
            volumes.append({"claim": claim, "mount_path": path[:-3] if read_only else path, "read_only": read_only})
        return volumes

    def clean_secrets(self) -> list[dict[str, str]]:
        refs = []
        for _, line in _lines(self.cleaned_data["secrets"]):
            name, sep, target = (part.strip() for part in line.partition("="))
            target = target if sep else name
            refs.append({"name": name, "file" if target.startswith("/") else "env": target})
        return refs

    def document(self) -> dict[str, Any]:
        """The task document: what was filled in, of the fields the chosen cloud runs."""
        data = self.cleaned_data
        document: dict[str, Any] = {"cloud": data["cloud"], "command": data["command"]}
        for name in ("project", "name"):
            if data.get(name):
                document[name] = data[name]
        for name in ("image", "workdir", "env", "labels", "volumes", "secrets"):
            if self.shown(name) and data.get(name):
                document[name] = data[name]
        resources = {name: data[name] for name in ("cpu", "memory_mb", "gpu") if self.shown(name)}
        resources = {name: value for name, value in resources.items() if value is not None}
        if resources:
            document["resources"] = resources
        for name in ("timeout_seconds", "retry_limit"):
            if data.get(name) is not None:
                document[name] = data[name]
        if self.shown("debug_hold_minutes") and data.get("debug_hold_minutes"):
            document["debug_hold_minutes"] = data["debug_hold_minutes"]
        return document

    def field_for(self, path: str, message: str) -> tuple[str | None, str]:
        head, _, rest = path.partition(".")
        if head == "resources" and rest in RESOURCE_FIELDS and self.shown(rest):
            return rest, message
        if head not in FORM_FIELDS or (head in CLOUD_FIELDS and not self.shown(head)):
            return None, f"{path}: {message}" if path else message
        index, _, inner = rest.partition(".")
        if head == "command" and index.isdigit():
            return "command", f"Argument {int(index) + 1}: {message}"
        if head in ("volumes", "secrets") and index.isdigit():
            return head, f"Line {int(index) + 1}{': ' + inner if inner else ''}: {message}"
        if rest:
            return head, f"{rest}: {message}"
        return head, message


class TaskDocumentForm(SpecErrorsMixin, forms.Form):
    document = forms.CharField(
        label="Task document (JSON or YAML)",
        widget=forms.Textarea(attrs={"rows": 16, "spellcheck": "false", "autocapitalize": "off", "class": "mono"}),
    )
    idempotency_key = forms.CharField(widget=forms.HiddenInput, required=False, max_length=200)

    def clean_document(self) -> dict[str, Any]:
        text = self.cleaned_data["document"]
        size = len(text.encode())
        if size > settings.SPEC_MAX_BYTES:
            raise forms.ValidationError(
                f"The document is {size} bytes; at most {settings.SPEC_MAX_BYTES} are accepted."
            )
        try:
            value = load_json_or_yaml(text)
        except DocumentError as exc:
            message = f"Neither JSON nor YAML{exc.where}: {exc.problem}" if exc.syntax else f"{exc}."
            raise forms.ValidationError(message) from None
        if not isinstance(value, dict):
            raise forms.ValidationError('The document must be a mapping (a JSON object), e.g. {"cloud": …}.')
        return value

    def field_for(self, path: str, message: str) -> tuple[str | None, str]:
        return "document", f"{path}: {message}" if path else message


def initial_from_task(task: Task, offered: frozenset[str]) -> tuple[dict[str, Any], str, bool]:
    """Form initial values, the raw document and whether only the raw editor can hold it (clone and edit).

    From the document as submitted (not the normalized one, which holds the cloud's defaults and pinned ids).
    The form holds it when each field is one the chosen cloud runs (`offered`) and its text form gives it back
    unchanged; anything else (node selectors, an argument with a line break, ...) opens the raw editor."""
    spec = task_document(task)
    command = [str(arg) for arg in spec.get("command") or []]
    resources = {key: value for key, value in (spec.get("resources") or {}).items() if value not in (None, 0)}
    initial = {
        "cloud": task.connection.cloud_id,
        "project": task.project.slug,
        "name": spec.get("name") or "",
        "command": "\n".join(command),
        "image": spec.get("image") or "",
        "workdir": spec.get("workdir") or "",
        "env": _lines_of(spec.get("env")),
        "labels": _lines_of(spec.get("labels")),
        "volumes": "\n".join(_volume_line(v) for v in spec.get("volumes") or [] if isinstance(v, dict)),
        "secrets": "\n".join(_secret_line(ref) for ref in spec.get("secrets") or [] if isinstance(ref, dict)),
        "timeout_seconds": spec.get("timeout_seconds"),
        "retry_limit": spec.get("retry_limit", 0),
        "debug_hold_minutes": spec.get("debug_hold_minutes"),
        **resources,
    }
    return initial, json.dumps(spec, indent=2, ensure_ascii=False), not _form_holds(spec, resources, offered)


def _form_holds(spec: dict[str, Any], resources: dict[str, Any], offered: frozenset[str]) -> bool:
    always = {"cloud", "project", "name", "command", "timeout_seconds", "retry_limit", "resources"}
    fields = {key for key, value in spec.items() if value not in (None, "", [], {})}
    if not fields <= (always | (set(CLOUD_FIELDS) & offered)) or not set(resources) <= (set(RESOURCE_FIELDS) & offered):
        return False
    args = spec.get("command") or []
    maps = [spec.get("env") or {}, spec.get("labels") or {}]
    return (
        all(isinstance(arg, str) and arg.strip() and "\n" not in arg for arg in args)
        and all(
            isinstance(m, dict) and all("\n" not in str(k) + str(v) and "=" not in str(k) for k, v in m.items())
            for m in maps
        )
        and all(isinstance(v, dict) and ":" not in str(v.get("claim", "")) for v in spec.get("volumes") or [])
        and all(isinstance(ref, dict) and "=" not in str(ref.get("name", "")) for ref in spec.get("secrets") or [])
    )


def _lines_of(mapping: Any) -> str:
    return "\n".join(f"{k}={v}" for k, v in mapping.items()) if isinstance(mapping, dict) else ""


def _volume_line(volume: dict[str, Any]) -> str:
    return f"{volume.get('claim', '')}:{volume.get('mount_path', '')}{':ro' if volume.get('read_only') else ''}"


def _secret_line(ref: dict[str, Any]) -> str:
    name, target = ref.get("name", ""), ref.get("env") or ref.get("file") or ""
    return name if target == name else f"{name}={target}"


def example_document(clouds: list[str]) -> str:
    return json.dumps(
        {"cloud": clouds[0] if clouds else "local", "name": "", "command": ["python3", "-c", "print('hello')"]},
        indent=2,
    )
