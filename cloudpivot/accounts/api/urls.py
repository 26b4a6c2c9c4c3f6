from django.urls import re_path
from rest_framework.routers import SimpleRouter

from cloudpivot.accounts.api.secrets import ProjectSecretDetailApi, ProjectSecretListApi
from cloudpivot.accounts.api.ssh_keys import SshKeyViewSet
from cloudpivot.accounts.api.views import ApiTokenViewSet, ProjectViewSet, QuotaViewSet

app_name = "accounts-api"
router = SimpleRouter()
router.trailing_slash = "/?"
router.register("tokens", ApiTokenViewSet, basename="token")
router.register("ssh-keys", SshKeyViewSet, basename="ssh-key")
router.register("projects", ProjectViewSet, basename="project")
router.register("quotas", QuotaViewSet, basename="quota")
urlpatterns = [
    re_path(r"^projects/(?P<slug>[-a-zA-Z0-9_]+)/secrets/?$", ProjectSecretListApi.as_view(), name="secret-list"),
    re_path(
        r"^projects/(?P<slug>[-a-zA-Z0-9_]+)/secrets/(?P<name>[^/]+)/?$",
        ProjectSecretDetailApi.as_view(),
        name="secret-detail",
    ),
    *router.urls,
]
