"""Instances, snapshots and operations API: reads through the visibility selectors, writes through one
service each. Every write answers 202 with its Operation; poll /operations/{id} for the outcome."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from cloudpivot.api import idempotency_key
from cloudpivot.exceptions import InvalidSpec, InvalidState, UnsupportedAction, cloud_error
from cloudpivot.pagination import NewestFirst
from clusters.api.fit import DRY_RUN, FitVerdictSerializer, dry_run
from resources import selectors
from resources.api.serializers import (
    ConsoleSerializer,
    InstanceActionSerializer,
    InstanceCreateSerializer,
    InstanceSerializer,
    KeptVolumeSerializer,
    OperationSerializer,
    SnapshotRestoreSerializer,
    SnapshotSerializer,
)
from resources.backends import get_instance_backend
from resources.backends.base import BackendError, Unsupported
from resources.fit import instance_fit
from resources.models import Instance, KeptVolume, Operation, Snapshot
from resources.services import instance_action, instance_create, snapshot_delete
from resources.services.reclaim import volume_reclaim

IDEMPOTENCY = OpenApiParameter("Idempotency-Key", str, OpenApiParameter.HEADER)


def validated(serializer_class, data) -> dict:
    serializer = serializer_class(data=data)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data


def accepted(operation: Operation, created: bool) -> Response:
    return Response(
        OperationSerializer(operation).data,
        status=status.HTTP_202_ACCEPTED if created else status.HTTP_200_OK,
        headers={"Location": f"/api/v1/operations/{operation.pk}", "Idempotent-Replayed": str(not created).lower()},
    )


class InstanceViewSet(viewsets.ReadOnlyModelViewSet):
    serializer_class = InstanceSerializer
    pagination_class = NewestFirst

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return Instance.objects.none()
        return selectors.instances_visible_to(user=self.request.user)

    def get_object(self):
        return selectors.instance_get_for_user(user=self.request.user, instance_id=self.kwargs["pk"])

    @extend_schema(
        request=InstanceCreateSerializer,
        responses={202: OperationSerializer, 200: FitVerdictSerializer},
        parameters=[IDEMPOTENCY, DRY_RUN],
    )
    def create(self, request: Request) -> Response:
        """Create an instance: 202 with the create Operation (its `instance` is the new instance's id).
        With dry_run=true: 200 with whether it would start now, be refused now or never fit; nothing is made."""
        data = validated(InstanceCreateSerializer, request.data)
        if dry_run(request):
            return Response(instance_fit(user=request.user, data=data).as_dict())
        operation, created = instance_create(user=request.user, data=data, idempotency_key=idempotency_key(request))
        return accepted(operation, created)

    @extend_schema(request=InstanceActionSerializer, responses={202: OperationSerializer}, parameters=[IDEMPOTENCY])
    @action(detail=True, methods=["post"])
    def actions(self, request: Request, pk: str) -> Response:
        """One action: start, stop, reboot, pause, unpause, suspend, resume, snapshot, restore, resize, delete."""
        instance = self.get_object()
        data = dict(validated(InstanceActionSerializer, request.data))
        name = data.pop("action")
        operation, created = instance_action(
            user=request.user, instance=instance, action=name, params=data, idempotency_key=idempotency_key(request)
        )
        return accepted(operation, created)

    @extend_schema(responses={200: OperationSerializer(many=True)})
    @action(detail=True, methods=["get"])
    def operations(self, request: Request, pk: str) -> Response:
        instance = self.get_object()
        rows = instance.operations.select_related("requested_by", "project").order_by("-created_at")[:200]
        return Response(OperationSerializer(rows, many=True).data)

    @extend_schema(
        parameters=[ConsoleSerializer],
        responses={200: inline_serializer("ConsoleLog", {"output": serializers.CharField()})},
    )
    @action(detail=True, methods=["get"])
    def console(self, request: Request, pk: str) -> Response:
        """The last lines of the server's console log, read from the cloud now."""
        instance = self.get_object()
        params = validated(ConsoleSerializer, request.query_params)
        if not instance.server_id:
            raise InvalidState("the instance has no server yet")
        try:
            output = get_instance_backend(instance.connection).console_log(instance.server_id, lines=params["lines"])
        except Unsupported as exc:  # the backend has no such thing (KubeVirt: a live console only)
            raise UnsupportedAction(exc.message) from None
        except BackendError as exc:
            raise cloud_error(exc, doing="reading the console log") from None
        return Response({"output": output})


class SnapshotViewSet(viewsets.ReadOnlyModelViewSet):
    serializer_class = SnapshotSerializer
    pagination_class = NewestFirst

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return Snapshot.objects.none()
        return selectors.snapshots_visible_to(user=self.request.user)

    def get_object(self):
        return selectors.snapshot_get_for_user(user=self.request.user, snapshot_id=self.kwargs["pk"])

    @extend_schema(responses={202: OperationSerializer}, parameters=[IDEMPOTENCY])
    def destroy(self, request: Request, pk: str) -> Response:
        """Delete the snapshot's image: 202 with the Operation."""
        operation, created = snapshot_delete(
            user=request.user, snapshot=self.get_object(), idempotency_key=idempotency_key(request)
        )
        return accepted(operation, created)

    @extend_schema(request=SnapshotRestoreSerializer, responses={202: OperationSerializer}, parameters=[IDEMPOTENCY])
    @action(detail=True, methods=["post"])
    def restore(self, request: Request, pk: str) -> Response:
        """Rebuild an instance of the snapshot's project from it, or create a new instance from it."""
        snapshot = self.get_object()
        data = validated(SnapshotRestoreSerializer, request.data)
        key = idempotency_key(request)
        if data.get("instance"):
            instance = selectors.instance_get_for_user(user=request.user, instance_id=data["instance"])
            operation, created = instance_action(
                user=request.user,
                instance=instance,
                action="restore",
                params={"snapshot": str(snapshot.pk)},
                idempotency_key=key,
            )
        else:
            create = {"name": data["name"], "flavor": data["flavor"], "project": data.get("project")}
            operation, created = instance_create(user=request.user, data=create, idempotency_key=key, snapshot=snapshot)
        return accepted(operation, created)


VOLUME_STATE = OpenApiParameter(
    "state", str, enum=["kept", "reclaimed", "all"], description="kept (default): not reclaimed yet"
)
VOLUME_PROJECT = OpenApiParameter("project", str, description="a project slug")


class KeptVolumeViewSet(viewsets.ReadOnlyModelViewSet):
    """Volumes deleted instances kept (`volumes: keep`), per project; each holds its GB of `max_volume_gb`
    until reclaimed."""

    serializer_class = KeptVolumeSerializer
    pagination_class = NewestFirst

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return KeptVolume.objects.none()
        rows = selectors.kept_volumes_visible_to(user=self.request.user)
        state = self.request.query_params.get("state", "kept")
        if state not in ("kept", "reclaimed", "all"):
            raise InvalidSpec("unknown state", errors=[{"field": "state", "message": "kept, reclaimed or all"}])
        if state != "all":
            rows = rows.filter(reclaimed_at__isnull=state == "kept")
        if project := self.request.query_params.get("project"):
            if "\x00" in project:  # as a form field would (the schema says so of every free-text string)
                raise InvalidSpec(
                    "bad project", errors=[{"field": "project", "message": "Null characters are not allowed."}]
                )
            rows = rows.filter(project__slug=project)
        return rows

    def get_object(self):
        return selectors.kept_volume_get_for_user(user=self.request.user, volume_id=self.kwargs["pk"])

    @extend_schema(parameters=[VOLUME_STATE, VOLUME_PROJECT])
    def list(self, request: Request, *args, **kwargs) -> Response:
        return super().list(request, *args, **kwargs)

    @extend_schema(request=None, responses={202: OperationSerializer}, parameters=[IDEMPOTENCY])
    @action(detail=True, methods=["post"])
    def reclaim(self, request: Request, pk: str) -> Response:
        """Delete the kept volume in the cloud: 202 with the Operation; 409 `volume_in_use` while a server or
        VM still uses it (the cloud is read first, and again right before the delete)."""
        operation, created = volume_reclaim(
            user=request.user, volume=self.get_object(), idempotency_key=idempotency_key(request)
        )
        return accepted(operation, created)


class OperationViewSet(viewsets.ReadOnlyModelViewSet):
    serializer_class = OperationSerializer
    pagination_class = NewestFirst

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return Operation.objects.none()
        return selectors.operations_visible_to(user=self.request.user)

    def get_object(self):
        return selectors.operation_get_for_user(user=self.request.user, operation_id=self.kwargs["pk"])
