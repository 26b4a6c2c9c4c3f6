"""Lookups a process may trust for a second: a project's quotas, which a submit reads to refuse what never fits.

A sequential client submitting back to back asked the database the same quotas each time. Each `Recent` keeps
answers for `ttl` seconds (settings.SUBMISSION_CACHE_SECONDS, 0 turns it off): in this process a save or delete
of a quota empties every `Recent` at once (`recent_clear`, connected in cloudpivot/accounts/apps.py); in another
process a change is seen at most `ttl` later. Admission checks quotas again against the database whatever was
read here, so a stale answer can let a submit be accepted, never a task run beyond its quota. What a submit
reads about its grant and membership is never kept: admission does not check those again
(clusters/selectors.py, submission_target).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable
from typing import Any

from django.conf import settings

TTL_DEFAULT = 1.0
LIMIT = 10_000  # bounded: many users in a second is not what this is for

_every: list[Recent] = []
_generation = 0  # counts clears: an answer computed across one is not kept (it may predate the change)


class Recent:
    def __init__(self) -> None:
        self._answers: dict[Hashable, tuple[float, Any]] = {}
        self._lock = threading.Lock()
        _every.append(self)

    def get(self, key: Hashable, compute: Callable[[], Any]) -> Any:
        """The answer for `key` from the last `ttl` seconds, or `compute()`'s (kept; exceptions are not)."""
        ttl = getattr(settings, "SUBMISSION_CACHE_SECONDS", TTL_DEFAULT)
        now = time.monotonic()
        found = self._answers.get(key)
        if found is not None and now - found[0] < ttl:
            return found[1]
        generation = _generation
        answer = compute()
        if ttl > 0:
            with self._lock:
                if generation != _generation:
                    return answer
                if len(self._answers) > LIMIT:
                    self._answers.clear()
                self._answers[key] = (now, answer)
        return answer

    def clear(self) -> None:
        with self._lock:
            self._answers.clear()


def recent_clear(**kwargs: Any) -> None:
    """Forget every answer of every `Recent` (a post_save / post_delete / m2m_changed receiver)."""
    global _generation
    _generation += 1
    for recent in _every:
        recent.clear()
