"""allauth's login form, closed when local accounts are off."""

from __future__ import annotations

from allauth.account.forms import LoginForm as AllauthLoginForm
from django import forms

from cloudpivot.accounts.backends import local_accounts_enabled

LOCAL_ACCOUNTS_OFF = "Password login is switched off on this installation: log in with one of the providers."


class LoginForm(AllauthLoginForm):
    def clean(self):
        # Before allauth's own checks, so a refused attempt neither authenticates nor counts as a failed guess.
        if not local_accounts_enabled():
            raise forms.ValidationError(LOCAL_ACCOUNTS_OFF, code="local_accounts_off")
        return super().clean()
