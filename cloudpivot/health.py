"""Probes: `/healthz` says the process answers; `/readyz` says it can serve, i.e. reaches its dependencies.

Kubernetes restarts a pod whose liveness probe (/healthz) fails, and only stops sending traffic to one whose
readiness probe (/readyz) fails: an unreachable database must never restart every web pod at once, so only
readiness looks at it. /readyz checks the database (with the ORM broker, also the job queue) and, with
REDIS_URL, Redis (the django-q2 broker and the channel layer). The answer names what is missing, never an
address or a credential; the reason itself goes to the log.
"""

from __future__ import annotations

import logging

import redis
from django.conf import settings
from django.db import connection
from django.http import HttpRequest, JsonResponse

logger = logging.getLogger(__name__)


def healthz(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"status": "ok"})


def _database() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        cursor.fetchone()
    return "ok"


def _redis() -> str:
    if not settings.REDIS_URL:
        return "not used (ORM broker, in-process channel layer)"
    client = redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=1, socket_timeout=1)
    try:
        client.ping()
    finally:
        client.close()
    return "ok"


CHECKS = {
    "database": (_database, "the database is not reachable"),
    "redis": (_redis, "Redis (job broker and channel layer) is not reachable"),
}


def readyz(request: HttpRequest) -> JsonResponse:
    checks: dict[str, str] = {}
    reasons: list[str] = []
    for name, (check, failure) in CHECKS.items():
        try:
            checks[name] = check()
        except Exception as exc:  # any failure of a dependency means "not ready", with its reason logged
            logger.warning("not ready: %s: %s: %s", failure, type(exc).__name__, exc)
            checks[name] = "unavailable"
            reasons.append(failure)
    if reasons:
        response = JsonResponse({"status": "unavailable", "reason": "; ".join(reasons), "checks": checks}, status=503)
        response["Retry-After"] = "5"
    else:
        response = JsonResponse({"status": "ready", "checks": checks})
    response["Cache-Control"] = "no-store"
    return response
