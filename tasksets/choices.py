"""The task set's own life, declared once: open while elements remain, then finished or cancelled."""

from __future__ import annotations

from django.db import models


class TaskSetState(models.TextChoices):
    ACTIVE = "ACTIVE", "Active"  # elements wait, run or may still be retried
    FINISHED = "FINISHED", "Finished"  # every element materialized and ended
    CANCELLED = "CANCELLED", "Cancelled"  # no further element materializes


S = TaskSetState
# `tasksets.services.lifecycle.taskset_transition` is the only writer. A retry of its failed elements opens a
# finished set again; a cancelled set stays cancelled (its never-materialized elements cannot come back).
SET_TRANSITIONS: dict[str, frozenset[str]] = {
    S.ACTIVE: frozenset({S.FINISHED, S.CANCELLED}),
    S.FINISHED: frozenset({S.ACTIVE}),
    S.CANCELLED: frozenset(),
}
