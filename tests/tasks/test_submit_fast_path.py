"""The submit's hot path (issue 11): the quotas kept for a second and forgotten at once on a change in this process,
the task, its event and its feed copy in one transaction, and the audit entry written in the view's own hop."""

from __future__ import annotations

import asyncio
import json
from decimal import Decimal

import pytest
from django.db import connection
from django.http import HttpResponse
from django.test import RequestFactory
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIRequestFactory, force_authenticate

from cloudpivot.accounts.audit import AuditMiddleware
from cloudpivot.accounts.models import AuditEntry, Membership, Quota
from notifications.models import FeedEvent
from tasks.api.views import TaskViewSet
from tasks.models import Task
from tests.builders import hello_spec

URL = "/api/v1/tasks"


def post(client, body):
    return client.post(URL, data=json.dumps(body), content_type="application/json")


def lookups(queries) -> list[str]:
    """The statements of a submit that ask for its connection, project or quotas."""
    tables = ("clusters_cloudconnection_projects", "accounts_quota", "accounts_membership")
    return [
        q["sql"]
        for q in queries.captured_queries
        if q["sql"].startswith("SELECT") and any(t in q["sql"] for t in tables)
    ]


def test_a_second_submit_asks_again_for_its_grant_but_not_for_its_quotas(api, world):
    client = api("bob")
    assert post(client, hello_spec()).status_code == 201
    with CaptureQueriesContext(connection) as queries:
        response = post(client, hello_spec())
    assert response.status_code == 201, response.json()
    assert len(lookups(queries)) == 1 and "accounts_quota" not in lookups(queries)[0]  # the grant with its project
    task = Task.objects.get(pk=response.json()["id"])
    assert (task.project, task.connection, task.last_event_seq) == (world.alpha, world.local, 1)
    event = task.events.get()
    assert event.type == "submitted" and event.created_at is not None
    feed = FeedEvent.objects.get(task_id=task.pk)
    assert (feed.type, feed.source, feed.data["task_state"]) == ("task.submitted", f"task-event:{event.pk}", "PENDING")


def test_with_the_cache_off_every_submit_looks_again(api, world, settings):
    settings.SUBMISSION_CACHE_SECONDS = 0
    client = api("bob")
    assert post(client, hello_spec()).status_code == 201
    with CaptureQueriesContext(connection) as queries:
        assert post(client, hello_spec()).status_code == 201
    assert len(lookups(queries)) == 2  # the grant with its project, the quotas


def test_a_membership_removed_refuses_the_next_submit_at_once(api, world):
    client = api("bob")
    assert post(client, hello_spec()).status_code == 201
    Membership.objects.get(user=world.bob, project=world.alpha).delete()
    response = post(client, hello_spec())
    assert response.status_code in (400, 403), response.json()


def test_a_grant_withdrawn_refuses_the_next_submit_at_once(api, world):
    client = api("bob")
    assert post(client, hello_spec()).status_code == 201
    world.local.projects.remove(world.alpha)
    response = post(client, hello_spec())
    assert response.status_code in (400, 403), response.json()
    assert response.json()["errors"][0]["field"] == "cloud"


def test_a_quota_lowered_refuses_the_next_submit_at_once_naming_the_field(api, world):
    client = api("bob")
    assert post(client, hello_spec()).status_code == 201
    Quota.objects.create(project=world.alpha, max_vcpu=Decimal("0.5"))
    response = post(client, hello_spec())
    assert response.status_code == 422, response.json()
    assert response.json()["errors"][0]["field"] == "resources.cpu"


@pytest.mark.django_db(transaction=True)
def test_the_view_writes_its_own_audit_entry_and_the_middleware_no_second_one(world):
    view = TaskViewSet.as_view({"post": "create"})
    request = APIRequestFactory().post(URL, hello_spec(name="audited"), format="json", REMOTE_ADDR="10.9.8.7")
    force_authenticate(request, user=world.bob)
    response = view(request)  # no middleware at all: the view itself recorded it
    assert response.status_code == 201
    entry = AuditEntry.objects.get()
    assert (entry.actor, entry.method, entry.status_code, entry.outcome) == (world.bob, "POST", 201, "ok")
    assert entry.object_ref == str(response.data["id"]) and entry.remote_addr == "10.9.8.7"
    assert request.audit_recorded is True

    refused = APIRequestFactory().post(URL, {"cloud": "local"}, format="json")
    force_authenticate(refused, user=world.bob)
    assert view(refused).status_code == 400
    assert AuditEntry.objects.filter(outcome="refused", status_code=400).count() == 1

    async def answered(request):
        return HttpResponse(status=201)

    middleware = AuditMiddleware(answered)  # the async path uvicorn takes
    for recorded in (True, False):
        again = RequestFactory().post(URL)
        again.user = world.bob
        if recorded:
            again.audit_recorded = True
        asyncio.run(middleware(again))
    assert AuditEntry.objects.count() == 3  # the two views' entries and the one not recorded before
