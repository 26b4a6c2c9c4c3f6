"""The Django admin: every model page renders, state stays read-only, actions call the services."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from cloudpivot.accounts.models import ApiToken
from tasks.models import Task
from tasks.services.submission import task_submit
from tests.builders import hello_spec


@pytest.fixture
def staff_client(client, world):
    admin = get_user_model().objects.create_superuser("root", "root@example.org", "pw")
    client.force_login(admin)
    return client


@pytest.mark.parametrize(
    "path",
    [
        "/admin/",
        "/admin/accounts/project/",
        "/admin/accounts/membership/",
        "/admin/accounts/apitoken/",
        "/admin/clusters/cloudconnection/",
        "/admin/tasks/task/",
    ],
)
def test_admin_pages_render(staff_client, path):
    assert staff_client.get(path).status_code == 200


def test_task_change_page_shows_attempts_and_events_read_only(staff_client, world):
    task, _ = task_submit(user=world.bob, document=hello_spec())
    page = staff_client.get(f"/admin/tasks/task/{task.pk}/change/")
    assert page.status_code == 200
    assert b'name="state"' not in page.content  # read-only, never a form field


def test_the_cancel_action_goes_through_the_service(staff_client, world):
    task, _ = task_submit(user=world.bob, document=hello_spec())
    response = staff_client.post("/admin/tasks/task/", {"action": "cancel", "_selected_action": [str(task.pk)]})
    assert response.status_code == 302
    task.refresh_from_db()
    assert task.state == "CANCELLED"
    assert task.events.filter(data__to="CANCELLED").exists()


def test_tokens_are_revoked_not_shown(staff_client, world):
    token = ApiToken.objects.get(user=world.bob)
    page = staff_client.get(f"/admin/accounts/apitoken/{token.pk}/change/")
    assert world.tokens["bob"].encode() not in page.content and token.token_hash.encode() not in page.content
    staff_client.post("/admin/accounts/apitoken/", {"action": "revoke", "_selected_action": [str(token.pk)]})
    token.refresh_from_db()
    assert token.revoked_at is not None
    assert Task.objects.count() == 0


def test_changing_a_tasks_owner_goes_through_the_service_and_is_logged(staff_client, world):
    from cloudpivot.accounts.models import AuditEntry

    task, _ = task_submit(user=world.bob, document=hello_spec())
    url = f"/admin/tasks/task/{task.pk}/change/"
    page = staff_client.get(url)
    assert b'name="owner"' in page.content
    staff_client.post(url, form_data(page.content.decode()) | {"owner": world.alice.pk})
    task.refresh_from_db()
    assert task.owner == world.alice
    event = task.events.get(type="owner_changed")
    assert event.data == {"from": "bob", "to": "alice", "by": "root"}
    assert AuditEntry.objects.filter(via="admin", object_ref=str(task.pk), outcome="ok").exists()
    # Someone outside the project cannot become the owner.
    staff_client.post(url, form_data(staff_client.get(url).content.decode()) | {"owner": world.charlie.pk})
    task.refresh_from_db()
    assert task.owner == world.alice


def form_data(html: str) -> dict[str, str]:
    """The inputs of an admin change form as a browser would send them (inline management forms included)."""
    from html.parser import HTMLParser

    data: dict[str, str] = {}

    class Inputs(HTMLParser):
        def handle_starttag(self, tag, attrs):
            attrs = dict(attrs)
            if tag == "input" and attrs.get("name") and attrs.get("type") not in ("submit", "checkbox"):
                data[attrs["name"]] = attrs.get("value") or ""

    Inputs().feed(html)
    return data


def test_a_task_that_has_not_ended_cannot_be_deleted(staff_client, world):
    from tasks.choices import TaskState

    pending, _ = task_submit(user=world.bob, document=hello_spec(name="waiting"))
    ended, _ = task_submit(user=world.bob, document=hello_spec(name="ended"))
    Task.objects.filter(pk=ended.pk).update(state=TaskState.SUCCEEDED)
    assert staff_client.get(f"/admin/tasks/task/{pending.pk}/delete/").status_code == 403
    both = {"action": "delete_selected", "_selected_action": [str(pending.pk), str(ended.pk)]}
    confirm = staff_client.post("/admin/tasks/task/", both)
    assert "<title>Cannot delete tasks" in confirm.content.decode()
    assert staff_client.post("/admin/tasks/task/", both | {"post": "yes"}).status_code == 403
    only_ended = {"action": "delete_selected", "_selected_action": [str(ended.pk)], "post": "yes"}
    assert staff_client.post("/admin/tasks/task/", only_ended).status_code == 302
    assert list(Task.objects.values_list("name", flat=True)) == ["waiting"]


def test_only_superusers_change_background_job_schedules(client, world):
    from django.contrib.auth.models import Permission
    from django_q.models import Schedule

    schedule = Schedule.objects.create(name="probe", func="math.floor", args="1")
    staff = get_user_model().objects.create_user("ops", "ops@example.org", "pw", is_staff=True)
    staff.user_permissions.set(Permission.objects.filter(content_type__app_label="django_q"))
    client.force_login(staff)
    assert client.get("/admin/django_q/schedule/").status_code == 200  # staff may look
    change = client.post(f"/admin/django_q/schedule/{schedule.pk}/change/", {"func": "os.system", "args": "'id'"})
    assert change.status_code == 403
    assert client.get("/admin/django_q/schedule/add/").status_code == 403
    schedule.refresh_from_db()
    assert schedule.func == "math.floor"


def test_anonymous_requests_write_no_audit_rows(client, db):
    from cloudpivot.accounts.models import AuditEntry

    client.post("/accounts/login/", {"login": "nobody", "password": "x"}, REMOTE_ADDR="192.0.2.10")
    client.post("/api/v1/tasks", data="{}", content_type="application/json")
    assert not AuditEntry.objects.exists()


def test_the_quota_admin_lists_and_saves_a_projects_limits(staff_client, world):
    from cloudpivot.accounts.models import Quota

    add = staff_client.get("/admin/accounts/quota/add/")
    assert add.status_code == 200 and b'name="max_vcpu"' in add.content
    data = form_data(add.content.decode()) | {
        "project": world.alpha.pk,
        "connection": world.local.pk,
        "max_vcpu": "2.5",
    }
    data |= {"max_tasks": "3"}
    response = staff_client.post("/admin/accounts/quota/add/", data)
    assert response.status_code == 302, response.content.decode()[-2000:]
    quota = Quota.objects.get(project=world.alpha, connection=world.local)
    assert (quota.max_tasks, str(quota.max_vcpu), quota.max_gpus) == (3, "2.500", None)
    listing = staff_client.get("/admin/accounts/quota/").content.decode()
    assert f'href="/admin/accounts/quota/{quota.pk}/change/"' in listing and "2.500" in listing
    again = staff_client.post("/admin/accounts/quota/add/", data)  # one quota per project and connection
    assert again.status_code == 200 and Quota.objects.filter(project=world.alpha).count() == 1


def test_the_audit_admin_shows_entries_and_lets_nobody_change_them(staff_client, world, api):
    from cloudpivot.accounts.models import AuditEntry

    api("bob").post("/api/v1/tasks", data=hello_spec(), format="json")
    entry = AuditEntry.objects.get(actor_name="bob")
    listing = staff_client.get("/admin/accounts/auditentry/")
    assert listing.status_code == 200 and "bob" in listing.content.decode()
    assert b"/admin/accounts/auditentry/add/" not in listing.content and b"delete_selected" not in listing.content
    page = staff_client.get(f"/admin/accounts/auditentry/{entry.pk}/change/")
    assert page.status_code == 200 and b'name="outcome"' not in page.content  # shown, never a form field
    assert staff_client.get("/admin/accounts/auditentry/add/").status_code == 403
    assert staff_client.post(f"/admin/accounts/auditentry/{entry.pk}/change/", {"outcome": "ok"}).status_code == 403
    assert staff_client.post(f"/admin/accounts/auditentry/{entry.pk}/delete/", {"post": "yes"}).status_code == 403
    assert AuditEntry.objects.filter(pk=entry.pk, actor_name="bob").exists()
