"""Benchmarks reuse the test fixtures (the alice/bob world, a real Daphne)."""

from tests.conftest import api, daphne, live, server_logs, world  # noqa: F401
from tests.portal.conftest import make  # noqa: F401, E402
from tests.portal.test_browser import open_page, worker  # noqa: F401, E402
