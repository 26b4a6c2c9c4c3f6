"""The launch form's input. It only parses what the browser sends: the API's request shape
(InstanceCreateSerializer) and the create service judge it, and their field errors come back here."""

from __future__ import annotations

from typing import Any

from django import forms

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
    idempotency_key = forms.CharField(widget=forms.HiddenInput, required=False, max_length=200)

    def __init__(
        self, *args: Any, clouds: list[str], projects: list[str], ssh_keys: list[tuple[str, str]], **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.fields["cloud"].choices = [(c, c) for c in clouds]
        self.fields["project"].choices = [(p, p) for p in projects]
        self.fields["ssh_keys"].choices = ssh_keys

    def add_field_errors(self, errors: dict[str, Any]) -> None:
        """A serializer's errors ({field: [messages]}) next to the fields they name."""
        for name, messages in errors.items():
            for message in messages if isinstance(messages, list) else [messages]:
                self._add(name, str(message))
        self.describe_errors()

    def add_service_errors(self, exc: ApplicationError) -> None:
        for error in exc.errors or [{"field": "", "message": exc.message}]:
            self._add(error.get("field") or "", error.get("message") or exc.message)
        self.describe_errors()

    def _add(self, name: str, message: str) -> None:
        name = FIELD_OF.get(name, name)
        self.add_error(name if name in self.fields else None, message)
