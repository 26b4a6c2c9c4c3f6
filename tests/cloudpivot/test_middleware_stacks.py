"""One middleware stack per kind of caller (cloudpivot/handlers.py): each keeps the protections its callers need.

The clients here go through the stack the servers choose for the request (tests/stack_client.py).
"""

from __future__ import annotations

import asyncio
import io
import json

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from cloudpivot import credentials
from cloudpivot.accounts.models import AuditEntry
from cloudpivot.handlers import MACHINE, PAGES, TOKEN_API, stack_for
from clusters.backends.local import agent_name, connection_runs_dir
from tests.builders import hello_spec
from tests.stack_client import routed


@pytest.mark.parametrize(
    ("path", "authorization", "stack"),
    [
        ("/runner/v2/sync", "Bearer cpa_x", MACHINE),
        ("/runner/v1/attempts/x/events", "", MACHINE),
        ("/healthz", "", MACHINE),
        ("/readyz", "", MACHINE),
        ("/api/v1/tasks", "Bearer cp_x", TOKEN_API),
        ("/api/v1/tasks", "", PAGES),  # a session cookie, or nobody: the full stack, CSRF included
        ("/api/v1/tasks", "Basic eDp5", PAGES),
        ("/api/docs/", "Bearer cp_x", PAGES),  # an HTML page keeps the page stack
        ("/tasks/", "", PAGES),
        ("/admin/", "Bearer cp_x", PAGES),
    ],
)
def test_it_chooses_the_stack_by_path_and_credential(path, authorization, stack):
    assert stack_for(path, authorization) == stack


def test_a_token_write_is_audited_and_carries_the_page_headers(api, world):
    client = api("bob")
    response = client.post("/api/v1/tasks", hello_spec(), format="json")
    assert response.status_code == 201, response.content
    assert client.handler.last_stack == TOKEN_API
    entry = AuditEntry.objects.get()
    assert (entry.actor, entry.method, entry.via, entry.object_ref) == (world.bob, "POST", "api", response.json()["id"])
    assert "default-src 'self'" in response["Content-Security-Policy"]
    assert response["X-Frame-Options"] == "DENY"
    assert "Set-Cookie" not in response and "Cookie" not in response.get("Vary", "")


def test_a_token_read_is_not_audited_and_a_bad_token_is_refused(api, world):
    client = api("bob")
    assert client.get("/api/v1/tasks").status_code == 200
    assert AuditEntry.objects.count() == 0
    forged = routed(APIClient())
    forged.credentials(HTTP_AUTHORIZATION="Bearer cp_not-a-token")
    assert forged.post("/api/v1/tasks", hello_spec(), format="json").status_code == 401
    assert AuditEntry.objects.count() == 0


def test_a_cookie_api_write_still_needs_the_csrf_token(world):
    client = routed(Client(enforce_csrf_checks=True))
    client.force_login(world.bob)
    refused = client.post("/api/v1/tasks", json.dumps(hello_spec()), content_type="application/json")
    assert refused.status_code == 403
    assert "CSRF" in refused.content.decode()
    page = client.get("/tasks/new")  # any form page hands out the CSRF cookie
    token = page.cookies["csrftoken"].value
    accepted = client.post(
        "/api/v1/tasks", json.dumps(hello_spec()), content_type="application/json", headers={"X-CSRFToken": token}
    )
    assert accepted.status_code == 201, accepted.content
    assert client.handler.last_stack == PAGES
    assert AuditEntry.objects.get().actor == world.bob


def test_pages_keep_their_policy_and_session(pages):
    client = pages("bob")
    response = client.get("/tasks/")
    assert response.status_code == 200
    assert client.handler.last_stack == PAGES
    assert "script-src 'self'" in response["Content-Security-Policy"]
    assert response.wsgi_request.user.username == "bob"


def test_the_runner_api_runs_without_cookies_or_audit(world):
    client = routed(APIClient())
    name = agent_name(connection_runs_dir(world.local))
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {credentials.agent_credential(name=name)}")
    response = client.post("/runner/v2/sync", {"protocol": 2, "agent": {"name": name}}, format="json")
    assert response.status_code == 200, response.content
    assert client.handler.last_stack == MACHINE
    assert not hasattr(response.wsgi_request, "session")
    assert "Set-Cookie" not in response and "Content-Security-Policy" not in response
    assert AuditEntry.objects.count() == 0
    client.credentials(HTTP_AUTHORIZATION="Bearer cpa_forged")
    assert client.post("/runner/v2/sync", {"protocol": 2, "agent": {"name": name}}, format="json").status_code == 401


def test_submit_get_and_list_make_few_queries(api, world):
    client = api("bob")
    client.post("/api/v1/tasks", hello_spec(), format="json")  # the token's last_used_at is written once a minute
    # token, the connection and the project bob submits through (one query), quotas; INSERT task (with its queue
    # position), INSERT event, INSERT its feed copy, INSERT the audit entry (in the test's transaction: no
    # BEGIN/COMMIT, no commit hooks)
    with CaptureQueriesContext(connection) as submit:
        task = client.post("/api/v1/tasks", hello_spec(), format="json").json()
    with CaptureQueriesContext(connection) as get:
        client.get(f"/api/v1/tasks/{task['id']}")
    writes = [q["sql"].split()[0] for q in submit.captured_queries if q["sql"].startswith(("INSERT", "UPDATE"))]
    assert writes == ["INSERT"] * 4, submit.captured_queries  # task, its first event, the feed copy, the audit
    statements = [q["sql"][:80] for q in submit.captured_queries if not q["sql"].startswith(("SAVEPOINT", "RELEASE"))]
    assert len(statements) <= 8, statements  # not one membership query per project the cloud is granted to
    # token, the user's projects, the task, queue position
    assert len(get.captured_queries) <= 4, [q["sql"][:80] for q in get.captured_queries]


def test_the_asgi_application_answers_healthz_through_the_machine_stack(db):
    from cloudpivot.asgi import application

    overrides = {"method": "GET", "path": "/healthz", "raw_path": b"/healthz", "headers": [(b"host", b"127.0.0.1")]}
    status, headers, body = asgi_call(application, overrides, [])
    assert status == 200
    assert json.loads(body) == {"status": "ok"}
    assert b"content-security-policy" not in headers


def test_the_wsgi_application_chooses_the_same_stacks(db):
    from cloudpivot.wsgi import application

    answers = []
    environ = {
        "REQUEST_METHOD": "GET",
        "PATH_INFO": "/healthz",
        "SERVER_NAME": "127.0.0.1",
        "SERVER_PORT": "8000",
        "HTTP_HOST": "127.0.0.1",
        "wsgi.url_scheme": "http",
        "wsgi.input": io.BytesIO(b""),
        "wsgi.errors": io.StringIO(),
    }
    body = b"".join(application(environ, lambda status, headers: answers.append((status, dict(headers)))))
    status, headers = answers[0]
    assert status.startswith("200") and json.loads(body) == {"status": "ok"}
    assert "Content-Security-Policy" not in headers
    assert application.handlers[PAGES] is not application.handlers[MACHINE]


def asgi_call(application, scope_overrides: dict, body_chunks: list[bytes]) -> tuple[int, dict[bytes, bytes], bytes]:
    """One HTTP request through an ASGI application as uvicorn makes it: (status, headers, body)."""

    sent = []
    messages = [
        {"type": "http.request", "body": chunk, "more_body": index < len(body_chunks) - 1}
        for index, chunk in enumerate(body_chunks or [b""])
    ]

    async def receive():
        if messages:
            return messages.pop(0)
        await asyncio.sleep(3600)
        return {"type": "http.disconnect"}

    async def send(message):
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "scheme": "http",
        "raw_path": b"",
        "root_path": "",
        "query_string": b"",
        "client": ("10.1.2.3", 41000),
        "server": ("127.0.0.1", 8000),
        **scope_overrides,
    }
    asyncio.run(application(scope, receive, send))
    return sent[0]["status"], dict(sent[0]["headers"]), b"".join(m.get("body", b"") for m in sent[1:])


@pytest.mark.django_db(transaction=True)
def test_the_token_api_under_asgi_goes_through_the_wsgi_bridge_with_the_same_answers(world, settings):
    """A submit in two body chunks, then a filtered list: what the client and the audit see is what Django's ASGI
    handler gave (status, Location, the page headers, the client's address), in one hop to the sync thread."""
    import cloudpivot.asgi  # noqa: F401 - django set up as the server does
    from cloudpivot.handlers import RoutedASGIHandler
    from cloudpivot.wsgi_bridge import WSGIBridge

    settings.TOKEN_API_WSGI = True  # CLOUDPIVOT_TOKEN_API_WSGI=true
    application = RoutedASGIHandler()
    assert isinstance(application.handlers[TOKEN_API], WSGIBridge)
    headers = [
        (b"host", b"127.0.0.1:8000"),
        (b"authorization", f"Bearer {world.tokens['bob']}".encode()),
        (b"content-type", b"application/json"),
    ]
    body = json.dumps(hello_spec(name="bridged")).encode()
    status, answer, content = asgi_call(
        application, {"method": "POST", "path": "/api/v1/tasks", "headers": headers}, [body[:10], body[10:]]
    )
    assert status == 201, content
    task = json.loads(content)
    assert task["name"] == "bridged" and answer[b"location"] == f"/api/v1/tasks/{task['id']}".encode()
    assert b"default-src 'self'" in answer[b"content-security-policy"] and answer[b"x-frame-options"] == b"DENY"
    entry = AuditEntry.objects.get()
    assert (entry.actor, entry.method, entry.object_ref) == (world.bob, "POST", task["id"])
    assert entry.remote_addr == "10.1.2.3"
    status, _, content = asgi_call(
        application,
        {"method": "GET", "path": "/api/v1/tasks", "query_string": b"state=PENDING&limit=5", "headers": headers},
        [],
    )
    assert status == 200 and [row["id"] for row in json.loads(content)["results"]] == [task["id"]]
    status, _, content = asgi_call(
        application,
        {"method": "GET", "path": "/api/v1/tasks", "query_string": b"state=SUCCEEDED", "headers": headers},
        [],
    )
    assert status == 200 and json.loads(content)["results"] == []
