"""POST /runner/v2/sync: the batched protocol (docs/runner.md, "Protocol v2"), as an async view.

An async view because of the long-poll: an idle agent's request waits here, costing a coroutine
and not a thread, until the agent doorbell rings (a task submitted, a stop request, quota freed) or a
database look every RECHECK_SECONDS finds work, up to `wait` seconds (capped so the call still counts
as a heartbeat). The doorbell is rung after commit by whoever changed something (with the in-process
channel layer, a process without a long-poll pokes the agent instead, which then syncs at once), so
the look only covers a lost ring and is rare: an idle installation costs next to nothing here.

Its database work runs on threads of the agents' own (`db_threads.agent_run`, CLOUDPIVOT_AGENT_DB_THREADS):
however many token API requests queue for the users' threads, an agent's sync never waits behind them.

The doorbell is only a hint: when the channel layer fails (Redis stopped or restarting), the hold goes on
with the database look alone, and the batch already applied is answered, never a 500 (issue 16, item 2).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Any

from django.conf import settings
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from rest_framework.exceptions import ValidationError

from cloudpivot import db_threads, realtime
from cloudpivot.api import error_body, flatten_errors
from cloudpivot.realtime import AGENT_DOORBELL
from runner_api.limits import request_size_refusal
from runner_api.serializers import SyncInputSerializer
from runner_api.sync_scope import SyncRefused, sync_scope
from tasks.services.runner_sync import SyncScope, sync_answer, sync_apply, sync_has_news

logger = logging.getLogger(__name__)

RECHECK_SECONDS = 5.0
# An agent's long-poll answers news (assignments) at most once per this long: while a client submits back to
# back, each answer then admits and hands out every task submitted meanwhile, in one sync, instead of one
# sync (and one new long-poll) per task. A task on an idle system is answered at once (docs/decisions.md).
COALESCE_SECONDS = 0.05
_last_news: dict[str, float] = {}  # agent name → time.monotonic() of its last long-poll answered with news


@csrf_exempt
async def sync(request: HttpRequest) -> JsonResponse:
    if request.method != "POST":
        return _error(405, "method_not_allowed", f"{request.method} is not allowed here; POST a sync batch")
    if refusal := request_size_refusal(request):
        return refusal
    try:
        # read(), not .body: the size was checked above against the Runner API's own limit, which is larger
        # than DATA_UPLOAD_MAX_MEMORY_SIZE (a busy agent's sync carries up to 4 MiB of log bytes).
        body = json.loads(request.read() or b"null")
    except ValueError as exc:
        return _error(400, "parse_error", f"the body is not JSON: {exc}")
    except RecursionError:
        return _error(400, "parse_error", "the body is JSON nested too deeply")
    serializer = SyncInputSerializer(data=body if isinstance(body, dict) else {})
    try:
        serializer.is_valid(raise_exception=True)
    except ValidationError as exc:
        errors = flatten_errors(exc.detail)
        return JsonResponse(error_body("invalid", f"{errors[0]['field']}: {errors[0]['message']}", errors), status=400)
    data = serializer.validated_data
    try:
        scope = await db_threads.agent_run(
            sync_scope, authorization=request.headers.get("Authorization", ""), claimed_agent=data["agent"]["name"]
        )
    except SyncRefused as exc:
        response = _error(401, "not_authenticated", str(exc))
        response["WWW-Authenticate"] = "Bearer"
        return response
    # An agent holding attempts is back at least once per heartbeat interval: its call is their heartbeat.
    wait = min(data["wait"], settings.RUNNER_HEARTBEAT_DEADLINE_SECONDS / 4)
    if data["known"]:
        wait = min(wait, settings.RUNNER_HEARTBEAT_SECONDS)

    def apply() -> dict[str, Any]:
        return sync_apply(
            scope=scope, agent=data["agent"], known=data["known"], reports=data["attempts"], cleaned=data["cleaned"]
        )

    if wait <= 0:
        answer = await db_threads.agent_run(apply)
    else:  # a long-poll: listening from the start, so no ring is missed while it looks or holds off
        async with realtime.listening(AGENT_DOORBELL) as channel:
            await _hold_off(scope)
            answer = await db_threads.agent_run(apply)
            if not sync_has_news(answer, data["stopping"]):
                answer = await _hold(scope, data, wait, channel) or answer
        if scope.agent_name:
            realtime.long_poll_answered()
            if answer["assignments"]:
                _last_news[scope.agent_name] = time.monotonic()
    answer["poll_after"] = 0
    return JsonResponse(answer)


async def _hold_off(scope: SyncScope) -> None:
    """Within COALESCE_SECONDS of the agent's last answer with news, wait for the rest of it (rings queue)."""
    if scope.agent_name and (pause := _last_news.get(scope.agent_name, 0.0) + COALESCE_SECONDS - time.monotonic()) > 0:
        await asyncio.sleep(pause)


async def _hold(scope: SyncScope, data: dict[str, Any], wait: float, channel: str | None) -> dict[str, Any] | None:
    """Wait for the doorbell or the next database look that finds news; the answer then, or None at the end."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait
    names = set(data["known"])
    while (remaining := deadline - loop.time()) > 0:
        failed = channel is not None
        channel = await realtime.ring_or_timeout(channel, min(RECHECK_SECONDS, remaining))
        if failed and channel is None:  # the layer failed: look at the database on the clock instead
            await asyncio.sleep(min(1.0, max(0.0, deadline - loop.time())))
        await _hold_off(scope)
        answer = await db_threads.agent_run(sync_answer, scope=scope, names=names)
        if sync_has_news(answer, data["stopping"]):
            return answer
    return None


def _error(status: int, code: str, message: str) -> JsonResponse:
    return JsonResponse(error_body(code, message, []), status=status)
