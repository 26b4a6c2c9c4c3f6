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

from cloudpivot.documents import DocumentError, load_json_or_yaml
from tasks.models import Task
from tasks.portal import task_document

FORM_FIELDS = ("cloud", "project", "name", "command", "env", "timeout_seconds", "retry_limit")


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


class TaskSubmitForm(SpecErrorsMixin, forms.Form):
    cloud = forms.ChoiceField(label="Cloud")
    project = forms.ChoiceField(label="Project", required=False)
    name = forms.CharField(label="Name", required=False, max_length=200)
    command = forms.CharField(
        label="Command",
        widget=forms.Textarea(attrs={"rows": 4, "spellcheck": "false", "autocapitalize": "off", "class": "mono"}),
        help_text="One argument per line, run as is (no shell). Blank lines are ignored.",
    )
    env = forms.CharField(
        label="Environment",
        required=False,
        widget=forms.Textarea(attrs={"rows": 3, "spellcheck": "false", "autocapitalize": "off", "class": "mono"}),
        help_text="KEY=VALUE, one per line.",
    )
    timeout_seconds = forms.IntegerField(label="Timeout (seconds)", required=False, help_text="Empty: no timeout.")
    retry_limit = forms.IntegerField(
        label="Retry limit", initial=0, help_text="How often a failed run is retried automatically."
    )
    idempotency_key = forms.CharField(widget=forms.HiddenInput, required=False, max_length=200)

    def __init__(self, *args: Any, clouds: list[str], projects: list[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["cloud"].choices = [(c, c) for c in clouds]
        choices = [(p, p) for p in projects]
        self.fields["project"].choices = choices if len(choices) == 1 else [("", "Choose a project"), *choices]

    def clean_command(self) -> list[str]:
        lines = [line.rstrip("\r") for line in self.cleaned_data["command"].split("\n")]
        args = [line for line in lines if line.strip()]
        if not args:
            raise forms.ValidationError("Enter the program to run, one argument per line.")
        return args

    def clean_env(self) -> dict[str, str]:
        env: dict[str, str] = {}
        for number, line in enumerate(self.cleaned_data["env"].split("\n"), start=1):
            line = line.rstrip("\r")
            if not line.strip():
                continue
            key, sep, value = line.partition("=")
            if not sep:
                raise forms.ValidationError(f"Line {number}: expected KEY=VALUE, got {line.strip()!r}.")
            env[key.strip()] = value
        return env

    def document(self) -> dict[str, Any]:
        data = self.cleaned_data
        document: dict[str, Any] = {"cloud": data["cloud"], "command": data["command"]}
        if data.get("project"):
            document["project"] = data["project"]
        if data.get("name"):
            document["name"] = data["name"]
        if data.get("env"):
            document["env"] = data["env"]
        if data.get("timeout_seconds") is not None:
            document["timeout_seconds"] = data["timeout_seconds"]
        if data.get("retry_limit") is not None:
            document["retry_limit"] = data["retry_limit"]
        return document

    def field_for(self, path: str, message: str) -> tuple[str | None, str]:
        head, _, rest = path.partition(".")
        if head not in FORM_FIELDS:
            return None, f"{path}: {message}" if path else message
        if head == "command" and rest.isdigit():
            return "command", f"Argument {int(rest) + 1}: {message}"
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


def initial_from_task(task: Task) -> tuple[dict[str, Any], str, bool]:
    """Form initial values, the raw document and whether only the raw editor can hold it (clone and edit)."""
    spec = task.normalized or {}
    command = [str(arg) for arg in spec.get("command") or []]
    env = {str(k): str(v) for k, v in (spec.get("env") or {}).items()}
    initial = {
        "cloud": task.connection.cloud_id,
        "project": task.project.slug,
        "name": spec.get("name") or "",
        "command": "\n".join(command),
        "env": "\n".join(f"{k}={v}" for k, v in env.items()),
        "timeout_seconds": spec.get("timeout_seconds"),
        "retry_limit": spec.get("retry_limit", 0),
    }
    resources = {k: v for k, v in (spec.get("resources") or {}).items() if v}
    needs_raw = bool(
        spec.get("image")
        or spec.get("workdir")
        or resources
        or spec.get("labels")
        or spec.get("secrets")  # the form has no field for them: a clone through it would drop them
        or any("\n" in arg or not arg.strip() for arg in command)
        or any("\n" in value for value in env.values())
    )
    return initial, json.dumps(task_document(task), indent=2, ensure_ascii=False), needs_raw


def example_document(clouds: list[str]) -> str:
    return json.dumps(
        {"cloud": clouds[0] if clouds else "local", "name": "", "command": ["python3", "-c", "print('hello')"]},
        indent=2,
    )
