"""Task sets API: reads through the visibility selector; each write calls one service."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema
from rest_framework import serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from cloudpivot.accounts.audit import AuditedInView
from cloudpivot.api import idempotency_key
from cloudpivot.pagination import NewestFirst
from tasksets import selectors
from tasksets.api.parsers import TaskSetJSONParser
from tasksets.api.serializers import (
    ElementPageSerializer,
    ElementSerializer,
    ElementsQuerySerializer,
    RetryFailedInputSerializer,
    RetryFailedSerializer,
    TaskSetCreateSerializer,
    TaskSetSerializer,
)
from tasksets.models import TaskSet
from tasksets.services.actions import taskset_cancel, taskset_delete, taskset_retry_failed
from tasksets.services.submission import taskset_submit


def query(serializer_class: type[serializers.Serializer], request: Request) -> dict:
    serializer = serializer_class(data=request.query_params)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data


class TaskSetViewSet(AuditedInView, viewsets.ReadOnlyModelViewSet):
    serializer_class = TaskSetSerializer
    pagination_class = NewestFirst
    parser_classes = [TaskSetJSONParser]

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # schema generation has no user
            return TaskSet.objects.none()
        return selectors.tasksets_visible_to(user=self.request.user)

    def get_object(self) -> TaskSet:
        return selectors.taskset_get_for_user(user=self.request.user, set_id=self.kwargs["pk"])

    def get_serializer(self, *args, **kwargs):
        # Each set's progress counts, for the page (or the one set) in one query.
        instance = args[0] if args else kwargs.get("instance")
        sets = list(instance) if isinstance(instance, list | tuple) else [instance] if instance is not None else []
        kwargs["context"] = {**self.get_serializer_context(), "counts": selectors.taskset_counts(task_sets=sets)}
        return self.get_serializer_class()(*args, **kwargs)

    def list(self, request: Request, *args, **kwargs) -> Response:
        page = list(self.paginate_queryset(self.get_queryset()))
        return self.get_paginated_response(self.get_serializer(page, many=True).data)

    @extend_schema(
        request={"application/json": TaskSetCreateSerializer},
        responses={201: TaskSetSerializer, 200: TaskSetSerializer},
        parameters=[
            OpenApiParameter(
                "Idempotency-Key",
                str,
                OpenApiParameter.HEADER,
                description="The same key and body return the same set (200, Idempotent-Replayed: true).",
            )
        ],
        examples=[
            OpenApiExample(
                "sweep",
                value={
                    "template": {"cloud": "local", "name": "lr-{{lr}}", "command": ["python3", "train.py", "{{lr}}"]},
                    "items": [{"lr": 0.1}, {"lr": 0.01}],
                    "max_running": 1,
                },
                request_only=True,
            )
        ],
    )
    def create(self, request: Request) -> Response:
        """Submit a task set: a template and `count` or `items`. Every element is checked now; the elements
        become tasks as room frees. The same Idempotency-Key and body return the same set; another body is a 409."""
        task_set, created = taskset_submit(
            user=request.user, body=request.data, idempotency_key=idempotency_key(request)
        )
        return Response(
            self.get_serializer(task_set).data,
            status=status.HTTP_201_CREATED if created else status.HTTP_200_OK,
            headers={"Location": f"/api/v1/task-sets/{task_set.pk}", "Idempotent-Replayed": str(not created).lower()},
        )

    @extend_schema(parameters=[ElementsQuerySerializer], responses={200: ElementPageSerializer})
    @action(detail=True, methods=["get"])
    def tasks(self, request: Request, pk: str) -> Response:
        """The elements made tasks so far, in index order; page with after_index=<next_after_index>."""
        task_set = self.get_object()
        params = query(ElementsQuerySerializer, request)
        rows = list(
            selectors.taskset_elements(
                task_set=task_set, after_index=params["after_index"], limit=params["limit"] + 1, state=params["state"]
            )
        )
        page = rows[: params["limit"]]
        return Response(
            {
                "elements": ElementSerializer(page, many=True, context={"request": request}).data,
                "next_after_index": page[-1].index if page else params["after_index"],
                "has_more": len(rows) > params["limit"],
            }
        )

    @extend_schema(request=None, responses={202: TaskSetSerializer})
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: str) -> Response:
        """Cancel the set: no further element becomes a task, and each unfinished one is cancelled as a task is."""
        task_set = taskset_cancel(set_id=self.get_object().pk, user=request.user)
        return Response(self.get_serializer(self._fresh(task_set)).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(
        request=RetryFailedInputSerializer,
        responses={202: RetryFailedSerializer},
        examples=[
            OpenApiExample(
                "more memory",
                value={"changes": {"resources": {"memory_mb": 4096}, "timeout_seconds": 600}},
                request_only=True,
            )
        ],
    )
    @action(detail=True, methods=["post"], url_path="retry-failed")
    def retry_failed(self, request: Request, pk: str) -> Response:
        """A new attempt for each FAILED or TIMED_OUT element (as the set has room); 409 when none failed.
        `changes` (a partial task document over the template) change the failed elements' specs first; a bad
        change is a 400 naming `changes.<field>`, with nothing retried."""
        task_set = self.get_object()
        body = RetryFailedInputSerializer(data=request.data if isinstance(request.data, dict) else {})
        body.is_valid(raise_exception=True)
        changes = body.validated_data.get("changes")
        task_set, asked = taskset_retry_failed(set_id=task_set.pk, user=request.user, changes=changes)
        body = {"retrying": asked, "set": self.get_serializer(self._fresh(task_set)).data}
        return Response(body, status=status.HTTP_202_ACCEPTED)

    @extend_schema(request=None, responses={204: None})
    def destroy(self, request: Request, pk: str) -> Response:
        """Delete a FINISHED or CANCELLED set (409 `set_active`: cancel it first). Its elements stay as ordinary
        tasks; only the set and its links to them go."""
        taskset_delete(set_id=self.get_object().pk, user=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)

    def _fresh(self, task_set: TaskSet) -> TaskSet:
        return selectors.taskset_get_for_user(user=self.request.user, set_id=task_set.pk)
