"""Tokens, projects, quotas through the API; the audit trail of every mutating request."""

from __future__ import annotations

import datetime as dt
import json

from django.utils import timezone

from cloudpivot.accounts.models import ApiToken, AuditEntry, Quota
from tests.builders import hello_spec


def test_a_token_is_shown_once_works_and_is_revoked(api, world):
    created = api("bob").post("/api/v1/tokens", {"name": "billing system", "expires_in_days": 30}, format="json")
    assert created.status_code == 201
    plain = created.json()["token"]
    listed = api("bob").get("/api/v1/tokens").json()
    assert {t["name"] for t in listed} == {"test", "billing system"}
    assert plain not in json.dumps(listed) and all("token" not in t for t in listed)
    client = api(None)
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {plain}")
    assert client.get("/api/v1/tasks").status_code == 200
    assert api("bob").delete(f"/api/v1/tokens/{created.json()['id']}").status_code == 204
    assert client.get("/api/v1/tasks").status_code == 401
    assert ApiToken.objects.filter(name="billing system").get().revoked_at is not None


def test_an_expired_token_is_refused_with_401_and_words(api, world):
    token = ApiToken.objects.get(user=world.bob)
    assert api("bob").get("/api/v1/tasks").status_code == 200  # the same token, before it expires
    ApiToken.objects.filter(pk=token.pk).update(expires_at=timezone.now() - dt.timedelta(seconds=1))
    response = api("bob").get("/api/v1/tasks")
    assert response.status_code == 401
    assert response.json()["message"] == "Invalid, expired or revoked token."
    assert response["WWW-Authenticate"] == "Bearer"
    refused = api("bob").post("/api/v1/tasks", data=json.dumps(hello_spec()), content_type="application/json")
    assert refused.status_code == 401 and not world.bob.tasks.exists()


def test_tokens_of_others_are_invisible(api, world):
    alices = ApiToken.objects.get(user=world.alice)
    assert api("bob").delete(f"/api/v1/tokens/{alices.pk}").status_code == 404
    alices.refresh_from_db()
    assert alices.revoked_at is None


def test_projects_and_quotas_show_my_role_and_usage(api, world):
    Quota.objects.create(project=world.alpha, connection=world.local, max_tasks=3)
    api("bob").post("/api/v1/tasks", data=json.dumps(hello_spec()), content_type="application/json")
    projects = api("rita").get("/api/v1/projects").json()
    assert [(p["slug"], p["role"]) for p in projects] == [("alpha", "reader")]
    quota = api("rita").get("/api/v1/quotas").json()[0]
    assert (quota["cloud"], quota["max_tasks"], quota["used"]["tasks"]) == ("local", 3, 0)  # PENDING holds nothing
    assert api("charlie").get("/api/v1/quotas").json() == []
    assert api("charlie").get("/api/v1/projects/alpha").status_code == 404


def test_every_mutating_request_is_audited_without_its_body(api, world):
    api("bob").post(
        "/api/v1/tasks", data=json.dumps(hello_spec(env={"PASSWORD": "s3cret"})), content_type="application/json"
    )
    task_id = AuditEntry.objects.get(action="tasks-api:task-list").object_ref
    api("rita").post(f"/api/v1/tasks/{task_id}/cancel")
    api("bob").get("/api/v1/tasks")  # reads are not audited
    entries = list(
        AuditEntry.objects.order_by("id").values_list("actor_name", "via", "action", "outcome", "status_code")
    )
    assert entries == [
        ("bob", "api", "tasks-api:task-list", "ok", 201),
        ("rita", "api", "tasks-api:task-cancel", "refused", 403),
    ]
    assert "s3cret" not in json.dumps(list(AuditEntry.objects.values()), default=str)
    assert AuditEntry.objects.filter(remote_addr="127.0.0.1").count() == 2


def test_admin_actions_are_audited_too(client, world):
    from django.contrib.auth import get_user_model

    root = get_user_model().objects.create_superuser("root", "root@example.org", "pw")
    client.force_login(root)
    token = ApiToken.objects.get(user=world.bob)
    client.post("/admin/accounts/apitoken/", {"action": "revoke", "_selected_action": [str(token.pk)]})
    entry = AuditEntry.objects.get()
    assert (entry.actor_name, entry.via, entry.details) == ("root", "admin", {"admin_action": "revoke"})
    assert client.get("/admin/accounts/auditentry/").status_code == 200
    assert client.get(f"/admin/accounts/auditentry/{entry.pk}/change/").status_code == 200


def test_an_expiring_token_cannot_mint_a_token_that_outlives_it(world):
    from rest_framework.test import APIClient

    from cloudpivot.accounts.services import api_token_create

    short, plain = api_token_create(user=world.bob, name="short", expires_in=dt.timedelta(days=2))
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {plain}")
    longer = client.post("/api/v1/tokens", {"name": "longer", "expires_in_days": 30}, format="json")
    assert longer.status_code == 400
    assert longer.json()["errors"][0]["field"] == "expires_in_days" and "cannot outlive" in longer.json()["message"]
    forever = client.post("/api/v1/tokens", {"name": "no expiry asked"}, format="json")
    assert forever.status_code == 201 and forever.json()["expires_at"] is not None
    assert ApiToken.objects.get(name="no expiry asked").expires_at == short.expires_at
    within = client.post("/api/v1/tokens", {"name": "within", "expires_in_days": 1}, format="json")
    assert within.status_code == 201
    assert ApiToken.objects.get(name="within").expires_at < short.expires_at


def test_a_token_made_with_a_token_is_revoked_with_it_and_so_are_its_own(world):
    from rest_framework.test import APIClient

    from cloudpivot.accounts.services import api_token_create

    def client_with(plain: str) -> APIClient:
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {plain}")
        return client

    parent, plain = api_token_create(user=world.bob, name="leaked")
    child = client_with(plain).post("/api/v1/tokens", {"name": "child"}, format="json").json()
    grandchild = client_with(child["token"]).post("/api/v1/tokens", {"name": "grandchild"}, format="json").json()
    other, other_plain = api_token_create(user=world.bob, name="made in the portal")
    assert client_with(grandchild["token"]).get("/api/v1/tasks").status_code == 200

    assert client_with(other_plain).delete(f"/api/v1/tokens/{parent.pk}").status_code == 204
    for made in (child, grandchild):
        assert client_with(made["token"]).get("/api/v1/tasks").status_code == 401, made["name"]
    revoked = set(ApiToken.objects.filter(revoked_at__isnull=False).values_list("name", flat=True))
    assert revoked == {"leaked", "child", "grandchild"}
    assert client_with(other_plain).get("/api/v1/tasks").status_code == 200


def test_an_expired_token_is_refused_with_words(world):
    from rest_framework.test import APIClient

    from cloudpivot.accounts.services import api_token_create

    token, plain = api_token_create(user=world.bob, name="old", expires_in=dt.timedelta(days=1))
    ApiToken.objects.filter(pk=token.pk).update(expires_at=timezone.now() - dt.timedelta(seconds=1))
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {plain}")
    response = client.get("/api/v1/tasks")
    assert response.status_code == 401 and "expired" in response.json()["message"].lower()


def test_the_admin_login_is_throttled_like_the_portal_login(client, db):
    from django.contrib.auth import get_user_model

    # An account and a client address of its own (a documentation address, no traffic): the throttle outlives the test.
    get_user_model().objects.create_superuser("mallet", "mallet@example.org", "pw-mallet")
    for i in range(6):
        client.post("/admin/login/", {"username": "mallet", "password": f"wrong-{i}"}, REMOTE_ADDR="192.0.2.8")
    response = client.post("/admin/login/", {"username": "mallet", "password": "pw-mallet"}, REMOTE_ADDR="192.0.2.8")
    assert b"Too many failed login attempts" in response.content
    assert "_auth_user_id" not in client.session


def test_the_admin_login_still_lets_the_right_password_in(client, db):
    from django.contrib.auth import get_user_model

    get_user_model().objects.create_superuser("root2", "root2@example.org", "pw-root2")
    client.post("/admin/login/", {"username": "root2", "password": "wrong"}, REMOTE_ADDR="192.0.2.9")
    response = client.post("/admin/login/", {"username": "root2", "password": "pw-root2"}, REMOTE_ADDR="192.0.2.9")
    assert response.status_code == 302 and client.session["_auth_user_id"]
