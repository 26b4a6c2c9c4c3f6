"""The project's URLs plus three views that do nothing, for bench_request_floor.py: what the stack costs alone.

Served only by the benchmark (tests/bench/floor_settings.py names this module); never part of the product.
"""

from __future__ import annotations

from django.http import JsonResponse
from django.urls import path
from rest_framework.response import Response
from rest_framework.views import APIView

from cloudpivot.urls import urlpatterns as project_urlpatterns


def bare(request):
    """Plain Django: no authentication, no database, a small JSON answer."""
    return JsonResponse({"ok": True})


class Empty(APIView):
    """DRF with the project's defaults: the bearer token checked (one query), JSON parsed and rendered."""

    def get(self, request):
        return Response({"ok": True})

    def post(self, request):
        return Response({"ok": True, "keys": len(request.data)}, status=201)


urlpatterns = [
    path("api/v1/_floor/bare", bare),
    path("api/v1/_floor/drf", Empty.as_view()),
    *project_urlpatterns,
]
