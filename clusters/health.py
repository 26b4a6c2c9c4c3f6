"""Connection health: run a cloud's checks (the ones `manage.py check_cloud` prints) and store the verdict.

One writer for `CloudConnection.health_*`: the scheduled job, the admin's "Test connection" and the
cloud page's "Check now" all call `connections_check`. Each connection is checked in its own thread
under one deadline, so a cloud that hangs is recorded as failing without holding the others back.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from dataclasses import dataclass, field, replace

from django.conf import settings
from django.db import connection as db_connection
from django.utils import timezone

from clusters.backends import get_backend
from clusters.backends.base import BackendError
from clusters.choices import HealthStatus
from clusters.models import CloudConnection

logger = logging.getLogger(__name__)
MESSAGE_LIMIT = 1000  # characters of the stored message; the checks' words are short, a cloud's error may not be
# Credentials a cloud library might echo in an error: a bearer token, or a password/token/secret parameter.
_SECRET_PATTERNS = [
    re.compile(r"(?i)(bearer\s+)[^\s'\"]+"),
    re.compile(r"(?i)((?:password|passwd|token|secret|api[_-]?key)[\"']?\s*[:=]\s*[\"']?)[^\s'\",}]+"),
]


@dataclass(frozen=True)
class Check:
    """One thing CloudPivot needs from the cloud, as check_cloud prints it: `{mark} {what}: {detail}`."""

    what: str
    ok: bool
    required: bool
    detail: str


@dataclass(frozen=True)
class CheckReport:
    """The verdict on one connection: `summary` is what the pages show (the first problem, or what works)."""

    ok: bool
    summary: str
    checks: list[Check] = field(default_factory=list)
    # Words the command line adds after a failure (where to read how to fix it); not stored.
    hint: str = ""


def connection_checks(connection: CloudConnection) -> CheckReport:
    """Ask the cloud: reachable, credentials accepted, and everything CloudPivot needs there (blocking).

    Kubernetes: the server answers and Jobs are readable, then a permission review per verb; OpenStack: each
    requirement (Keystone, services, flavor, image, networks, key pair); local: the runs directory.
    """
    try:
        backend = get_backend(connection)
        requirements = backend.requirements()  # None: the backend has no list of requirements (declared, base.py)
        if requirements is not None:
            return _requirements_report(requirements)
        health = backend.health()
    except BackendError as exc:
        return CheckReport(ok=False, summary=exc.message)
    if not health.ok:
        return CheckReport(ok=False, summary=f"cannot use this cloud: {health.message}")
    try:
        results = backend.permissions()
    except BackendError as exc:
        return CheckReport(ok=False, summary=f"could not check permissions: {exc.message}")
    if results is None:  # the backend has no permissions to review
        return CheckReport(ok=True, summary=health.message)
    checks = [
        Check(
            what=_permission_words(r),
            ok=r["allowed"],
            required=r["required"],
            detail=f"{'needed' if r['required'] else 'optional'} to {r['purpose']}",
        )
        for r in results
    ]
    try:
        checks += [Check(**line) for line in backend.feature_checks()]
    except BackendError as exc:
        checks.append(Check(what="optional features", ok=False, required=False, detail=exc.message))
    missing = [r for r in results if r["required"] and not r["allowed"]]
    if missing:
        words = "; ".join(f"{r['verb']} {r['resource']}" for r in missing)
        return CheckReport(
            ok=False,
            summary=f"missing {len(missing)} permission(s) CloudPivot needs: {words}",
            checks=checks,
            hint="Grant them with the Role in docs/backends/kubernetes.md.",
        )
    return CheckReport(ok=True, summary=f"{health.message}; everything CloudPivot needs is allowed", checks=checks)


def _permission_words(r: dict) -> str:
    group = f" ({r['group']})" if r["group"] else ""
    where = f" in namespace {r['namespace']}" if r["namespace"] else " (cluster-wide)"
    return f"{r['verb']} {r['resource']}{group}{where}"


def _requirements_report(results: list[dict]) -> CheckReport:
    checks = [Check(what=r["what"], ok=r["ok"], required=r["required"], detail=r["detail"]) for r in results]
    missing = [c for c in checks if c.required and not c.ok]
    if missing:
        words = "; ".join(f"{c.what} ({c.detail})" for c in missing)
        return CheckReport(
            ok=False,
            summary=f"missing {len(missing)} thing(s) CloudPivot needs: {words}",
            checks=checks,
            hint="See docs/backends/openstack.md.",
        )
    found = ", ".join(c.what for c in checks if c.ok)
    return CheckReport(ok=True, summary=f"everything CloudPivot needs is there: {found}", checks=checks)


def without_secrets(message: str) -> str:
    """The words of an error with anything credential-like cut out, and not longer than the page can show."""
    for pattern in _SECRET_PATTERNS:
        message = pattern.sub(r"\1[hidden]", message)
    return message if len(message) <= MESSAGE_LIMIT else message[: MESSAGE_LIMIT - 1] + "…"


def connections_check(connections, *, timeout: float | None = None) -> dict[str, CheckReport]:
    """Check each connection in parallel, store each verdict, and return them by cloud_id.

    A connection whose checks take longer than `timeout` seconds (settings.CLOUD_HEALTH_TIMEOUT_SECONDS) is
    recorded as failing; its thread is left to end on the client's own timeout (it writes nothing).
    """
    timeout = settings.CLOUD_HEALTH_TIMEOUT_SECONDS if timeout is None else timeout
    connections = list(connections)
    answers: dict[int, CheckReport] = {}
    threads = []
    for conn in connections:
        thread = threading.Thread(target=_check_into, args=(conn, answers), name=f"health-{conn.cloud_id}", daemon=True)
        thread.start()
        threads.append((conn, thread))
    deadline = time.monotonic() + timeout
    reports = {}
    for conn, thread in threads:
        thread.join(max(deadline - time.monotonic(), 0))
        report = answers.get(conn.pk) or CheckReport(
            ok=False, summary=f"the cloud did not answer the checks within {timeout:g} s"
        )
        reports[conn.cloud_id] = connection_health_record(connection=conn, report=report)
    return reports


def _check_into(conn: CloudConnection, answers: dict[int, CheckReport]) -> None:
    try:
        answers[conn.pk] = connection_checks(conn)
    except Exception as exc:  # a bug of ours is still a verdict, not a lost check; its details only in the log
        logger.exception("health: the checks of %s failed unexpectedly", conn.cloud_id)
        answers[conn.pk] = CheckReport(
            ok=False, summary=f"the check itself failed ({type(exc).__name__}); the details are in the server log"
        )
    finally:
        db_connection.close()  # this thread's own database connection, if the backend opened one


def connection_health_record(*, connection: CloudConnection, report: CheckReport) -> CheckReport:
    """The one writer of health_*: status, the words, and when (an update, so nothing else is overwritten).

    Returns the report as stored (its summary without secrets), for the caller to show."""
    status = HealthStatus.OK if report.ok else HealthStatus.FAILING
    if status != connection.health_status:
        log = logger.info if report.ok else logger.warning
        log("health: %s is now %s: %s", connection.cloud_id, status, without_secrets(report.summary))
    connection.health_status = status
    connection.health_message = without_secrets(report.summary)
    connection.health_checked_at = timezone.now()
    CloudConnection.objects.filter(pk=connection.pk).update(
        health_status=connection.health_status,
        health_message=connection.health_message,
        health_checked_at=connection.health_checked_at,
    )
    return replace(report, summary=connection.health_message)


def next_scheduled_check() -> dict | None:
    """{"at", "minutes", "due"}: when the background worker next runs every cloud's checks (django-q2's
    `clouds-health` schedule) and how often; None when that schedule is missing (`manage.py sync_schedules`
    was not run). The cloud page says which."""
    from django_q.models import Schedule

    row = Schedule.objects.filter(func="clusters.jobs.check_health").values("next_run", "minutes").first()
    if row is None or row["next_run"] is None:
        return None
    return {"at": row["next_run"], "minutes": row["minutes"], "due": row["next_run"] <= timezone.now()}


def check_all() -> dict[str, CheckReport]:
    """Every connection: what the schedule runs."""
    return connections_check(CloudConnection.objects.all())
