"""What the task set tests share: posting a set, and running the pass's set step as the ticker would."""

from __future__ import annotations

import json
from typing import Any

from tasksets.services.materialize import sets_materialize

URL = "/api/v1/task-sets"


def template(**extra: Any) -> dict[str, Any]:
    return {"cloud": "local", "command": ["python3", "-c", "print('hello')"], **extra}


def post_set(client, body: Any, **headers):
    data = body if isinstance(body, str | bytes) else json.dumps(body)
    return client.post(URL, data=data, content_type="application/json", **headers)


def materialize() -> int:
    """The reconcile pass's set step, alone (the whole pass would launch a host agent for `local`)."""
    return sets_materialize()


def run_open_elements(*, exit_codes: dict[int, int] | None = None) -> int:
    """Admit every PENDING element and let each one's program exit (0, or `exit_codes[index]`); how many ran."""
    from tasks.models import Attempt, Task
    from tasks.services.admission import connection_admit
    from tests.builders import report

    for connection_id in set(Task.objects.filter(state="PENDING").values_list("connection_id", flat=True)):
        connection_admit(connection_id=connection_id)
    ran = 0
    for task in Task.objects.filter(state="SUBMITTING").select_related("set_element"):
        attempt = Attempt.objects.get(task=task, number=task.attempts_count)
        code = (exit_codes or {}).get(task.set_element.index, 0)
        report(attempt, {"type": "started", "data": {"pid": 4242}}, {"type": "exited", "data": {"exit_code": code}})
        ran += 1
    return ran
