"""The database goes away under a running server (issue 16, item 2): 503 with Retry-After, never a 500.

A PostgreSQL instance of the test's own (initdb + pg_ctl in a temporary directory, on a free port; never the
machine's shared server) serves a real web server process. The test stops it: the API answers 503 with the
error shape and Retry-After, pages a plain 503 page, /readyz 503 with its reason, /healthz still 200. It
starts it again: the same requests succeed.
"""

from __future__ import annotations

import json

import pytest

from cloudpivot.credentials import agent_credential
from tests import helpers
from tests.plugins.dependencies import http

pytestmark = [pytest.mark.e2e]


def test_with_the_database_stopped_the_server_answers_503_and_recovers(private_postgres, tmp_path):
    port = helpers.free_port()
    env = helpers.server_environment(port=port, runs_dir=tmp_path / "runs") | {
        "DATABASE_URL": private_postgres.url("cloudpivot"),
        # How long a request waits for a pooled connection before it gives up (30 s by default).
        "CLOUDPIVOT_DB_POOL_TIMEOUT": "3",
    }
    helpers.manage("migrate", "--noinput", "-v", "0", env=env)
    helpers.manage(
        "shell", "-c", "from django.contrib.auth.models import User; User.objects.create_user('dora')", env=env
    )
    token = helpers.manage("apitoken", "create", "dora", env=env).strip().splitlines()[-1]
    log = tmp_path / "web.log"
    web = helpers.start_daphne(port=port, env=env, log=log)
    base = f"http://127.0.0.1:{port}"
    api = {"Authorization": f"Bearer {token}"}
    page = {"Cookie": "sessionid=abcdefghijklmnopqrstuvwxyz012345"}  # the session is read from the database
    try:
        assert http(base + "/api/v1/tasks", api)[0] == 200
        assert http(base + "/readyz")[0] == 200
        page_status = http(base + "/tasks/", page)[0]
        assert page_status < 500

        private_postgres.stop()
        status, headers, body = http(base + "/api/v1/tasks", api)
        assert status == 503, body
        assert headers["Retry-After"].isdigit()
        assert headers["Content-Type"] == "application/json"
        assert json.loads(body)["code"] == "database_unavailable"
        agent = {"Authorization": f"Bearer {agent_credential(name='local-agent')}"}
        status, headers, body = http(base + "/runner/v2/sync", agent, {"protocol": 2, "agent": {"name": "local-agent"}})
        assert (status, json.loads(body)["code"]) == (503, "database_unavailable")
        status, headers, body = http(base + "/tasks/", page)
        assert status == 503, body
        assert headers["Content-Type"].startswith("text/html") and "Retry-After" in headers
        assert b"briefly unavailable" in body
        status, headers, body = http(base + "/readyz")
        assert status == 503 and json.loads(body)["reason"] == "the database is not reachable"
        assert http(base + "/healthz")[0] == 200  # alive: no reason to restart the process

        private_postgres.start()
        helpers.wait_for(
            lambda: http(base + "/api/v1/tasks", api)[0] == 200,
            timeout=60,
            interval=1,
            what="the API to answer 200 again",
        )
        assert http(base + "/readyz")[0] == 200
        assert http(base + "/tasks/", page)[0] == page_status
    finally:
        helpers.stop_process_group(web)
    text = log.read_text()
    assert "Internal Server Error" not in text, text[-3000:]
