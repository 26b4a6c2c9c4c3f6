"""Waking whoever does the next step of a task: services call these (after commit); nothing here does the step.

No step of a task is a background job of its own (issue 11): a `local` connection's host agent admits
and takes its work in its own sync (woken by the agent doorbell), and the reconcile pass admits, starts
and cleans up for the other clouds (woken by the reconcile doorbell, cloudpivot/realtime.py). The
database is the record either way: a lost ring costs only latency. What is still queued as a job
(the ticker, a stop) is named by its dotted path (`tasks.jobs.*`), never imported, so every path is
one-way (services → dispatch, jobs → services).
"""

from __future__ import annotations

from cloudpivot import realtime
from cloudpivot.queueing import enqueue
from clusters.backends import backend_hands_out, handed_out_kinds
from clusters.backends.local import local_agent_wake
from tasks.choices import TaskState
from tasks.models import Task


def enqueue_tick() -> None:
    enqueue("tasks.jobs.tick", task_name="ticker", q_options={"group": "ticker"})


def tick_on_worker_spawn(**signal_kwargs) -> None:
    """django-q2's post_spawn receiver. In sync mode (tests) jobs run inline, where this would recurse."""
    from django_q.conf import Conf

    if not Conf.SYNC:
        enqueue_tick()


def enqueue_admission() -> None:
    """A task may be admitted now (submitted, retried, quota freed): wake the agents, and the reconciler when
    it has something to do: tasks waiting for a cloud without an agent, or no agent heard the ring (the
    pass then launches one). A local task on a running agent costs the reconciler nothing."""
    heard = local_agent_wake()
    if not heard or Task.objects.filter(state=TaskState.PENDING).exclude(backend__in=handed_out_kinds()).exists():
        realtime.ring_reconciler()


def wake_for_submitted(*, backend: str, connection_id: int) -> None:
    """A task was submitted: wake whoever admits it. It changes nothing for the tasks already waiting, so,
    unlike enqueue_admission, this asks the database nothing when the connection's agent heard the ring
    (a submit's hot path): a `local` task wakes its agent (and the reconciler only when no agent heard:
    the pass launches one), any other cloud's task the reconciler."""
    if backend_hands_out(backend) and local_agent_wake(connection_id=connection_id):
        return
    realtime.ring_reconciler()


def wake_admission_if_waiting() -> None:
    """Quota was freed: wake admission, but only if some task waits for it (the usual answer is no)."""
    if Task.objects.filter(state=TaskState.PENDING).exists():
        enqueue_admission()


def wake_agent(connection_id: int) -> None:
    """A `local` connection's agent has something new: an attempt to take, a stop to carry out."""
    local_agent_wake(connection_id=connection_id)


def wake_reconciler() -> None:
    """The reconcile pass has something due now: an attempt to start, a cleanup, a stop."""
    realtime.ring_reconciler()


def enqueue_stop(attempt_id: int) -> None:
    enqueue("tasks.jobs.stop", attempt_id, q_options={"group": "stop"})
