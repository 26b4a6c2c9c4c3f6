"""The project's settings with tests/bench/floor_urls.py as the URL conf (bench_request_floor.py only)."""

from cloudpivot.settings.base import *  # noqa: F403

ROOT_URLCONF = "tests.bench.floor_urls"
