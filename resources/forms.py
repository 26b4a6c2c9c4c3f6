"""The launch form's input. It only parses what the browser sends: the API's request shape
(InstanceCreateSerializer) and the create service judge it, and their field errors come back here."""

from __future__ import annotations

from typing import Any

from django import forms

from cloudpivot.api import flatten_errors
from cloudpivot.exceptions import ApplicationError
from cloudpivot.form_errors import FieldErrorsMixin

# The service's and the serializer's field names → the form field showing them (a size is one choice here).
FIELD_OF = {"vcpus": "flavor", "memory_mb": "flavor", "instance": "image", "snapshot": "image"}


class InstanceLaunchForm(FieldErrorsMixin, forms.Form):
    cloud = forms.ChoiceField(label="Cloud")
    project = forms.ChoiceField(label="Project")
    name = forms.CharField(
        label="Name",
        max_length=63,
        help_text="Letters, digits, '.', '_' and '-', starting with a letter or digit.",
        widget=forms.TextInput(attrs={"autocomplete": "off", "spellcheck": "false", "autocapitalize": "off"}),
    )
    flavor = forms.CharField(label="Size", max_length=100, error_messages={"required": "Choose a size."})
    image = forms.CharField(label="Image", max_length=255, error_messages={"required": "Choose an image."})
    ssh_keys = forms.MultipleChoiceField(
        label="SSH keys",
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="Your keys from Settings; the instance's login user gets the ones ticked.",
    )
    volumes = forms.CharField(
        label="Extra volumes",
        required=False,
        max_length=400,
        help_text="Blank data volumes in GB, comma-separated, each with an optional name after a colon: "
        "10:data, 20. They count against the project's volume GB with the root disk.",
        widget=forms.TextInput(attrs={"autocomplete": "off", "spellcheck": "false", "placeholder": "10:data, 20"}),
    )
    idempotency_key = forms.CharField(widget=forms.HiddenInput, required=False, max_length=200)

    def __init__(
        self, *args: Any, clouds: list[str], projects: list[str], ssh_keys: list[tuple[str, str]], **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.fields["cloud"].choices = [(c, c) for c in clouds]
        self.fields["project"].choices = [(p, p) for p in projects]
        self.fields["ssh_keys"].choices = ssh_keys

    def clean_volumes(self) -> list[dict[str, Any]]:
        """ "10:data, 20" → [{"size_gb": 10, "name": "data"}, {"size_gb": 20}]; the serializer checks the rest."""
        return parse_volumes(self.cleaned_data.get("volumes") or "")

    def add_field_errors(self, errors: dict[str, Any]) -> None:
        """A serializer's errors ({field: [messages]}, nested for volumes) next to the fields they name."""
        for error in flatten_errors(errors):
            self._add(error["field"], error["message"])
        self.describe_errors()

    def add_service_errors(self, exc: ApplicationError) -> None:
        for error in exc.errors or [{"field": "", "message": exc.message}]:
            self._add(error.get("field") or "", error.get("message") or exc.message)
        self.describe_errors()

    def _add(self, name: str, message: str) -> None:
        if name.startswith("volumes."):  # volumes.1.size_gb: the second volume's size
            index = name.split(".")[1]
            name, message = "volumes", f"volume {int(index) + 1 if index.isdigit() else index}: {message}"
        name = FIELD_OF.get(name, name)
        self.add_error(name if name in self.fields else None, message)


def parse_volumes(text: str) -> list[dict[str, Any]]:
    """The launch form's volumes field as the API's `volumes` list; a piece that is no size is a form error."""
    volumes = []
    for index, piece in enumerate(p.strip() for p in text.split(",")):
        if not piece:
            continue
        size, _, name = (part.strip() for part in piece.partition(":"))
        if not size.isdigit():
            raise forms.ValidationError(
                f"volume {index + 1}: {piece!r} is not a size in GB (write 10, or 10:data to name it)"
            )
        volumes.append({"size_gb": int(size)} | ({"name": name} if name else {}))
    return volumes
