"""Login forms: allauth's, closed when local accounts are off, and the admin's, throttled like it."""

from __future__ import annotations

from allauth.account.adapter import get_adapter as get_account_adapter
from allauth.account.forms import LoginForm as AllauthLoginForm
from django import forms
from django.contrib.admin.forms import AdminAuthenticationForm

from cloudpivot.accounts.backends import local_accounts_enabled

TOO_MANY_ATTEMPTS = "Too many failed login attempts. Try again later."
LOCAL_ACCOUNTS_OFF = "Password login is switched off on this installation: log in with one of the providers."


class LoginForm(AllauthLoginForm):
    def clean(self):
        # Before allauth's own checks, so a refused attempt neither authenticates nor counts as a failed guess.
        if not local_accounts_enabled():
            raise forms.ValidationError(LOCAL_ACCOUNTS_OFF, code="local_accounts_off")
        return super().clean()


class AdminLoginForm(AdminAuthenticationForm):
    """The admin's login page, throttled by the same per-account failed-login limit as the portal's (allauth's)."""

    def clean(self):
        username, password = self.cleaned_data.get("username"), self.cleaned_data.get("password")
        if username is not None and password:
            try:  # allauth's authenticate counts a failed guess and refuses once over the limit
                self.user_cache = get_account_adapter(self.request).authenticate(
                    self.request, username=username, password=password
                )
            except forms.ValidationError:
                raise forms.ValidationError(TOO_MANY_ATTEMPTS, code="too_many_login_attempts") from None
            if self.user_cache is None:
                raise self.get_invalid_login_error()
            self.confirm_login_allowed(self.user_cache)
        return self.cleaned_data
