from rest_framework.routers import SimpleRouter

from clusters.api.views import CloudConnectionViewSet

app_name = "clusters-api"
router = SimpleRouter()
router.trailing_slash = "/?"  # DESIGN uses /api/v1/tasks; accept a trailing slash too
router.register("clouds", CloudConnectionViewSet, basename="cloud")
urlpatterns = router.urls
