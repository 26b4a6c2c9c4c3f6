"""Queuing django-q2 jobs for tasks: services call these (after commit); nothing here runs a job.

The jobs are named by their dotted path (`tasks.jobs.*`), never imported, so services can
ask for a job without importing the job module that imports them: every path is one-way
(services → dispatch, jobs → services).
"""

from __future__ import annotations

from cloudpivot.queueing import enqueue


def enqueue_tick() -> None:
    enqueue("tasks.jobs.tick", task_name="ticker", q_options={"group": "ticker"})


def tick_on_worker_spawn(**signal_kwargs) -> None:
    """django-q2's post_spawn receiver. In sync mode (tests) jobs run inline, where this would recurse."""
    from django_q.conf import Conf

    if not Conf.SYNC:
        enqueue_tick()


def enqueue_admission() -> None:
    enqueue("tasks.jobs.admit", task_name="admit", q_options={"group": "admit"})


def enqueue_start(attempt_id: int) -> None:
    enqueue("tasks.jobs.start", attempt_id, q_options={"group": "start"})


def enqueue_cleanup(attempt_id: int) -> None:
    enqueue("tasks.jobs.cleanup", attempt_id, q_options={"group": "cleanup"})


def enqueue_stop(attempt_id: int) -> None:
    enqueue("tasks.jobs.stop", attempt_id, q_options={"group": "stop"})
