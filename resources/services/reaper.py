"""Resuming or ending Operations nobody is working on, so no instance stays refused as "in flight" for ever.

Two ways an Operation is left open: its job was killed (django-q2's timeout, a worker or host crash)
while `running`, or its enqueue was lost (the broker was down at commit) while `pending`. A `running` one
whose lease ran out (resources.services.lease: its worker is dead, not slow) is enqueued again and resumed
(resources.services.run: the cloud read first, asked again only when not done); one resumed as often as
allowed, or abandoned for minutes, is failed as lost. Run from the per-minute refresh schedule
(resources.jobs.refresh). Rows are claimed with select_for_update(skip_locked) so two schedules never reap
the same Operation.
"""

from __future__ import annotations

import datetime as dt
import logging

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from cloudpivot.accounts.audit import audit_system
from resources import dispatch
from resources.backends.base import BackendError, Unsupported
from resources.choices import InstanceStatus, OperationState
from resources.models import Operation
from resources.services.lease import max_resumes
from resources.services.run import OperationExecutor
from resources.services.timing import operation_lost_after_seconds

logger = logging.getLogger(__name__)


def requeue_after_seconds() -> float:
    return float(getattr(settings, "INSTANCE_OPERATION_REQUEUE_SECONDS", 120))


def operations_reap() -> str:
    lost = _fail_lost()
    resumed = _resume_abandoned()
    requeued = _requeue_pending()
    return (
        f"{lost} lost operations failed, {resumed} abandoned operations resumed, "
        f"{requeued} pending operations enqueued again"
    )


def _lost() -> Q:
    """`running` and nobody left to finish it: its lease ran out after as many resumes as allowed, or long
    ago (no worker took the resume up: the queue is down), or it was claimed with no lease (before leases)
    and is older than its job may run."""
    now = timezone.now()
    long_ago = now - dt.timedelta(seconds=operation_lost_after_seconds())
    return Q(state=OperationState.RUNNING) & (
        Q(lease_until__lt=now, resumes__gte=max_resumes())
        | Q(lease_until__lt=long_ago)
        | Q(lease_until__isnull=True, started_at__lt=long_ago)
    )


def _fail_lost() -> int:
    """No worker is left to see the post-condition, and none will be asked again."""
    count = 0
    for pk in Operation.objects.filter(_lost()).values_list("pk", flat=True):
        with transaction.atomic():
            operation = Operation.objects.select_for_update(skip_locked=True).filter(_lost(), pk=pk).first()
            if operation is None:
                continue  # finished meanwhile, or another reaper has it
            runner = OperationExecutor(operation)
            age = (timezone.now() - operation.started_at).total_seconds()
            resumed = f", resumed {operation.resumes} times" if operation.resumes else ""
            message = (
                f"lost: the worker stopped before the post-condition was seen (the {operation.action} started "
                f"{age:.0f} s ago{resumed}); the instance is observed again, check it before asking again"
            )
            runner.finish(OperationState.FAILED, kind="lost", message=message)
            audit_system(
                action="resources:operation-lost",
                object_ref=str(operation.pk),
                details={"action": operation.action, "started_at": operation.started_at.isoformat()},
            )
        count += 1
        _observe_again(runner)
    return count


def _observe_again(runner: OperationExecutor) -> None:
    """The killed job may have left the server anywhere: record what the cloud shows now."""
    instance = runner.instance
    if instance is None or not instance.server_id or instance.status == InstanceStatus.DELETED:
        return
    instance.refresh_from_db(fields=["server_id", "status"])
    try:
        runner.observe()
    except (BackendError, Unsupported) as exc:
        logger.warning("observing instance %s after a lost operation: %s", instance.pk, exc)


def _resume_abandoned() -> int:
    """`running` with its lease run out: the worker that held it is dead (a live one renews the lease from a
    thread whatever its cloud call is doing). Enqueued again: the job claims it under a row lock, so a second
    enqueue (the next minute's, a broker's re-delivery) finds the new lease and does nothing."""
    with transaction.atomic():
        abandoned = list(
            Operation.objects.select_for_update(skip_locked=True)
            .filter(state=OperationState.RUNNING, lease_until__lt=timezone.now(), resumes__lt=max_resumes())
            .values_list("pk", flat=True)
        )
        for pk in abandoned:
            logger.warning("operation %s: its worker's lease ran out; enqueued to be resumed", pk)
            transaction.on_commit(lambda pk=pk: dispatch.enqueue_operation(str(pk)))
    return len(abandoned)


def _requeue_pending() -> int:
    """`pending` for minutes: its enqueue was lost. Enqueue again; operation_run ignores all but pending
    Operations, so a job that was only slow to start makes the second enqueue a no-op."""
    cutoff = timezone.now() - dt.timedelta(seconds=requeue_after_seconds())
    with transaction.atomic():
        stale = list(
            Operation.objects.select_for_update(skip_locked=True)
            .filter(state=OperationState.PENDING, updated_at__lt=cutoff)
            .values_list("pk", flat=True)
        )
        # updated_at marks the re-enqueue: a queue that is only slow is not flooded every minute
        Operation.objects.filter(pk__in=stale).update(updated_at=timezone.now())
        for pk in stale:
            transaction.on_commit(lambda pk=pk: dispatch.enqueue_operation(str(pk)))
    return len(stale)
