"""Task pages: list, detail (with live status and log), submit, and the cancel/retry actions.

Every path starts from tasks.selectors, so a foreign or missing task is a 404; writes
call one service each. htmx requests for the list and the detail panels get fragments.
"""

from __future__ import annotations

import json
from functools import partial
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from cloudpivot.accounts.selectors import projects_visible_to
from cloudpivot.exceptions import ApplicationError, Conflict, InvalidSpec, NotFound, PermissionDenied
from clusters.egress import egress_words, task_egress
from clusters.metrics.visibility import inventory_visible
from clusters.selectors import connections_visible_to
from results.selectors import attempt_outputs, task_data_view
from tasks import portal, selectors, services
from tasks.choices import TaskState
from tasks.compare import attempts_annotated, attempts_compare, task_suggestion
from tasks.filtersets import TaskFilterSet
from tasks.forms import TaskDocumentForm, TaskSubmitForm, example_document, initial_from_task, new_idempotency_key
from tasks.models import Task
from tasks.services.debug_hold import debug_hold_release
from tasks.services.fit import task_fit
from tasks.submit_choices import SubmitChoices, fit_choices, submit_choices
from tasksets.forms import SetForm
from tasksets.views import set_from_form

PAGE_SIZE = 25
SORTS = {
    "created": ("created_at", "id"),
    "name": ("name", "-created_at"),
    "state": ("state", "-created_at"),
    "cloud": ("connection__cloud_id", "-created_at"),
    "project": ("project__slug", "-created_at"),
    "owner": ("owner__username", "-created_at"),
}


def _task_or_404(request: HttpRequest, task_id: Any) -> Task:
    try:
        return selectors.task_get_for_user(user=request.user, task_id=task_id)
    except NotFound:
        raise Http404("No such task.") from None


def _fragment(request: HttpRequest) -> bool:
    return bool(request.htmx) and not request.htmx.boosted


def _order(sort: str) -> tuple[str, tuple[str, ...]]:
    key = sort.lstrip("-")
    if key not in SORTS:
        return "-created", ("-created_at", "-id")
    fields = SORTS[key]
    if sort.startswith("-"):
        fields = (f"-{fields[0]}", *fields[1:])
    return sort, fields


@login_required
@require_GET
def task_list(request: HttpRequest) -> HttpResponse:
    """All tasks the user may see, filtered by the shared TaskFilterSet, sorted and paginated on the server."""
    filterset = TaskFilterSet(request.GET, queryset=selectors.tasks_visible_to(user=request.user))
    sort, ordering = _order(request.GET.get("sort", "-created"))
    tasks = filterset.qs.order_by(*ordering) if filterset.is_valid() else Task.objects.none()
    tasks = tasks.select_related("set_element")  # the "set #… · element N" mark, in the same query
    page = Paginator(tasks, PAGE_SIZE).get_page(request.GET.get("page"))
    context = {
        "page": page,
        "filterset": filterset,
        "sort": sort,
        "states": TaskState.choices,
        "selected_states": request.GET.getlist("state"),
        "clouds": connections_visible_to(user=request.user).values_list("cloud_id", flat=True),
        "projects": projects_visible_to(user=request.user).values_list("slug", flat=True),
    }
    return render(request, "tasks/_task_table.html" if _fragment(request) else "tasks/task_list.html", context)


def _detail_context(request: HttpRequest, task: Task) -> dict[str, Any]:
    attempts = attempts_annotated(task, list(task.attempts.order_by("-number")))
    return {
        "task": task,
        "perms": portal.task_permissions(user=request.user, task=task),
        "attempts": attempts,
        "suggestion": task_suggestion(task, attempts),
        "queue_position": selectors.task_queue_position(task=task),
        # Declared outputs (docs/data.md): the latest attempt's manifest with fresh download links.
        "outputs": attempt_outputs(task=task) if task.normalized.get("outputs") else None,
        "egress": egress_words(task_egress(task.normalized)),  # docs/security.md#egress
        # Data references (docs/data.md): what the latest attempt borrowed or created, and what became of it.
        "data": task_data_view(task=task) if task.normalized.get("data") else None,
    }


@login_required
@require_GET
def task_detail(request: HttpRequest, task_id: Any) -> HttpResponse:
    task = _task_or_404(request, task_id)
    attempt = portal.latest_attempt(task)
    events, earlier = _timeline(task, _int_param(request, "before"))
    context = _detail_context(request, task) | {
        "events": events,
        "earlier_events": earlier,
        "log": portal.log_tail(task=task, attempt=attempt),
        "commands": portal.copy_commands(task=task, base_url=request.build_absolute_uri("/").rstrip("/")),
    }
    return render(request, "tasks/task_detail.html", context)


TIMELINE_PAGE = 200


def _timeline(task: Task, before: int | None) -> tuple[list, int]:
    """The newest TIMELINE_PAGE events (or those before seq `before`), oldest first, and how many are earlier:
    a task with a chatty program has thousands, and the page must not read them all."""
    rows = task.events.order_by("-seq")
    if before is not None:
        rows = rows.filter(seq__lt=before)
    page = list(rows[:TIMELINE_PAGE])[::-1]
    earlier = page[0].seq - 1 if page and len(page) == TIMELINE_PAGE else 0
    return page, earlier


@login_required
@require_GET
def task_panels(request: HttpRequest, task_id: Any) -> HttpResponse:
    """The parts of the detail page that change with the state (htmx refreshes them on a websocket event)."""
    task = _task_or_404(request, task_id)
    return render(request, "tasks/_task_panels.html", _detail_context(request, task))


def _act(request: HttpRequest, task_id: Any, action: str) -> HttpResponse:
    task = _task_or_404(request, task_id)
    try:
        if action == "cancel":
            services.task_cancel(task_id=task.pk, user=request.user)
            messages.success(request, "Cancel requested.")
        else:
            changes = _retry_changes(request)
            services.task_retry(task_id=task.pk, user=request.user, changes=changes)
            if changes:
                words = ", ".join(f"{field} = {value}" for field, value in changes.items())
                messages.success(request, f"Retry requested with {words}: the task runs again as a new attempt.")
            else:
                messages.success(request, "Retry requested: the task runs again as a new attempt.")
    except PermissionDenied as exc:
        raise DjangoPermissionDenied(exc.message) from None
    except (Conflict, InvalidSpec) as exc:
        messages.error(request, exc.message)
    return redirect("tasks:task_detail", task_id=task.pk)


RETRY_FIELD_MAX, RETRY_VALUE_MAX = 200, 10_000


def _retry_changes(request: HttpRequest) -> dict[str, Any] | None:
    """The suggestion form's change (`field`, `value`), the value read as JSON where it is (512 → a number);
    within limits: a long field or value, NaN or Infinity, JSON nested beyond what Python parses are refused
    in words (InvalidSpec), never a 500."""
    field = request.POST.get("field", "").strip()
    if not field:
        return None
    value = request.POST.get("value", "").strip()
    if len(field) > RETRY_FIELD_MAX or len(value) > RETRY_VALUE_MAX:
        message = f"a change's field is at most {RETRY_FIELD_MAX} characters and its value {RETRY_VALUE_MAX}"
        raise InvalidSpec(message, errors=[{"field": "changes", "message": message}])
    try:
        return {field: json.loads(value, parse_constant=_no_constant)}
    except RecursionError:
        message = "the value is nested too deeply"
        raise InvalidSpec(message, errors=[{"field": field, "message": message}]) from None
    except ValueError:
        return {field: value}


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a value a task document takes")


@login_required
@require_POST
def task_cancel(request: HttpRequest, task_id: Any) -> HttpResponse:
    return _act(request, task_id, "cancel")


@login_required
@require_POST
def task_retry(request: HttpRequest, task_id: Any) -> HttpResponse:
    return _act(request, task_id, "retry")


@login_required
@require_POST
def task_release_hold(request: HttpRequest, task_id: Any) -> HttpResponse:
    """The debug hold's "Release now": what the failed attempt kept is cleaned up at once."""
    task = _task_or_404(request, task_id)
    try:
        released = debug_hold_release(task_id=task.pk, user=request.user)
        numbers = ", ".join(str(number) for number in released)
        messages.success(request, f"Released attempt {numbers}: its pod or VM is cleaned up now.")
    except PermissionDenied as exc:
        raise DjangoPermissionDenied(exc.message) from None
    except Conflict as exc:
        messages.error(request, exc.message)
    return redirect("tasks:task_detail", task_id=task.pk)


@login_required
@require_GET
def task_compare(request: HttpRequest, task_id: Any) -> HttpResponse:
    """Two attempts side by side (?a=&b=, by default the last two), with the suggestion to retry with."""
    task = _task_or_404(request, task_id)
    try:
        comparison = attempts_compare(task, _int_param(request, "a"), _int_param(request, "b"))
    except NotFound as exc:
        raise Http404(exc.message) from None
    context = {
        "task": task,
        "perms": portal.task_permissions(user=request.user, task=task),
        "compare": comparison,
        "numbers": range(1, task.attempts_count + 1),
        "suggestion": comparison["b"]["suggestion"] if comparison["b"]["number"] == task.attempts_count else None,
    }
    return render(request, "tasks/attempt_compare.html", context)


def _int_param(request: HttpRequest, name: str, default: int | None = None) -> int | None:
    value = request.GET.get(name, "")
    if value == "":
        return default
    try:
        number = int(value)
    except ValueError:
        raise Http404(f"{name} must be a whole number") from None
    if number < 0:
        raise Http404(f"{name} must not be negative")
    return number


@login_required
@require_GET
def task_log(request: HttpRequest, task_id: Any) -> JsonResponse:
    """Log text that ends at `before` (the "load earlier" button): {attempt, start, end, data}."""
    task = _task_or_404(request, task_id)
    attempt = _int_param(request, "attempt")
    before = _int_param(request, "before")
    if not attempt or before is None:
        return JsonResponse({"message": "attempt and before are required"}, status=400)
    return JsonResponse(portal.log_before(task=task, attempt_number=attempt, before=before))


@login_required
@require_GET
def task_log_download(request: HttpRequest, task_id: Any) -> StreamingHttpResponse:
    """The whole stored log of one attempt (the latest by default) as plain text, streamed."""
    task = _task_or_404(request, task_id)
    number = _int_param(request, "attempt")
    attempt = task.attempts.filter(number=number).first() if number else portal.latest_attempt(task)
    if attempt is None:
        raise Http404("This task has no log yet.")
    from django.core.handlers.asgi import ASGIRequest

    content = portal.log_bytes_aiter(attempt) if isinstance(request, ASGIRequest) else portal.log_bytes_iter(attempt)
    response = StreamingHttpResponse(content, content_type="text/plain; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{attempt.external_name}.log"'
    response["X-Content-Type-Options"] = "nosniff"
    return response


# ---------------------------------------------------------------------------- submit
@login_required
def task_create(request: HttpRequest) -> HttpResponse:
    """Submit page: the fields the chosen cloud runs as a form, or the whole document as JSON/YAML; both call
    task_submit. Changing the cloud or project posts the form back with `refresh` (htmx, or the button shown
    without JavaScript): it comes back with that cloud's fields and what was typed, checked by nobody yet."""
    clouds = list(connections_visible_to(user=request.user).values_list("cloud_id", flat=True))
    projects = {p.slug: p for p in portal.submit_projects(user=request.user)}
    options = {"clouds": clouds, "projects": list(projects)}
    mode = request.POST.get("mode") or request.GET.get("mode") or "form"
    set_form = SetForm(request.POST or None, request.FILES or None, prefix="set")
    if request.method == "POST" and "refresh" in request.POST:
        form = TaskSubmitForm(request.POST, prefix="form", choices=_choices(request, projects), **options).unchecked()
        raw = TaskDocumentForm(prefix="raw", initial=_raw_initial(clouds))
        context = {"form": form, "raw": raw, "mode": "form", "clouds": clouds, "projects": list(projects)}
        return render(request, "tasks/task_form.html", context | {"set_form": set_form.unchecked()})
    if request.method == "POST" and mode != "raw" and set_form.wanted():  # "Run as a set": tasksets' own step
        form = TaskSubmitForm(request.POST, prefix="form", choices=_choices(request, projects), **options)
        outcome = set_from_form(request, form, set_form, preview="preview" in request.POST)
        if outcome.task_set is not None:
            messages.success(request, f"Task set {outcome.task_set.short_id} submitted.")
            return redirect("tasksets:set_detail", set_id=outcome.task_set.pk)
        form.describe_errors()
        raw = TaskDocumentForm(prefix="raw", initial=_raw_initial(clouds))
        context = {"form": form, "raw": raw, "mode": "form", "clouds": clouds, "projects": list(projects)}
        context |= {"set_form": set_form, "preview": outcome.preview}
        return render(request, "tasks/task_form.html", context, status=outcome.status)
    if request.method == "POST":
        if mode == "raw":
            bound = TaskDocumentForm(request.POST, prefix="raw")
        else:
            bound = TaskSubmitForm(request.POST, prefix="form", choices=_choices(request, projects), **options)
        if bound.is_valid():
            task = _submit(request, bound)
            if task is not None:
                messages.success(request, f"Task {task.short_id} submitted.")
                return redirect("tasks:task_detail", task_id=task.pk)
        form = bound if mode != "raw" else _blank_form(request, options, projects)
        raw = bound if mode == "raw" else TaskDocumentForm(prefix="raw", initial=_raw_initial(clouds))
        bound.describe_errors()
        status = 400
    else:
        form, raw, mode = _initial_forms(request, options, projects)
        status = 200
    context = {"form": form, "raw": raw, "mode": mode, "clouds": clouds, "projects": list(projects)}
    context["set_form"] = set_form.unchecked() if set_form.is_bound else set_form
    return render(request, "tasks/task_form.html", context, status=status)


@login_required
@require_POST
def task_fit_verdict(request: HttpRequest) -> HttpResponse:
    """The submit form's "Will it fit?" line, asked by htmx as fields change (debounced): the verdict of the
    document the form holds now (tasks.services.fit), or what to fill in first. An empty command is not
    waited for: it changes nothing of the fit."""
    clouds = list(connections_visible_to(user=request.user).values_list("cloud_id", flat=True))
    projects = [p.slug for p in portal.submit_projects(user=request.user)]
    data = request.POST.copy()
    if not data.get("form-command", "").strip():
        data["form-command"] = "true"
    choices = fit_choices(user=request.user, cloud_id=data.get("form-cloud", ""))
    form = TaskSubmitForm(data, prefix="form", choices=choices, clouds=clouds, projects=projects)
    context: dict[str, Any] = {"verdict": None, "problem": ""}
    if not form.is_valid():
        name, errors = next(iter(form.errors.items()))
        label = form.fields[name].label if name in form.fields else ""
        context["problem"] = f"{label}: {errors[0]}" if label else errors[0]
    else:
        try:
            context["verdict"] = task_fit(user=request.user, document=form.document())
        except ApplicationError as exc:
            context["problem"] = exc.errors[0]["message"] if exc.errors else exc.message
    return render(request, "partials/_fit_verdict.html", context)


def _choices(request: HttpRequest, projects: dict[str, Any], cloud: str = "", project: str = "") -> SubmitChoices:
    """The chosen cloud's fields and choices: the posted cloud and project, else those given, else the first."""
    cloud = request.POST.get("form-cloud") or cloud or request.GET.get("cloud", "")
    slug = request.POST.get("form-project") or project
    if not cloud:
        cloud = next(iter(connections_visible_to(user=request.user).values_list("cloud_id", flat=True)), "")
    chosen = projects.get(slug) or (next(iter(projects.values())) if len(projects) == 1 else None)
    read = partial(inventory_visible, user=request.user)  # images as the cloud page shows them: no foreign snapshot
    return submit_choices(user=request.user, cloud_id=cloud, project=chosen, read_inventory=read)


def _submit(request: HttpRequest, form: TaskSubmitForm | TaskDocumentForm) -> Task | None:
    document = form.document() if isinstance(form, TaskSubmitForm) else form.cleaned_data["document"]
    key = form.cleaned_data.get("idempotency_key") or ""
    try:
        task, _created = services.task_submit(user=request.user, document=document, idempotency_key=key)
    except InvalidSpec as exc:
        form.add_spec_errors(exc.errors or [{"field": "", "message": exc.message}])
    except (PermissionDenied, Conflict) as exc:
        form.add_error(None, exc.message)
        if isinstance(exc, Conflict):  # the key was used for another document: the next try gets a new one
            form.data = form.data.copy()
            form.data[form.add_prefix("idempotency_key")] = new_idempotency_key()
    else:
        return task
    return None


def _raw_initial(clouds: list[str]) -> dict[str, str]:
    return {"document": example_document(clouds), "idempotency_key": new_idempotency_key()}


def _blank_form(request: HttpRequest, options: dict[str, Any], projects: dict[str, Any]) -> TaskSubmitForm:
    choices = _choices(request, projects)
    initial = {"retry_limit": 0, "idempotency_key": new_idempotency_key()}
    if choices.connection is not None:
        initial["cloud"] = choices.connection.cloud_id
    return TaskSubmitForm(prefix="form", initial=initial, choices=choices, **options)


def _initial_forms(
    request: HttpRequest, options: dict[str, Any], projects: dict[str, Any]
) -> tuple[TaskSubmitForm, TaskDocumentForm, str]:
    """Empty forms, or (clone and edit) forms holding another task's document: in the form's fields where the
    cloud runs them all, else (a field the form cannot hold) in the raw editor."""
    source = None
    if request.GET.get("clone"):
        try:
            source = _task_or_404(request, request.GET["clone"])
        except Http404:
            messages.error(request, "The task to clone was not found.")
    if source is None:
        raw = TaskDocumentForm(prefix="raw", initial=_raw_initial(options["clouds"]))
        return _blank_form(request, options, projects), raw, "raw" if request.GET.get("mode") == "raw" else "form"
    choices = _choices(request, projects, cloud=source.connection.cloud_id, project=source.project.slug)
    initial, document, needs_raw = initial_from_task(source, choices.fields)
    form = TaskSubmitForm(
        prefix="form", initial=initial | {"idempotency_key": new_idempotency_key()}, choices=choices, **options
    )
    raw = TaskDocumentForm(prefix="raw", initial={"document": document, "idempotency_key": new_idempotency_key()})
    return form, raw, "raw" if needs_raw else "form"
