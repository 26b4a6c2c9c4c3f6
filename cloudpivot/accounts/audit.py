"""The audit trail: one AuditEntry for every mutating request from the API, the pages and the admin.

A middleware sees every write in one place, whichever interface made it, with the
authenticated user (DRF hands its user to the Django request), the outcome and the
client address. Nothing of the request body is kept, so no secret can end up here.
Runner reports are machine traffic with their own history (TaskEvents) and are left out.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction, sync_to_async
from django.conf import settings
from django.db import connection as db_connection
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.utils import timezone

from cloudpivot.accounts.audit_catalogue import catalogued as in_catalogue
from cloudpivot.accounts.models import AuditEntry

logger = logging.getLogger(__name__)
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})
NOT_AUDITED_PREFIXES = ("/runner/", "/static/")


class AuditMiddleware:
    """Sync- and async-capable: under ASGI a read passes through without a thread hop; a write is
    recorded in a thread after the view answered (the user may be a lazy object that needs the database)."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if self.is_async:
            return self._acall(request)
        response = self.get_response(request)
        if _audited(request) and not getattr(request, "audit_recorded", False):
            _record(request, response)
        return response

    async def _acall(self, request: HttpRequest) -> HttpResponse:
        response = await self.get_response(request)
        if (
            request.method not in SAFE_METHODS
            and not request.path.startswith(NOT_AUDITED_PREFIXES)
            and not getattr(request, "audit_recorded", False)
        ):
            await sync_to_async(_record_if_audited)(request, response)
        return response


# A DRF view mixin: a write is recorded at the end of the view's own thread hop (finalize_response), and the
# middleware, seeing it done, does not hop to a thread again for it. For hot write paths (the submit): under
# ASGI a `sync_to_async` hop costs more than the INSERT. The entry is the one the middleware writes. A comment,
# not a docstring: drf-spectacular would publish it as the description of every operation of the views using it.
# A view may write its entry itself, in the transaction of the change it records (`audit_entry_ahead`, then
# `audit_written`): one commit less than an entry written after the answer, and no change without its entry.
class AuditedInView:
    def finalize_response(self, request, response, *args, **kwargs):
        response = super().finalize_response(request, response, *args, **kwargs)
        django_request = request._request
        if not getattr(django_request, "audit_recorded", False) and _audited(django_request):
            _record(django_request, response)
        django_request.audit_recorded = True
        return response


def audit_entry_ahead(request: HttpRequest, *, status_code: int) -> AuditEntry | None:
    """The entry an answer with `status_code` to `request` gets, unsaved, for a view that writes it in its own
    transaction (None: the request is not audited). The view sets `object_ref` when it knows the object, and calls
    `audit_written` once the transaction has committed, so that neither it nor the middleware write another."""
    if not _audited(request):
        return None
    match = request.resolver_match
    object_ref = ",".join(str(value) for value in match.kwargs.values()) if match else ""
    return audit_entry(request, status_code=status_code, object_ref=object_ref)


def audit_written(request: HttpRequest) -> None:
    request.audit_recorded = True


def _audited(request: HttpRequest) -> bool:
    return (
        request.method not in SAFE_METHODS
        and not request.path.startswith(NOT_AUDITED_PREFIXES)
        and _authenticated(request)
    )


def _record_if_audited(request: HttpRequest, response: HttpResponse) -> None:
    if _authenticated(request):
        _record(request, response)


def _record(request: HttpRequest, response: HttpResponse) -> None:
    try:
        audit_record(request, response)
    except Exception:  # the audit must never turn a done action into an error
        logger.exception("could not record the audit entry for %s %s", request.method, request.path)


def _authenticated(request: HttpRequest) -> bool:
    """Only people the server knows are audited: anonymous requests (failed logins, bad tokens) would let
    anyone fill the table. A login that succeeds is audited (its request carries the user by then)."""
    user = getattr(request, "user", None)
    return bool(user and user.is_authenticated)


def audit_record(request: HttpRequest, response: HttpResponse) -> AuditEntry:
    match = request.resolver_match
    object_ref = ",".join(str(value) for value in match.kwargs.values()) if match else ""
    data = getattr(response, "data", None)
    if not object_ref and isinstance(data, dict) and isinstance(data.get("id"), str | int):
        object_ref = str(data["id"])
    entry = audit_entry(request, status_code=response.status_code, object_ref=object_ref)
    audit_save(entry)
    return entry


def audit_entry(request: HttpRequest, *, status_code: int, object_ref: str) -> AuditEntry:
    """The entry for `request` answered with `status_code`, not saved."""
    user = getattr(request, "user", None)
    authenticated = bool(user and user.is_authenticated)
    match = request.resolver_match
    return catalogued(
        AuditEntry(
            actor=user if authenticated else None,
            actor_name=user.get_username() if authenticated else "",
            via="api"
            if request.path.startswith("/api/")
            else "admin"
            if request.path.startswith("/admin/")
            else "page",
            action=(match.view_name if match else "")[:100],
            method=request.method,
            path=request.path[:500],
            object_ref=object_ref[:200],
            status_code=status_code,
            outcome="ok" if status_code < 400 else "error" if status_code >= 500 else "refused",
            remote_addr=request.META.get("REMOTE_ADDR") or None,
            details=_details(request),
        )
    )


def audit_system(
    *,
    action: str,
    object_ref: str,
    details: dict[str, Any],
    actor: Any = None,
    via: str = "system",
    outcome: str = "ok",
) -> AuditEntry:
    """An entry for what no request carries (DESIGN §7): a system step (a debug hold's end, a cloud refresh,
    a snapshot prune), or an admin action's outcome on the cloud besides the request's own entry. Never secrets."""
    entry = AuditEntry(
        actor=actor,
        actor_name=actor.get_username() if actor is not None else "cloudpivot",
        via=via,
        action=action[:100],
        method="",
        path="",
        object_ref=object_ref[:200],
        status_code=0,
        outcome=outcome,
        details=details,
    )
    return audit_save(catalogued(entry))


def catalogued(entry: AuditEntry) -> AuditEntry:
    """The entry, marked `uncatalogued` (and logged) when its action is not in the catalogue."""
    if not in_catalogue(entry.action):
        logger.error("the audit action %r is not in the catalogue (docs/audit.md)", entry.action)
        entry.details = {**(entry.details or {}), "uncatalogued": True}
    return entry


def audit_save(entry: AuditEntry) -> AuditEntry:
    """Write one entry; one the database does not take goes to the spill file (AUDIT_SPILL_FILE, counted in
    /metrics, loaded back with `manage.py audit_spill --load`): never lost silently, never an error for the
    change it records."""
    try:
        if db_connection.in_atomic_block:  # a savepoint: a failed INSERT must not spoil the caller's transaction
            with transaction.atomic():
                entry.save(force_insert=True)
        else:
            entry.save(force_insert=True)
    except Exception:
        logger.exception("could not write the audit entry %s for %s: spilled", entry.action, entry.object_ref)
        audit_spill(entry)
    return entry


SPILLED_FIELDS = ("actor_name", "via", "action", "method", "path", "object_ref", "status_code", "outcome")


def audit_spill(entry: AuditEntry) -> None:
    line = {field: getattr(entry, field) for field in SPILLED_FIELDS}
    line |= {
        "actor_id": entry.actor_id,
        "remote_addr": entry.remote_addr,
        "details": entry.details,
        "created_at": (entry.created_at or timezone.now()).isoformat(),
    }
    try:
        descriptor = os.open(settings.AUDIT_SPILL_FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        with os.fdopen(descriptor, "a", encoding="utf-8") as spill:
            spill.write(json.dumps(line, default=str) + "\n")
    except OSError:
        logger.critical("the audit entry could not be spilled either: %s", json.dumps(line, default=str))


def _details(request: HttpRequest) -> dict:
    """The admin's bulk action, and what a view said of itself (`request.audit_details`, never a body's value)."""
    details = dict(getattr(request, "audit_details", None) or {})
    if request.path.startswith("/admin/") and request.POST.get("action"):
        details["admin_action"] = request.POST.get("action")
    return details


def spilled_audit_entries() -> int:
    """Entries waiting in the spill file (0: none)."""
    try:
        with open(settings.AUDIT_SPILL_FILE, "rb") as spill:
            return sum(chunk.count(b"\n") for chunk in iter(lambda: spill.read(1 << 16), b""))
    except FileNotFoundError:
        return 0


def audit_spill_load() -> int:
    """Write the spilled entries to the database and remove them from the spill file; how many were loaded.
    The file is renamed first, so entries spilled meanwhile start a new file and are not lost."""
    path = settings.AUDIT_SPILL_FILE
    loading = path.with_name(path.name + f".loading-{os.getpid()}")
    try:
        os.rename(path, loading)
    except FileNotFoundError:
        return 0
    spilled = [json.loads(text) for text in loading.read_text(encoding="utf-8").splitlines() if text.strip()]
    with transaction.atomic():
        for line in spilled:
            made_at = line.pop("created_at", None)
            entry = AuditEntry.objects.create(**line)  # auto_now_add: then set back to when it was made
            if made_at:
                AuditEntry.objects.filter(pk=entry.pk).update(created_at=made_at)
    loading.unlink()
    return len(spilled)
