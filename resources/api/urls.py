from rest_framework.routers import SimpleRouter

from resources.api.views import InstanceViewSet, KeptVolumeViewSet, OperationViewSet, SnapshotViewSet

app_name = "resources-api"
router = SimpleRouter()
router.trailing_slash = "/?"
router.register("instances", InstanceViewSet, basename="instance")
router.register("snapshots", SnapshotViewSet, basename="snapshot")
router.register("volumes", KeptVolumeViewSet, basename="volume")
router.register("operations", OperationViewSet, basename="operation")
urlpatterns = router.urls
