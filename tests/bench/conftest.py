"""Benchmarks reuse the test fixtures (the alice/bob world, a real Daphne)."""

from tests.conftest import api, daphne, live, server_logs, world  # noqa: F401
