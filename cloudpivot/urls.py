from django.contrib import admin
from django.http import HttpRequest, JsonResponse
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView

from cloudpivot import views
from clusters.metrics.endpoint import MetricsView
from runner_api import sync_view


def healthz(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"status": "ok"})


api_v1 = [
    path("", include("tasks.api.urls")),
    path("", include("clusters.api.urls")),
    path("", include("cloudpivot.accounts.api.urls")),
    path("", include("resources.api.urls")),
]

urlpatterns = [
    path("", views.home, name="home"),
    path("healthz", healthz, name="healthz"),
    path("metrics", MetricsView.as_view(), name="metrics"),
    path("", include("tasks.urls")),
    path("clouds/", include("clusters.urls")),
    path("", include("resources.urls")),
    path("admin/", admin.site.urls),
    path("accounts/", include("allauth.urls")),
    path("api/v1/", include(api_v1)),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="api-docs"),
    path("api/redoc/", SpectacularRedocView.as_view(url_name="schema"), name="api-redoc"),
    path("runner/v1/", include("runner_api.urls")),
    path("runner/v2/sync", sync_view.sync, name="runner-sync"),
]
