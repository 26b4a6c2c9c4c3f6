from rest_framework import viewsets

from clusters.api.serializers import CloudConnectionSerializer
from clusters.selectors import connections_visible_to


class CloudConnectionViewSet(viewsets.ReadOnlyModelViewSet):
    serializer_class = CloudConnectionSerializer
    lookup_field = "cloud_id"
    pagination_class = None

    def get_queryset(self):
        return connections_visible_to(user=self.request.user)
