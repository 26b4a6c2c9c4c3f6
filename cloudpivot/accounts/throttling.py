"""Requests per API token: at most API_TOKEN_RATE (CLOUDPIVOT_API_TOKEN_RATE), then 429 with Retry-After.

A fixed window per token, counted in the cache with one atomic increment (shared by every web process when the
cache is Redis; per process on the embedded default). DRF's SimpleRateThrottle keeps every request's time in one
cache value, read and rewritten on every call; a counter costs the same at any rate. When the cache cannot be
reached the request goes through: the limit protects the service, it must not become a way to stop it.
Only bearer tokens are counted: the portal's session calls and the Runner API have limits of their own.
"""

from __future__ import annotations

import logging
import re
import time

from django.conf import settings
from django.core.cache import cache
from rest_framework.throttling import BaseThrottle

from cloudpivot.accounts.models import ApiToken

logger = logging.getLogger(__name__)
PERIODS = {"s": 1, "sec": 1, "second": 1, "m": 60, "min": 60, "minute": 60, "h": 3600, "hour": 3600}


def parse_rate(rate: str) -> tuple[int, int] | None:
    """'1200/min' → (1200, 60); empty or a count of 0 → None (no limit). ValueError for anything else."""
    rate = (rate or "").strip()
    match = re.fullmatch(r"(\d+)\s*/\s*([a-z]+)", rate)
    if not rate or rate == "0":
        return None
    if not match or match.group(2) not in PERIODS:
        raise ValueError(f"{rate!r} is not a rate: write '<count>/<s|min|h>', e.g. '1200/min'")
    count = int(match.group(1))
    return (count, PERIODS[match.group(2)]) if count > 0 else None


class TokenRateThrottle(BaseThrottle):
    def __init__(self) -> None:
        self.retry_after = 1.0

    def allow_request(self, request, view) -> bool:
        token = request.auth
        rate = parse_rate(settings.API_TOKEN_RATE)
        if rate is None or not isinstance(token, ApiToken):
            return True
        count, period = rate
        now = time.time()
        window = int(now // period)
        key = f"api-token-rate:{token.token_hash[:32]}:{window}"  # by hash: a reused row id never inherits a count
        try:
            cache.add(key, 0, timeout=period + 5)
            used = cache.incr(key)
        except ValueError:  # the window's key expired between the two calls: a new window
            return True
        except Exception as exc:  # the cache is away (Redis stopped): serve rather than refuse everyone
            logger.warning("API token rate not counted: the cache failed (%s: %s)", type(exc).__name__, exc)
            return True
        if used <= count:
            return True
        self.retry_after = (window + 1) * period - now
        return False

    def wait(self) -> float:
        return self.retry_after
