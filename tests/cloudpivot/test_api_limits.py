"""The API's 429s (issue 34, item 1) through the test client: the per-token rate, the long-poll cap, the
rate setting's check. tests/e2e/test_api_capacity.py shows the same from outside, under load."""

from __future__ import annotations

import pytest
from django.core.cache import cache
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from cloudpivot.accounts.throttling import parse_rate
from notifications.api import long_poll


def test_it_reads_a_rate_and_refuses_anything_else():
    assert parse_rate("1200/min") == (1200, 60)
    assert parse_rate("5/s") == (5, 1)
    assert parse_rate("10 / h") == (10, 3600)
    assert parse_rate("") is None and parse_rate("0") is None and parse_rate("0/min") is None
    for bad in ("many", "5/fortnight", "-1/min", "1.5/s"):
        with pytest.raises(ValueError, match="not a rate"):
            parse_rate(bad)


def test_a_bad_rate_is_a_startup_error(settings):
    settings.API_TOKEN_RATE = "lots"
    with pytest.raises(SystemCheckError, match="CLOUDPIVOT_API_TOKEN_RATE is invalid"):
        call_command("check")


def test_a_token_over_its_rate_gets_429_and_others_do_not(world, api, settings):
    settings.API_TOKEN_RATE = "3/min"
    cache.clear()
    bob = api("bob")
    assert [bob.get("/api/v1/tasks").status_code for _ in range(3)] == [200, 200, 200]
    refused = bob.get("/api/v1/tasks")
    assert refused.status_code == 429
    assert 1 <= int(refused["Retry-After"]) <= 60
    assert refused.json()["code"] == "throttled" and "at most 3/min" in refused.json()["message"]
    assert api("alice").get("/api/v1/tasks").status_code == 200  # another token counts on its own
    settings.API_TOKEN_RATE = "0"
    assert bob.get("/api/v1/tasks").status_code == 200  # 0 lifts the limit


def test_a_user_over_the_long_poll_cap_gets_429_with_retry_after(world, api, settings):
    settings.FEED_LONG_POLLS_PER_USER = 2
    held = [long_poll.Hold(user=world.bob, where=long_poll.FeedFilter(), after=0, limit=1, wait=20) for _ in range(2)]
    for hold in held:
        hold.claim()
    try:
        refused = api("bob").get("/api/v1/events?after=999999&wait=5")
        assert refused.status_code == 429
        assert refused.json()["code"] == "too_many_long_polls" and "at most 2" in refused.json()["message"]
        assert 15 <= int(refused["Retry-After"]) <= 20  # when the first held one ends at the latest
        assert api("bob").get("/api/v1/events?after=0").status_code == 200  # a read without wait is no long-poll
        assert api("alice").get("/api/v1/events?after=999999&wait=0.3").json()["events"] == []  # alice's own slots
    finally:
        for hold in held:
            hold.release()
    assert long_poll.held_count(world.bob.pk) == 0
    assert api("bob").get("/api/v1/events?after=999999&wait=0.3").status_code == 200
    assert long_poll.held_count(world.bob.pk) == 0  # released after the answer
