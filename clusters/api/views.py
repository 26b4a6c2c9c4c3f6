from drf_spectacular.utils import extend_schema
from rest_framework import viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from cloudpivot.accounts.selectors import projects_visible_to
from cloudpivot.exceptions import NotFound, PermissionDenied
from clusters import inventory
from clusters.api.serializers import CloudConnectionSerializer, SeriesQuerySerializer
from clusters.choices import SubjectKind
from clusters.metrics.series import RESOLUTION_NAMES, series_get
from clusters.metrics.visibility import inventory_visible, metrics_visible, sees_whole_cloud
from clusters.models import CloudConnection
from clusters.selectors import connections_visible_to


class CloudConnectionViewSet(viewsets.ReadOnlyModelViewSet):
    """Clouds the user may use; foreign ones are 404 (visibility is the selector)."""

    serializer_class = CloudConnectionSerializer
    lookup_field = "cloud_id"
    pagination_class = None

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # schema generation has no user
            return CloudConnection.objects.none()
        return connections_visible_to(user=self.request.user)

    def get_object(self) -> CloudConnection:
        """A missing or foreign cloud: our 404 naming it, like a task's ("task … not found"), not DRF's."""
        cloud_id = self.kwargs[self.lookup_field]
        connection = self.get_queryset().filter(cloud_id=cloud_id).first()
        if connection is None:
            raise NotFound(f"cloud {cloud_id} not found")
        return connection

    @extend_schema(
        responses={200: dict},
        summary="Inventory of one kind (Kubernetes: nodes, namespaces, pvcs, pods); "
        "users see their projects' pods, servers and images, cloud-wide kinds are for admins",
    )
    @action(detail=True, methods=["get"], url_path=r"resources/(?P<kind>[a-z0-9_-]+)")
    def resources(self, request, cloud_id=None, kind=None):
        return Response(inventory_visible(user=request.user, connection=self.get_object(), kind=kind))

    @extend_schema(
        parameters=[SeriesQuerySerializer],
        responses={200: dict},
        summary="Current CPU and memory use (metrics.k8s.io where served); with ?metric=, a sampled series",
    )
    @action(detail=True, methods=["get"])
    def metrics(self, request, cloud_id=None):
        connection = self.get_object()
        query = SeriesQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)  # without ?metric= too: a wrong parameter is not silently ignored
        q = query.validated_data
        if "metric" not in q:
            return Response(metrics_visible(user=request.user, connection=connection))
        _check_subject_visible(request.user, connection, q["subject_kind"], q.get("subject_key"))
        found = series_get(
            connection=connection,
            metric=q["metric"],
            subject_kind=q["subject_kind"],
            subject_key=q.get("subject_key"),
            since=q.get("since"),
            until=q.get("until"),
            resolution=RESOLUTION_NAMES[q["resolution"]] if q.get("resolution") else None,
        )
        names = {seconds: name for name, seconds in RESOLUTION_NAMES.items()}
        return Response(
            {
                "cloud": connection.cloud_id,
                "metric": found.metric,
                "subject_kind": found.subject_kind,
                "subject_key": found.subject_key,
                "resolution": names[found.resolution],
                "count": len(found.points),
                "points": [{"t": moment.isoformat(), "v": value} for moment, value in found.points],
            }
        )

    @extend_schema(responses={200: dict}, summary="What the cloud offers: the task fields it runs, VM instances")
    @action(detail=True, methods=["get"])
    def capabilities(self, request, cloud_id=None):
        return Response(inventory.cloud_capabilities(connection=self.get_object()))


def _check_subject_visible(user, connection: CloudConnection, kind: str, key: str | None) -> None:
    """A project's or an instance's figures are for those who see it (nodes and the cloud's own: its users).

    Foreign and missing subjects get the same 404; a node's figures are cloud-wide, for admins only."""
    if kind == SubjectKind.NODE and not sees_whole_cloud(user):
        raise PermissionDenied("node figures are cloud-wide: only administrators see them", code="admins_only")
    if kind == SubjectKind.PROJECT and not projects_visible_to(user=user).filter(slug=key).exists():
        raise NotFound(f"project {key} not found")
    if kind == SubjectKind.INSTANCE:
        from resources.selectors import instances_visible_to  # resources builds on clusters, not the reverse

        if not instances_visible_to(user=user).filter(connection=connection, server_id=key).exists():
            raise NotFound(f"instance {key} not found")
