from rest_framework.routers import SimpleRouter

from cloudpivot.accounts.api.views import ApiTokenViewSet, ProjectViewSet, QuotaViewSet

app_name = "accounts-api"
router = SimpleRouter()
router.trailing_slash = "/?"
router.register("tokens", ApiTokenViewSet, basename="token")
router.register("projects", ProjectViewSet, basename="project")
router.register("quotas", QuotaViewSet, basename="quota")
urlpatterns = router.urls
