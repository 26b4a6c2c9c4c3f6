"""The one writer of Operation rows' state: each is born and moves here, by compare-and-set against
OPERATION_TRANSITIONS, and every state it reaches is announced in the transaction that writes it.

`operation_state_changed` (sender=Operation, operation=…) is how the event feed (notifications/capture.py) copies
the state in that same transaction: an Operation's state and its feed entry commit or vanish together, and no
reader has to scan for states it missed (docs/architecture.md, "Calls that go up the layers").
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.dispatch import Signal
from django.utils import timezone

from cloudpivot.exceptions import InvalidTransition
from resources.choices import OPERATION_BORN, OPERATION_TRANSITIONS, OperationState
from resources.models import Operation

operation_state_changed = Signal()


def operation_create(**fields: Any) -> Operation:
    """A new Operation (PENDING unless `state` says it is a finished fact), announced with it."""
    _in_transaction()
    state = fields.setdefault("state", OperationState.PENDING)
    if state not in OPERATION_BORN:
        raise InvalidTransition(f"an operation cannot be born {state}")
    operation = Operation.objects.create(**fields)
    operation_state_changed.send(sender=Operation, operation=operation)
    return operation


def operation_transition(*, operation: Operation, to: str, holder: str = "", **fields: Any) -> bool:
    """Move `operation` from the state it was read in to `to`, with `fields`, in one UPDATE; announce it.

    `holder`: only while that worker still holds the claim (a resumed row is someone else's). False, with
    nothing written, when the row moved on or changed hands: the caller lost a race it may lose.
    """
    _in_transaction()
    previous = operation.state
    if to not in OPERATION_TRANSITIONS.get(previous, ()):
        raise InvalidTransition(f"a {previous} operation cannot become {to}")
    rows = Operation.objects.filter(pk=operation.pk, state=previous)
    if holder:
        rows = rows.filter(claimed_by=holder)
    fields["updated_at"] = timezone.now()
    if not rows.update(state=to, **fields):
        return False
    operation.state = to
    for name, value in fields.items():
        setattr(operation, name, value)
    operation_state_changed.send(sender=Operation, operation=operation)
    return True


def _in_transaction() -> None:
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("an Operation's state is written inside transaction.atomic(), with its feed entry")
