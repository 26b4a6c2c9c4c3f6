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
