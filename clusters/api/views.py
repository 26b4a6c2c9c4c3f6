from drf_spectacular.utils import extend_schema
from rest_framework import viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from clusters import inventory
from clusters.api.serializers import CloudConnectionSerializer
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

    @extend_schema(responses={200: dict}, summary="Inventory of one kind (Kubernetes: nodes, namespaces, pvcs, pods)")
    @action(detail=True, methods=["get"], url_path=r"resources/(?P<kind>[a-z0-9_-]+)")
    def resources(self, request, cloud_id=None, kind=None):
        return Response(inventory.cloud_inventory(connection=self.get_object(), kind=kind))

    @extend_schema(responses={200: dict}, summary="Current CPU and memory use (metrics.k8s.io where served)")
    @action(detail=True, methods=["get"])
    def metrics(self, request, cloud_id=None):
        return Response(inventory.cloud_metrics(connection=self.get_object()))

    @extend_schema(responses={200: dict}, summary="What the cloud offers besides tasks (VM instances)")
    @action(detail=True, methods=["get"])
    def capabilities(self, request, cloud_id=None):
        return Response(inventory.cloud_capabilities(connection=self.get_object()))
