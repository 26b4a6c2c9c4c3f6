"""Task set pages: the list, a set's page (live progress, elements, cancel / retry failed), and the submit form's
"Run as a set" step. Reads start from tasksets.selectors (a foreign set is a 404); each write calls one service,
the API's own (tasksets.services.submission, tasksets.services.actions)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from cloudpivot.exceptions import ApplicationError, Conflict, PermissionDenied
from tasks.choices import TaskState
from tasks.forms import TaskSubmitForm, new_idempotency_key
from tasksets import portal, selectors
from tasksets.forms import SetForm
from tasksets.models import TaskSet
from tasksets.preview import set_preview
from tasksets.services.actions import taskset_cancel, taskset_retry_failed
from tasksets.services.submission import taskset_submit


def _set_or_404(request: HttpRequest, set_id: Any) -> TaskSet:
    """The set without its items (100,000 parameter objects are not read for a page refreshed every few seconds)."""
    try:  # the URL converter gave a UUID; another project's set is not found, as in the API
        return selectors.tasksets_visible_to(user=request.user).defer("items").get(pk=set_id)
    except TaskSet.DoesNotExist:
        raise Http404("No such task set.") from None


@login_required
@require_GET
def set_list(request: HttpRequest) -> HttpResponse:
    """The sets the user may see, newest first, each with its progress."""
    return render(
        request, "tasksets/set_list.html", {"page": portal.sets_page(user=request.user, number=request.GET.get("page"))}
    )


def _detail_context(request: HttpRequest, task_set: TaskSet) -> dict[str, Any]:
    counts = selectors.taskset_counts(task_sets=[task_set])[task_set.pk]
    state = request.GET.get("state", "")
    if state not in TaskState.values:
        state = ""
    return {
        "task_set": task_set,
        "counts": counts,
        "progress": portal.progress(task_set, counts),
        "perms": portal.set_permissions(user=request.user, task_set=task_set, counts=counts),
        "page": portal.elements_page(task_set=task_set, state=state, number=request.GET.get("page")),
        "state": state,
        "states": TaskState.choices,
        "query": request.GET.urlencode(),
    }


@login_required
@require_GET
def set_detail(request: HttpRequest, set_id: Any) -> HttpResponse:
    task_set = _set_or_404(request, set_id)
    context = _detail_context(request, task_set) | {"summary": portal.template_summary(task_set)}
    return render(request, "tasksets/set_detail.html", context)


@login_required
@require_GET
def set_panels(request: HttpRequest, set_id: Any) -> HttpResponse:
    """The parts of the set page that change (htmx refreshes them on an element's change, and every few seconds)."""
    task_set = _set_or_404(request, set_id)
    return render(request, "tasksets/_set_panels.html", _detail_context(request, task_set))


@login_required
@require_POST
def set_cancel(request: HttpRequest, set_id: Any) -> HttpResponse:
    return _act(request, set_id, "cancel")


@login_required
@require_POST
def set_retry_failed(request: HttpRequest, set_id: Any) -> HttpResponse:
    return _act(request, set_id, "retry")


def _act(request: HttpRequest, set_id: Any, action: str) -> HttpResponse:
    task_set = _set_or_404(request, set_id)
    try:
        if action == "cancel":
            taskset_cancel(set_id=task_set.pk, user=request.user)
            messages.success(request, "Set cancelled: no further element starts, and the unfinished ones are stopped.")
        else:
            _, asked = taskset_retry_failed(set_id=task_set.pk, user=request.user)
            messages.success(
                request, f"Retrying {asked} failed element{'s' if asked != 1 else ''} as the set has room."
            )
    except PermissionDenied as exc:
        raise DjangoPermissionDenied(exc.message) from None
    except Conflict as exc:
        messages.error(request, exc.message)
    return redirect("tasksets:set_detail", set_id=task_set.pk)


# ---------------------------------------------------------------------------- the submit form's set step
@dataclass
class SetOutcome:
    task_set: TaskSet | None = None
    preview: dict[str, Any] | None = None
    status: int = 200


def set_from_form(request: HttpRequest, form: TaskSubmitForm, set_form: SetForm, *, preview: bool) -> SetOutcome:
    """Preview the first elements, or submit the set through taskset_submit; errors go onto the fields at fault."""
    form_ok, set_ok = form.is_valid(), set_form.is_valid()
    if not (form_ok and set_ok):
        return SetOutcome(status=400)
    body = set_form.body(form.document())
    try:
        if preview:
            return SetOutcome(preview=set_preview(body))
        key = form.cleaned_data.get("idempotency_key") or ""
        task_set, _created = taskset_submit(user=request.user, body=body, idempotency_key=key)
        return SetOutcome(task_set=task_set)
    except ApplicationError as exc:
        _put_errors(form, set_form, exc)
        if isinstance(exc, Conflict):  # the key was used for another request: the next try gets a new one
            form.data = form.data.copy()
            form.data[form.add_prefix("idempotency_key")] = new_idempotency_key()
        return SetOutcome(status=exc.status if exc.status >= 400 else 400)


def _put_errors(form: TaskSubmitForm, set_form: SetForm, exc: ApplicationError) -> None:
    """`template.command.2` onto the task form's field, `items.17.lr` / `count` / `max_running` onto the set's."""
    for error in exc.errors or [{"field": "", "message": exc.message}]:
        path, message = error.get("field") or "", error.get("message") or exc.message
        if path == "template" or path.startswith("template."):
            name, words = form.field_for(path.removeprefix("template").lstrip("."), message)
            form.add_error(name, words)
        else:
            name, words = set_form.field_for(path, message)
            (set_form if name else form).add_error(name, words)
