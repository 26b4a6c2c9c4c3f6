from django.contrib import admin
from django.http import HttpRequest, JsonResponse
from django.urls import include, path, re_path
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView

from cloudpivot import health, views
from cloudpivot.api import error_body
from clusters.metrics.endpoint import MetricsView
from runner_api import sync_view
from runner_api import views as runner_views


@csrf_exempt  # a POST with a session cookie must get this JSON 404, not the CSRF failure page
def api_not_found(request: HttpRequest) -> JsonResponse:
    """Any other path under /api/ answers the API's error shape, not the HTML 404 page."""
    return JsonResponse(error_body("not_found", f"no such API path: {request.path}"), status=404)


api_v1 = [
    path("", include("tasks.api.urls")),
    path("", include("clusters.api.urls")),
    path("", include("cloudpivot.accounts.api.urls")),
    path("", include("resources.api.urls")),
    path("", include("notifications.api.urls")),
    path("", include("usage.api.urls")),
    path("", include("tasksets.api.urls")),
    path("", include("results.api.urls")),
]

urlpatterns = [
    path("", views.home, name="home"),
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("metrics", MetricsView.as_view(), name="metrics"),
    path("", include("tasks.urls")),
    path("", include("tasksets.urls")),
    path("clouds/", include("clusters.urls")),
    path("", include("resources.urls")),
    path("", include("notifications.urls")),
    path("", include("usage.urls")),
    path("results/", include("results.urls")),
    # Personal settings and project pages (tokens, email, members, quotas): their own block and module.
    path("", include("cloudpivot.accounts.urls")),
    # (end of the settings and project pages block)
    path("admin/", admin.site.urls),
    path("accounts/", include("allauth.urls")),
    path("api/v1/", include(api_v1)),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="api-docs"),
    path("api/redoc/", SpectacularRedocView.as_view(url_name="schema"), name="api-redoc"),
    re_path(r"^api/", api_not_found),
    path("runner/v1/", include("runner_api.urls")),
    path("runner/v2/sync", sync_view.sync, name="runner-sync"),
    path("runner/v2/bootstrap", runner_views.BootstrapView.as_view(protocol=2), name="runner-bootstrap"),
]
