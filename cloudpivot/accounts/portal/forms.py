"""Forms of the personal settings and project pages. They only parse input; the rules (who may, the last
admin, token expiry) are the services' (cloudpivot.accounts.services), whose field errors are put back
next to the field they name."""

from __future__ import annotations

from django import forms

from cloudpivot.accounts.models import Role
from cloudpivot.accounts.ssh_keys import parse_public_key
from cloudpivot.exceptions import InvalidSpec
from cloudpivot.form_errors import FieldErrorsMixin
from notifications.models import EmailPreference


class ApiTokenForm(FieldErrorsMixin, forms.Form):
    name = forms.CharField(label="Token name", max_length=100, help_text="What it is for: the CLI, a pipeline…")
    expires_in_days = forms.IntegerField(
        label="Expires after (days)",
        required=False,
        min_value=1,
        max_value=3650,
        help_text="Empty: the token never expires (revoke it when it is no longer needed).",
    )


class SshKeyForm(FieldErrorsMixin, forms.Form):
    name = forms.CharField(label="Key name", max_length=64, help_text="How instances name it: laptop, work-desktop…")
    public_key = forms.CharField(
        label="Public key",
        max_length=20000,
        strip=False,
        widget=forms.Textarea(attrs={"rows": 3, "spellcheck": "false", "autocomplete": "off"}),
        help_text="One line from a .pub file, e.g. ~/.ssh/id_ed25519.pub (never the private key).",
    )

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("auto_id", "ssh_key_%s")  # the token form on the same page has a `name` too
        super().__init__(*args, **kwargs)

    def clean_public_key(self) -> str:
        """Checked here too, so a private key is refused (and dropped) even when the name is wrong as well."""
        value = self.cleaned_data["public_key"]
        try:
            parse_public_key(value)
        except InvalidSpec as exc:
            raise forms.ValidationError(exc.errors[0]["message"]) from None
        return value

    def forget_public_key(self) -> None:
        """A refused key is not shown again: it may be a private key pasted by mistake."""
        if "public_key" in self.errors:
            self.data = self.data.copy()
            self.data["public_key"] = ""


class EmailPreferenceForm(FieldErrorsMixin, forms.ModelForm):
    class Meta:
        model = EmailPreference
        fields = ["task_end", "operation_failed"]
        labels = {"task_end": "Email me", "operation_failed": "Email me when an instance operation I asked fails"}


class MemberAddForm(FieldErrorsMixin, forms.Form):
    username = forms.CharField(label="Username or email", max_length=254)
    role = forms.ChoiceField(label="Role", choices=Role.choices, initial=Role.SUBMITTER)
