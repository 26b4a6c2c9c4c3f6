"""Tasks API: list/retrieve through the visibility selector; writes call one service each."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpResponse, HttpResponseBase
from django.http.request import RawPostDataException
from django.utils import timezone
from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, PolymorphicProxySerializer, extend_schema
from rest_framework import serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from cloudpivot.accounts.audit import AuditedInView, audit_entry_ahead, audit_written
from cloudpivot.api import idempotency_key
from cloudpivot.exceptions import RequestTooLarge
from cloudpivot.pagination import NewestFirst
from cloudpivot.parsers import BoundedJSONParser, YAMLParser
from clusters.api.fit import DRY_RUN, FitVerdictSerializer, dry_run
from results.selectors import storage_of_attempts
from tasks import list_json, selectors, services
from tasks.api.serializers import (
    AttemptCompareSerializer,
    AttemptSerializer,
    ReleaseHoldSerializer,
    RetryInputSerializer,
    TaskAttemptsSerializer,
    TaskEventPageSerializer,
    TaskEventSerializer,
    TaskListSerializer,
    TaskLogSerializer,
    TaskSerializer,
    task_representation,
)
from tasks.compare import attempts_annotated, attempts_compare, task_suggestion
from tasks.filtersets import TaskFilterSet
from tasks.models import LogStream, Task
from tasks.services.attempts import MAX_ATTEMPTS
from tasks.services.debug_hold import debug_hold_release
from tasks.services.fit import task_fit
from tasks.specs import TaskSpecSerializer


class EventsQuerySerializer(serializers.Serializer):
    after_seq = serializers.IntegerField(min_value=0, required=False, default=0)
    limit = serializers.IntegerField(min_value=1, max_value=1000, required=False, default=100)


class LogsQuerySerializer(serializers.Serializer):
    offset = serializers.IntegerField(min_value=0, required=False, default=0)
    stream = serializers.ChoiceField(choices=LogStream.choices, required=False, allow_null=True, default=None)
    attempt = serializers.IntegerField(min_value=1, required=False, allow_null=True, default=None)
    limit = serializers.IntegerField(min_value=1, max_value=4 * 1024 * 1024, required=False, default=1024 * 1024)


class CompareQuerySerializer(serializers.Serializer):
    a = serializers.IntegerField(
        min_value=1, max_value=MAX_ATTEMPTS, required=False, help_text="Attempt number (default: the one before b)."
    )
    b = serializers.IntegerField(
        min_value=1, max_value=MAX_ATTEMPTS, required=False, help_text="Attempt number (default: the latest)."
    )


def query(serializer_class, request: Request) -> dict:
    serializer = serializer_class(data=request.query_params)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data


class TaskViewSet(AuditedInView, viewsets.ReadOnlyModelViewSet):
    serializer_class = TaskSerializer
    pagination_class = NewestFirst
    filter_backends = [DjangoFilterBackend]
    filterset_class = TaskFilterSet
    parser_classes = [BoundedJSONParser, YAMLParser]

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # schema generation has no user
            return Task.objects.none()
        return selectors.tasks_visible_to(user=self.request.user)

    # The visible tasks, newest first, a cursor page at a time. Rows are dicts written out by TaskListSerializer
    # (documented as TaskSerializer: the same shape), queue places in one query per page. A comment, not a
    # docstring: drf-spectacular would publish a docstring as the operation's description.
    # On PostgreSQL (and a JSON answer) the database writes each row's JSON (tasks/list_json.py) and the
    # answer is those texts joined; elsewhere TaskListSerializer writes the same shape from the rows' dicts.
    def list(self, request: Request, *args, **kwargs) -> HttpResponseBase:
        url_prefix = request.build_absolute_uri("/api/v1/tasks/")
        as_json = list_json.supported() and isinstance(request.accepted_renderer, JSONRenderer)
        tasks = selectors.tasks_for_list(user=request.user, json_rows_at=url_prefix if as_json else None)
        rows = list(self.paginate_queryset(self.filter_queryset(tasks)))
        places = selectors.queue_positions(rows=rows)
        if as_json:
            paginator = self.paginator
            body = list_json.page_body(
                next_url=paginator.get_next_link(), previous_url=paginator.get_previous_link(), rows=rows, places=places
            )
            return HttpResponse(body, content_type="application/json")
        context = {"url_prefix": url_prefix, "queue_positions": places, "timezone": timezone.get_current_timezone()}
        return self.get_paginated_response(TaskListSerializer(rows, many=True, context=context).data)

    def filter_queryset(self, queryset):
        # No filter asked for (the default page, or its next pages by cursor): django-filter would still copy
        # every filter and validate an empty form, a tenth of a list request's CPU, to change nothing.
        if self.action == "list" and self.request.query_params.keys().isdisjoint(TaskFilterSet.base_filters):
            return queryset
        return super().filter_queryset(queryset)

    def get_object(self):
        return selectors.task_get_for_user(user=self.request.user, task_id=self.kwargs["pk"])

    def retrieve(self, request: Request, pk: str) -> Response:
        # TaskSerializer's shape, written by hand: the read is a hot path. (A comment, not a docstring:
        # drf-spectacular would publish a docstring as the operation's description.)
        return Response(task_representation(self.get_object(), request))

    @extend_schema(
        request={"application/json": TaskSpecSerializer, "application/yaml": TaskSpecSerializer},
        responses={
            201: TaskSerializer,
            200: PolymorphicProxySerializer(
                component_name="TaskOrFitVerdict",
                serializers=[TaskSerializer, FitVerdictSerializer],
                resource_type_field_name=None,
            ),
        },
        parameters=[
            DRY_RUN,
            OpenApiParameter(
                "Idempotency-Key",
                str,
                OpenApiParameter.HEADER,
                description="The same key and body return the same task (200, Idempotent-Replayed: true).",
            ),
        ],
        examples=[
            OpenApiExample(
                "hello",
                value={"cloud": "local", "name": "hello", "command": ["python3", "-c", "print('hello')"]},
                request_only=True,
            )
        ],
    )
    def create(self, request: Request) -> Response:
        """Submit a task. The same Idempotency-Key and body return the same task; another body is a 409.
        With dry_run=true: 200 with whether it would start now, wait or never fit; nothing is created."""
        try:
            size = len(request.body)
        except RawPostDataException:  # a cookie session's CSRF check parsed the body first (request.POST)
            size = int(request.META.get("CONTENT_LENGTH") or 0)
        if size > settings.SPEC_MAX_BYTES:
            raise RequestTooLarge(
                f"the task document is {size} bytes; at most {settings.SPEC_MAX_BYTES} are accepted",
                errors=[{"field": "", "message": f"request body too large ({size} bytes)"}],
            )
        if dry_run(request):
            return Response(task_fit(user=request.user, document=request.data).as_dict())
        # The audit entry of a 201 goes into the task's own transaction (one commit less); a replay (200) or a
        # refusal is recorded after the answer, as any other (AuditedInView).
        audit = audit_entry_ahead(request._request, status_code=status.HTTP_201_CREATED)
        task, created = services.task_submit(
            user=request.user, document=request.data, idempotency_key=idempotency_key(request), audit=audit
        )
        if created and audit is not None:
            audit_written(request._request)
        return Response(
            task_representation(task, request),
            status=status.HTTP_201_CREATED if created else status.HTTP_200_OK,
            headers={"Location": f"/api/v1/tasks/{task.pk}", "Idempotent-Replayed": str(not created).lower()},
        )

    @extend_schema(request=None, responses={202: TaskSerializer})
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: str) -> Response:
        task = self.get_object()
        task = services.task_cancel(task_id=task.pk, user=request.user)
        return Response(
            self.get_serializer(selectors.task_get_for_user(user=request.user, task_id=task.pk)).data,
            status=status.HTTP_202_ACCEPTED,
        )

    @extend_schema(request=RetryInputSerializer, responses={202: TaskSerializer})
    @action(detail=True, methods=["post"])
    def retry(self, request: Request, pk: str) -> Response:
        """Run a finished or UNKNOWN task again as a new attempt; `changes` change its spec first."""
        task = self.get_object()
        body = RetryInputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        task = services.task_retry(task_id=task.pk, user=request.user, changes=body.validated_data.get("changes"))
        return Response(
            self.get_serializer(selectors.task_get_for_user(user=request.user, task_id=task.pk)).data,
            status=status.HTTP_202_ACCEPTED,
        )

    @extend_schema(request=None, responses={200: ReleaseHoldSerializer})
    @action(detail=True, methods=["post"], url_path="release-hold")
    def release_hold(self, request: Request, pk: str) -> Response:
        """End the debug hold of every held attempt of the task now: what it kept is cleaned up at once.
        The task's owner or a project admin; 409 when nothing is held."""
        task = self.get_object()
        released = debug_hold_release(task_id=task.pk, user=request.user)
        words = ", ".join(str(number) for number in released)
        return Response({"released": released, "message": f"released attempt {words}; it is cleaned up now"})

    @extend_schema(parameters=[EventsQuerySerializer], responses={200: TaskEventPageSerializer})
    @action(detail=True, methods=["get"])
    def events(self, request: Request, pk: str) -> Response:
        """The task's history in seq order; page with after_seq=<next_after_seq>."""
        task = self.get_object()
        params = query(EventsQuerySerializer, request)
        rows = list(task.events.filter(seq__gt=params["after_seq"]).order_by("seq")[: params["limit"] + 1])
        page, more = rows[: params["limit"]], len(rows) > params["limit"]
        return Response(
            {
                "events": TaskEventSerializer(page, many=True).data,
                "next_after_seq": page[-1].seq if page else params["after_seq"],
                "has_more": more,
            }
        )

    @extend_schema(parameters=[LogsQuerySerializer], responses={200: TaskLogSerializer})
    @action(detail=True, methods=["get"])
    def logs(self, request: Request, pk: str) -> Response:
        """Log text from a byte offset (latest attempt, both streams unless `stream` is given)."""
        task = selectors.task_get_for_user(user=request.user, task_id=pk, only=("id", "state"))
        params = query(LogsQuerySerializer, request)
        return Response(
            services.log_read(
                task=task,
                attempt_number=params["attempt"],
                stream=params["stream"],
                offset=params["offset"],
                limit=params["limit"],
            )
        )

    @extend_schema(responses={200: TaskAttemptsSerializer})
    @action(detail=True, methods=["get"])
    def attempts(self, request: Request, pk: str) -> Response:
        """Every attempt with its phases, failure class and retry suggestion."""
        task = self.get_object()
        attempts = attempts_annotated(task, list(task.attempts.order_by("number")))
        storage = storage_of_attempts(attempts=attempts) if any(a.spec.get("data") for a in attempts) else {}
        for attempt in attempts:
            attempt.storage = storage.get(attempt.pk, [])
        return Response(
            {
                "attempts": AttemptSerializer(attempts, many=True).data,
                "suggestion": task_suggestion(task, attempts),
            }
        )

    @extend_schema(parameters=[CompareQuerySerializer], responses={200: AttemptCompareSerializer})
    @action(detail=True, methods=["get"], url_path="attempts/compare")
    def compare(self, request: Request, pk: str) -> Response:
        """Two attempts side by side (default: the last two): spec differences, exit, phases, last log lines."""
        task = self.get_object()
        params = query(CompareQuerySerializer, request)
        return Response(AttemptCompareSerializer(attempts_compare(task, params.get("a"), params.get("b"))).data)
