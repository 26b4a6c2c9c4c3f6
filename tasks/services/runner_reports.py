"""What Runners report: heartbeats, ordered events and log bytes (DESIGN §5).

Every report is applied under the task and attempt row locks, so reports racing each
other, or racing a cancel or the reconciler, are applied one at a time and in order.
"""

from __future__ import annotations

import signal as signals
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from cloudpivot import realtime
from cloudpivot.rows import objects_insert
from clusters.backends import get_backend
from clusters.data_refs import OBJECT, data_env
from clusters.egress import NONE, task_egress
from tasks.choices import AttemptState, StopReason, TaskState
from tasks.models import Attempt, Task, TaskEvent
from tasks.services.attempts import attempt_close, stopped_state
from tasks.services.lifecycle import (
    attempt_refuse_if_closed,
    attempt_transition,
    event_append,
    lock_task_and_attempt,
    task_events_appended,
    task_transition,
)
from tasks.services.secret_delivery import assignment_secrets, report_mask
from tasks.services.storage_record import storage_begin
from tasks.stop_grace import stop_grace_seconds

EVENT_TYPES = {"started", "progress", "result", "exited", "lost", "outputs"}
# Where declared outputs go and who records their manifest: the results app, a layer above (docs/data.md).
_OUTPUTS: dict[str, Callable[..., Any]] = {}


def register_outputs(*, target: Callable[[Attempt], dict[str, Any]], record: Callable[..., str]) -> None:
    """The results app hands in `target(attempt)`, the store target an assignment names for the attempt's
    declared outputs, and `record(task=, attempt=, manifest=)`, which stores the manifest a Runner reports
    (the `outputs` event) in the report's transaction and returns the sentence for the task's history."""
    _OUTPUTS.update(target=target, record=record)


def _refuse_if_closed(attempt: Attempt) -> None:
    attempt_refuse_if_closed(attempt, attempt.task)


def runner_assignment(*, attempt: Attempt) -> dict[str, Any]:
    """What the Runner should run; it also tells a restarted Runner where the server stands."""
    _refuse_if_closed(attempt)
    _mark_contact(attempt)
    storage_begin(attempt)  # the references it borrows or creates, recorded once
    spec = attempt.task.normalized
    secrets = assignment_secrets(attempt.task)  # project secrets: for the execution only, never stored
    return (
        {
            "task_id": str(attempt.task_id),
            "attempt": attempt.external_name,
            "attempt_number": attempt.number,
            "argv": spec["command"],
            # docs/data.md: where the program finds its data references (CLOUDPIVOT_DATA_<N>, CLOUDPIVOT_DATA_<NAME>)
            "env": (spec.get("env") or {}) | data_env(spec) | secrets.pop("secret_env", {}),
            **secrets,
            "workdir": spec.get("workdir"),
            "timeout_seconds": attempt.task.timeout_seconds,
            "heartbeat_interval": settings.RUNNER_HEARTBEAT_SECONDS,
            "stop_grace_seconds": stop_grace_seconds(spec),
            "stop_requested": attempt.stop_requested_at is not None,
            "acked_seq": attempt.acked_seq,
            "log_offsets": {"stdout": attempt.log_stdout_bytes, "stderr": attempt.log_stderr_bytes},
            # docs/security.md#egress: the host program runs it in a network namespace of its own, or not at all.
            **({"network": NONE} if task_egress(spec) == NONE else {}),
        }
        | _outputs_assignment(attempt, spec)
        | _stage_in_assignment(attempt, spec)
    )


def _stage_in_assignment(attempt: Attempt, spec: dict[str, Any]) -> dict[str, Any]:
    """`object` data references: what the host program fetches before the program starts, signed for the time
    it may take to start (docs/data.md)."""
    if not any(ref["kind"] == OBJECT for ref in spec.get("data") or []):
        return {}
    seconds = settings.RESULTS_UPLOAD_SECONDS
    return {"stage_in": get_backend(attempt.task.connection).stage_in(spec, seconds)}


def _outputs_assignment(attempt: Attempt, spec: dict[str, Any]) -> dict[str, Any]:
    """The declared outputs and the store target they go to, when the task declares any."""
    if not spec.get("outputs") or "target" not in _OUTPUTS:
        return {}
    return {"outputs": {"declared": spec["outputs"], "store": _OUTPUTS["target"](attempt)}}


def _mark_contact(attempt: Attempt) -> None:
    if attempt.runner_contact_at is None:
        now = timezone.now()
        Attempt.objects.filter(pk=attempt.pk, runner_contact_at__isnull=True).update(runner_contact_at=now)
        attempt.runner_contact_at = now


def runner_stop_requested(*, attempt: Attempt) -> bool:
    """Every answer to a Runner carries the stop flag, so a busy Runner need not send heartbeats to learn it."""
    return Attempt.objects.filter(pk=attempt.pk, stop_requested_at__isnull=False).exists()


def runner_heartbeat(*, attempt: Attempt, boot_id: str, pid: int | None, usage: dict[str, Any]) -> dict[str, Any]:
    _refuse_if_closed(attempt)
    now = timezone.now()
    Attempt.objects.filter(pk=attempt.pk).update(
        last_heartbeat_at=now,
        runner_boot_id=boot_id[:64],
        runner_pid=pid,
        usage=usage or {},
    )
    _mark_contact(attempt)
    attempt.refresh_from_db(fields=["stop_requested_at", "acked_seq", "program_started_at"])
    if attempt.task.state == TaskState.UNKNOWN:
        runner_verified_alive(attempt)
    return {"stop_requested": attempt.stop_requested_at is not None, "acked_seq": attempt.acked_seq}


def runner_verified_alive(attempt: Attempt) -> None:
    """A Runner that went silent reports again: UNKNOWN ─verified─▶ what it says."""
    with transaction.atomic():
        task, attempt = lock_task_and_attempt(attempt)
        if task.state != TaskState.UNKNOWN or attempt.is_closed or attempt.number != task.attempts_count:
            return
        if attempt.stop_reason == StopReason.CANCEL:
            target, verb = TaskState.CANCELLING, "is back and stops the program"
        elif attempt.program_started_at:
            target, verb = TaskState.RUNNING, "reports the program still running"
        else:
            target, verb = TaskState.STARTING, "is back"
        task_transition(task=task, to=target, reason=f"the Runner {verb}", data={"attempt": attempt.number})


def runner_events_apply(*, attempt: Attempt, events: list[dict[str, Any]]) -> int:
    """Apply the next contiguous events in seq order, atomically; return the highest contiguous acked seq."""
    with transaction.atomic():
        task, attempt = lock_task_and_attempt(attempt)
        runner_events_apply_locked(task=task, attempt=attempt, events=events)
        Attempt.objects.filter(pk=attempt.pk).update(acked_seq=attempt.acked_seq, last_heartbeat_at=timezone.now())
        return attempt.acked_seq


def runner_events_apply_locked(*, task: Task, attempt: Attempt, events: list[dict[str, Any]]) -> None:
    """The same on a locked task and attempt; `attempt.acked_seq` is advanced in memory, the caller saves it."""
    attempt.task = task
    by_seq = {event["seq"]: event for event in events}
    fresh = [seq for seq in by_seq if seq > attempt.acked_seq]
    if fresh:
        _refuse_if_closed(attempt)
    _mark_contact(attempt)
    progress: list[TaskEvent] = []
    while attempt.acked_seq + 1 in by_seq and not attempt.is_closed:
        event = by_seq[attempt.acked_seq + 1]
        if event["type"] == "progress":
            progress += filter(None, [runner_progress_event(task, attempt, event)])
        else:
            _progress_save(task, progress)  # what came before is stored before what this event does
            _apply(task, attempt, event)
        attempt.acked_seq += 1
    _progress_save(task, progress)


def runner_progress_event(task: Task, attempt: Attempt, event: dict[str, Any]) -> TaskEvent | None:
    """A progress report as the next public event of the locked task, in memory: a run of them is stored
    with one INSERT and one UPDATE of the task's seq counter (_progress_save), not two queries each.

    None past RUNNER_EVENTS_KEPT_PER_ATTEMPT reports of the attempt (its seq counts them): the history of a
    task stays bounded whatever its program reports; the last one kept says so, once."""
    seq, kept = attempt.acked_seq + 1, settings.RUNNER_EVENTS_KEPT_PER_ATTEMPT
    if seq > kept:
        return None
    data = report_mask(task, event.get("data") or {})
    message = str(data.get("message", ""))[:2000]
    if seq == kept:
        message = f"the program's later progress reports are not kept ({kept} events per attempt); its log goes on"
    task.last_event_seq += 1
    return TaskEvent(
        task=task,
        seq=task.last_event_seq,
        type="progress",
        message=message,
        data={"attempt": attempt.number, "fraction": data.get("fraction")},
    )


def _progress_save(task: Task, progress: list[TaskEvent]) -> None:
    if not progress:
        return
    objects_insert(TaskEvent, progress)
    task_events_appended.send(sender=TaskEvent, events=progress)
    Task.objects.filter(pk=task.pk).update(last_event_seq=task.last_event_seq)
    realtime.ring_on_commit(task_id=task.pk, project_id=task.project_id, seq=task.last_event_seq)
    progress.clear()


def _apply(task: Task, attempt: Attempt, event: dict[str, Any]) -> None:
    kind, data = event["type"], event.get("data") or {}
    if kind in ("result", "exited", "lost"):  # words the program or its host chose: the task's secrets masked
        data = report_mask(task, data)
    when = parse_datetime(event.get("time") or "") or timezone.now()
    if kind == "started":
        attempt.program_started_at = when
        if attempt.state == AttemptState.RUNNING:  # a second "started" (a Runner that re-attached) moves nothing
            attempt.save(update_fields=["program_started_at", "updated_at"])
        else:
            attempt_transition(attempt=attempt, to=AttemptState.RUNNING, fields=["program_started_at"])
        if task.state in (TaskState.SUBMITTING, TaskState.STARTING, TaskState.UNKNOWN):
            task_transition(
                task=task,
                to=TaskState.RUNNING,
                reason=f"the program started (pid {data.get('pid')})",
                # The host's facts as the agent reported them: the attempt's provenance (results/provenance.py).
                data={"attempt": attempt.number} | ({"host": dict(data["host"])} if data.get("host") else {}),
            )
    elif kind == "progress":
        _progress_save(task, list(filter(None, [runner_progress_event(task, attempt, event)])))
    elif kind == "result":
        task.result = {"summary": data.get("summary"), "refs": data.get("refs") or []}
        Task.objects.filter(pk=task.pk).update(result=task.result)
        event_append(
            task=task, type="result", message="the program reported a result", data={"attempt": attempt.number}
        )
    elif kind == "outputs":
        message = _OUTPUTS["record"](task=task, attempt=attempt, manifest=data) if _OUTPUTS else "outputs reported"
        event_append(
            task=task,
            type="outputs",
            message=message,
            data={"attempt": attempt.number, "complete": bool(data.get("complete"))},
        )
    elif kind == "exited":
        _apply_exited(task, attempt, data, when)
    elif kind == "lost":
        why = str(data.get("reason") or "the Runner lost track of the program")
        if data.get("interrupted") is True and attempt.stop_requested_at is None:
            _apply_interrupted(task, attempt, why)
        else:
            _apply_lost(task, attempt, why)


def _apply_exited(task: Task, attempt: Attempt, data: dict[str, Any], when: Any) -> None:
    attempt.exit_code = data.get("exit_code")
    attempt.exit_signal = data.get("signal")
    attempt.finished_at = when
    how = data.get("reason") or _describe_exit(attempt.exit_code, attempt.exit_signal)
    if attempt.stop_requested_at is not None:
        outcome = stopped_state(attempt)
        why = f"timeout of {task.timeout_seconds} s reached" if outcome == TaskState.TIMED_OUT else "cancelled"
        reason = f"{why}; {how}"
    elif attempt.exit_code == 0:
        outcome, reason = TaskState.SUCCEEDED, how
    else:
        outcome, reason = TaskState.FAILED, how
        attempt.failure_reason = how
    attempt_close(task=task, attempt=attempt, outcome=outcome, reason=reason, data={"signal": attempt.exit_signal})


def _apply_interrupted(task: Task, attempt: Attempt, why: str) -> None:
    """The host said the infrastructure ended the program (it rebooted under it): the task's on_interrupt decides."""
    attempt.failure_reason = why
    attempt_close(
        task=task,
        attempt=attempt,
        outcome=TaskState.FAILED,
        reason=f"interrupted: {why}",
        data={"evidence": why},
        interrupted=True,
    )


def _apply_lost(task: Task, attempt: Attempt, why: str) -> None:
    """The Runner cannot tell how the program ended: never a silent re-run, the task becomes UNKNOWN."""
    attempt.failure_reason = why
    if attempt.stop_requested_at is not None:
        attempt_close(task=task, attempt=attempt, outcome=stopped_state(attempt), reason=f"stopped; {why}", lost=True)
        return
    attempt_close(
        task=task,
        attempt=attempt,
        outcome=TaskState.UNKNOWN,
        reason=f"the execution was lost: {why}; retry it if it is safe to run again",
        data={"evidence": why},
        lost=True,
    )


def _describe_exit(code: int | None, sig: int | None) -> str:
    if sig:
        try:
            name = signals.Signals(sig).name
        except ValueError:
            name = f"signal {sig}"
        return f"killed by {name}"
    if code is None:
        return "ended without an exit code"
    return f"exited with code {code}"
