"""Forms of the personal settings and project pages. They only parse input; the rules (who may, the last
admin, token expiry) are the services' (cloudpivot.accounts.services), whose field errors are put back
next to the field they name."""

from __future__ import annotations

from django import forms

from cloudpivot.accounts.models import Role
from cloudpivot.exceptions import ApplicationError
from notifications.models import EmailPreference


class FieldErrorsMixin:
    """Put a service's field errors on the form (an error naming no field of the form goes on top)."""

    def add_service_errors(self, exc: ApplicationError) -> None:
        errors = exc.errors or [{"field": "", "message": exc.message}]
        for error in errors:
            field = error.get("field") or None
            self.add_error(field if field in self.fields else None, error.get("message") or exc.message)
        self.describe_errors()

    def describe_errors(self) -> None:
        """Point each invalid input at its error text, so screen readers read it with the field."""
        for name in self.errors:
            if name in self.fields:
                field = self[name]
                ids = [f"{field.auto_id}_errors"] + ([f"{field.auto_id}_helptext"] if field.help_text else [])
                self.fields[name].widget.attrs["aria-describedby"] = " ".join(ids)
                self.fields[name].widget.attrs["aria-invalid"] = "true"


class ApiTokenForm(FieldErrorsMixin, forms.Form):
    name = forms.CharField(label="Token name", max_length=100, help_text="What it is for: the CLI, a pipeline…")
    expires_in_days = forms.IntegerField(
        label="Expires after (days)",
        required=False,
        min_value=1,
        max_value=3650,
        help_text="Empty: the token never expires (revoke it when it is no longer needed).",
    )


class EmailPreferenceForm(FieldErrorsMixin, forms.ModelForm):
    class Meta:
        model = EmailPreference
        fields = ["task_end", "operation_failed"]
        labels = {"task_end": "Email me", "operation_failed": "Email me when an instance operation I asked fails"}


class MemberAddForm(FieldErrorsMixin, forms.Form):
    username = forms.CharField(label="Username or email", max_length=254)
    role = forms.ChoiceField(label="Role", choices=Role.choices, initial=Role.SUBMITTER)
