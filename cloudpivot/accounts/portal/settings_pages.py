"""Personal settings: the user's API tokens (create with an optional expiry, shown once; list; revoke) and
their email notifications. Tokens are made and revoked by the services the API calls
(cloudpivot.accounts.services); the email preference is the notifications app's (the API's twin:
/api/v1/email-preferences); and their SSH public keys (add, list with fingerprints, delete), through the
services /api/v1/ssh-keys uses (cloudpivot.accounts.ssh_keys).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any, TypeVar

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from cloudpivot.accounts.models import ApiToken, SshKey
from cloudpivot.accounts.portal.forms import ApiTokenForm, EmailPreferenceForm, SshKeyForm
from cloudpivot.accounts.services import api_token_create, api_token_revoke
from cloudpivot.accounts.ssh_keys import ssh_key_create, ssh_key_delete
from cloudpivot.exceptions import ApplicationError
from cloudpivot.form_errors import FieldErrorsMixin
from notifications.mail import preference

T = TypeVar("T")


def _context(request: HttpRequest, **forms: Any) -> dict[str, Any]:
    return {
        "tokens": ApiToken.objects.filter(user=request.user).order_by("-created_at"),
        "token_form": forms.get("token_form") or ApiTokenForm(),
        "email_form": forms.get("email_form") or EmailPreferenceForm(instance=preference(request.user)),
        "new_token": forms.get("new_token"),
        "ssh_keys": SshKey.objects.filter(user=request.user).order_by("name"),
        "ssh_key_form": forms.get("ssh_key_form") or SshKeyForm(),
    }


def _carried_out(form: FieldErrorsMixin, service: Callable[[dict[str, Any]], T]) -> T | None:
    """What `service` made of a valid form's data; None when the form or the service refused (its errors,
    the service's by field, are then on the form)."""
    if not form.is_valid():
        return None
    try:
        return service(form.cleaned_data)
    except ApplicationError as exc:
        form.add_service_errors(exc)
        return None


def _refused(request: HttpRequest, **form: FieldErrorsMixin) -> HttpResponse:
    """The page again, a 400, with the one refused form (named as in the context) and its errors described."""
    for refused in form.values():
        refused.describe_errors()
    return render(request, "accounts/settings.html", _context(request, **form), status=400)


@login_required
@require_GET
def settings_page(request: HttpRequest) -> HttpResponse:
    return render(request, "accounts/settings.html", _context(request))


@login_required
@require_POST
@never_cache  # the answer holds the new token in clear: no cache may keep it
def token_create(request: HttpRequest) -> HttpResponse:
    """Answer the page itself with the token (no redirect: it is never stored, so it could not be shown after)."""
    form = ApiTokenForm(request.POST)
    made = _carried_out(
        form,
        lambda data: api_token_create(
            user=request.user,
            name=data["name"],
            expires_in=dt.timedelta(days=data["expires_in_days"]) if data["expires_in_days"] else None,
        ),
    )
    if made is None:
        return _refused(request, token_form=form)
    token, plain = made
    context = _context(request, new_token={"token": token, "plain": plain})
    return render(request, "accounts/settings.html", context, status=201)


@login_required
@require_POST
def token_revoke(request: HttpRequest, token_id: int) -> HttpResponse:
    token = get_object_or_404(ApiToken, pk=token_id, user=request.user)  # another user's token: 404
    api_token_revoke(token=token)
    messages.success(request, f"Token {token.name} ({token.hint}…) revoked: it is refused from now on.")
    return redirect("accounts:settings")


@login_required
@require_POST
def email_preferences_save(request: HttpRequest) -> HttpResponse:
    form = EmailPreferenceForm(request.POST, instance=preference(request.user))
    if not form.is_valid():
        return _refused(request, email_form=form)
    form.save()
    messages.success(request, "Email notifications saved.")
    return redirect("accounts:settings")


@login_required
@require_POST
def ssh_key_add(request: HttpRequest) -> HttpResponse:
    form = SshKeyForm(request.POST)
    key = _carried_out(form, lambda data: ssh_key_create(user=request.user, **data))
    if key is None:
        form.forget_public_key()
        return _refused(request, ssh_key_form=form)
    messages.success(request, f"SSH key {key.name} added ({key.fingerprint}).")
    return redirect(f"{reverse('accounts:settings')}#ssh-keys")


@login_required
@require_POST
def ssh_key_remove(request: HttpRequest, key_id: int) -> HttpResponse:
    key = get_object_or_404(SshKey, pk=key_id, user=request.user)  # another user's key: 404
    ssh_key_delete(key=key)
    messages.success(request, f"SSH key {key.name} deleted; instances that already have it keep it.")
    return redirect(f"{reverse('accounts:settings')}#ssh-keys")
