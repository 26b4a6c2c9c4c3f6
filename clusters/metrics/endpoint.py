"""GET /metrics: who may read the platform's figures, and the response.

Safe by default: staff users (session or API token), or a scraper presenting the bearer token set
in CLOUDPIVOT_METRICS_TOKEN. Nobody else; without any credentials the answer is 401.
"""

from __future__ import annotations

import hmac

from django.conf import settings
from django.contrib.auth.models import AnonymousUser
from django.http import HttpResponse
from drf_spectacular.utils import extend_schema
from prometheus_client import CONTENT_TYPE_LATEST
from rest_framework import authentication, permissions
from rest_framework.views import APIView

from cloudpivot.accounts.authentication import BearerTokenAuthentication
from clusters.metrics.prometheus import render

SCRAPER = "metrics-scrape-token"


class ScrapeTokenAuthentication(authentication.BaseAuthentication):
    """`Authorization: Bearer <CLOUDPIVOT_METRICS_TOKEN>`; any other bearer goes on to the API tokens."""

    def authenticate(self, request):
        expected = settings.METRICS_TOKEN
        keyword, _, value = authentication.get_authorization_header(request).decode(errors="replace").partition(" ")
        if expected and keyword == "Bearer" and hmac.compare_digest(value.strip().encode(), expected.encode()):
            return AnonymousUser(), SCRAPER
        return None

    def authenticate_header(self, request) -> str:
        return 'Bearer realm="metrics"'


class StaffOrScraper(permissions.BasePermission):
    message = "the platform's metrics are for staff users and the metrics scraper"

    def has_permission(self, request, view) -> bool:
        if request.auth == SCRAPER:
            return True
        return bool(request.user and request.user.is_authenticated and request.user.is_staff)


@extend_schema(exclude=True)
class MetricsView(APIView):
    authentication_classes = [
        ScrapeTokenAuthentication,
        BearerTokenAuthentication,
        authentication.SessionAuthentication,
    ]
    permission_classes = [StaffOrScraper]

    def get(self, request):
        return HttpResponse(render(), content_type=CONTENT_TYPE_LATEST)
