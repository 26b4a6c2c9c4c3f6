"""Portal pages with Django's test client: status codes, templates, ownership, forms, logs."""

from __future__ import annotations

import json
import uuid

import pytest
from django.urls import reverse

from clusters.models import CloudConnection
from tasks.forms import TaskSubmitForm
from tasks.models import Task
from tasks.portal import LOG_TAIL_BYTES

pytestmark = pytest.mark.django_db


def detail(task) -> str:
    return reverse("tasks:task_detail", kwargs={"task_id": task.pk})


def templates(response) -> list[str]:
    return [t.name for t in response.templates]


# ---------------------------------------------------------------------------- login and access
@pytest.mark.parametrize("url", ["/", "/tasks/", "/tasks/new", "/clouds/", "/clouds/local/"])
def test_it_sends_anonymous_users_to_the_login_page(pages, url):
    response = pages(None).get(url)
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/?next=")


def test_it_logs_in_with_a_username_and_password_on_our_login_page(world):
    from django.test import Client

    client = Client()
    page = client.get("/accounts/login/")
    assert page.status_code == 200 and "account/login.html" in templates(page)
    assert b'autocomplete="current-password"' in page.content
    wrong = client.post("/accounts/login/", {"login": "bob", "password": "nope"})
    assert wrong.status_code == 200 and b'role="alert"' in wrong.content
    response = client.post("/accounts/login/", {"login": "bob", "password": "pw-bob"})
    assert response.status_code == 302 and response["Location"] == "/"
    assert client.get("/").context["user"] == world.bob


def test_the_anonymous_api_still_answers_401_not_a_login_redirect(world):
    from rest_framework.test import APIClient

    assert APIClient().get("/api/v1/tasks").status_code in (401, 403)


# ---------------------------------------------------------------------------- dashboard
def test_the_dashboard_shows_my_running_queued_and_recent_tasks(pages, world, make):
    running, _ = make.running(world.bob, name="running-one")
    done = make.finished(world.bob, name="done-one")
    queued = make.submit(world.bob, name="queued-one")  # submitted last: not admitted by the helpers above
    others = make.submit(world.alice, name="alices-task")
    response = pages("bob").get("/")
    assert response.status_code == 200 and "home.html" in templates(response)
    sections = response.context["sections"]
    assert [t.pk for t in sections["queued"]] == [queued.pk]
    assert [t.pk for t in sections["running"]] == [running.pk]
    assert [t.pk for t in sections["recent"]] == [done.pk]
    assert others.name.encode() not in response.content
    assert b"No quotas set for your projects" in response.content
    assert b"local" in response.content and b"Unknown" in response.content  # health not checked yet
    assert f'data-task-badge="{running.pk}"'.encode() in response.content


def test_the_dashboard_sections_come_as_a_fragment_for_htmx(pages, world, make):
    make.submit(world.bob, name="queued-one")
    response = pages("bob").get("/", HTTP_HX_REQUEST="true")
    assert templates(response)[0] == "_dashboard_tasks.html"
    assert b"<html" not in response.content and b"queued-one" in response.content


def test_the_dashboard_shows_cloud_health_and_load(pages, world, make):
    world.local.health_status = "failing"
    world.local.health_message = "disk 91% full"
    world.local.max_active_tasks = 4
    world.local.save()
    make.running(world.bob)
    content = pages("bob").get("/").content.decode()
    assert "Failing" in content and "disk 91% full" in content and "1 active of 4" in content


# ---------------------------------------------------------------------------- task list
def test_the_task_list_shows_visible_tasks_only(pages, world, make):
    mine = make.submit(world.bob, name="bobs")
    theirs = make.submit(world.charlie, name="charlies")
    response = pages("rita").get("/tasks/")
    assert response.status_code == 200 and "tasks/task_list.html" in templates(response)
    shown = {t.pk for t in response.context["page"].object_list}
    assert shown == {mine.pk}
    assert theirs.pk not in {t.pk for t in pages("alice").get("/tasks/").context["page"].object_list}
    assert {t.pk for t in pages("charlie").get("/tasks/").context["page"].object_list} == {theirs.pk}


def test_the_task_list_filters_by_state_cloud_project_owner_and_text(pages, world, make):
    done = make.finished(world.alice, name="nightly-build")
    pending = make.submit(world.bob, name="alpha-report")
    client = pages("alice")

    def ids(query):
        return {t.pk for t in client.get("/tasks/" + query).context["page"].object_list}

    assert ids("?state=PENDING") == {pending.pk}
    assert ids("?state=PENDING&state=SUCCEEDED") == {pending.pk, done.pk}
    assert ids("?owner=alice") == {done.pk}
    assert ids("?q=nightly") == {done.pk}
    assert ids("?project=alpha&cloud=local") == {pending.pk, done.pk}
    assert ids("?project=beta") == set()
    assert ids("?cloud=elsewhere") == set()
    bad = client.get("/tasks/?state=NOT_A_STATE")
    assert bad.status_code == 200 and not bad.context["page"].object_list and b'role="alert"' in bad.content


def test_the_task_list_sorts_and_paginates_on_the_server(pages, world, make):
    for i in range(30):
        make.submit(world.bob, name=f"t{i:02d}")
    client = pages("bob")
    first = client.get("/tasks/")
    assert len(first.context["page"].object_list) == 25 and first.context["page"].paginator.num_pages == 2
    assert first.context["page"].object_list[0].name == "t29"  # newest first
    second = client.get("/tasks/?page=2")
    assert [t.name for t in second.context["page"].object_list] == [f"t{i:02d}" for i in range(4, -1, -1)]
    by_name = client.get("/tasks/?sort=name")
    assert by_name.context["page"].object_list[0].name == "t00"
    assert client.get("/tasks/?sort=-name").context["page"].object_list[0].name == "t29"
    assert b'aria-sort="ascending"' in by_name.content
    assert client.get("/tasks/?sort=DROP TABLE").status_code == 200
    assert "page=2" in first.content.decode()


def test_the_task_list_answers_htmx_with_the_table_fragment(pages, world, make):
    make.submit(world.bob, name="frag")
    response = pages("bob").get("/tasks/?q=frag", HTTP_HX_REQUEST="true")
    assert templates(response)[0] == "tasks/_task_table.html"
    assert b'id="task-table"' in response.content and b"<html" not in response.content


def test_the_task_list_runs_a_fixed_number_of_queries(pages, world, make, django_assert_max_num_queries):
    for _ in range(12):
        make.submit(world.bob)
    client = pages("bob")
    client.get("/tasks/")  # warm the session
    with django_assert_max_num_queries(12):
        client.get("/tasks/")


# ---------------------------------------------------------------------------- task detail
def test_the_task_detail_shows_spec_events_attempts_result_and_log(pages, world, make):
    task = make.finished(world.bob, name="report", log=b"line one\nline two\n")
    response = pages("bob").get(detail(task))
    assert response.status_code == 200 and "tasks/task_detail.html" in templates(response)
    content = response.content.decode()
    assert "line one\nline two\n" in content
    assert "&quot;command&quot;" in content  # the normalized spec, pretty-printed
    assert f"cp-{task.id.hex}-1" in content  # attempts table
    assert "s3://bucket/out" in content  # the result
    assert "exited with code 0" in content or "Succeeded" in content
    assert content.count("<li data-seq=") == task.last_event_seq
    assert "cloudpivot task submit -f - &lt;&lt;&#x27;EOF&#x27;" in content  # tests/cli runs this very text
    assert "/api/v1/tasks" in content and "Authorization: Bearer $CLOUDPIVOT_TOKEN" in content


@pytest.mark.parametrize(("name", "status"), [("alice", 200), ("bob", 200), ("rita", 200), ("charlie", 404)])
def test_the_task_detail_is_visible_to_project_members_only(pages, world, make, name, status):
    task = make.submit(world.bob)
    assert pages(name).get(detail(task)).status_code == status
    assert pages(name).get(reverse("tasks:task_panels", kwargs={"task_id": task.pk})).status_code == status


def test_a_missing_task_is_a_404(pages, world):
    assert pages("bob").get(f"/tasks/{uuid.uuid4()}/").status_code == 404


@pytest.mark.parametrize(
    ("name", "owner", "can_cancel"),
    [("bob", "bob", True), ("alice", "bob", True), ("rita", "bob", False), ("bob", "alice", False)],
)
def test_the_cancel_button_shows_only_when_the_role_allows(pages, world, make, name, owner, can_cancel):
    task = make.submit(getattr(world, owner))
    content = pages(name).get(detail(task)).content.decode()
    assert (f'action="/tasks/{task.pk}/cancel/"' in content) is can_cancel


def test_retry_shows_for_finished_tasks_and_clone_for_submitters(pages, world, make):
    task = make.finished(world.bob, exit_code=3)
    assert task.state == "FAILED"
    bob = pages("bob").get(detail(task)).content.decode()
    assert f'action="/tasks/{task.pk}/retry/"' in bob and "cancel/" not in bob
    assert f"?clone={task.pk}" in bob
    rita = pages("rita").get(detail(task)).content.decode()
    assert "retry/" not in rita and "?clone=" not in rita


def test_the_panels_fragment_holds_summary_attempts_and_result(pages, world, make):
    task = make.finished(world.bob)
    response = pages("bob").get(reverse("tasks:task_panels", kwargs={"task_id": task.pk}))
    content = response.content.decode()
    assert 'id="task-summary"' in content and 'id="task-attempts"' in content and 'id="task-result"' in content
    assert "<html" not in content


# ---------------------------------------------------------------------------- cancel and retry
def test_a_submitter_cancels_their_own_task(pages, world, make):
    task = make.submit(world.bob)
    response = pages("bob").post(f"/tasks/{task.pk}/cancel/")
    assert response.status_code == 302 and response["Location"] == detail(task)
    task.refresh_from_db()
    assert task.state == "CANCELLED"


def test_cancel_is_refused_to_a_reader_and_invisible_to_outsiders(pages, world, make):
    task = make.submit(world.bob)
    assert pages("rita").post(f"/tasks/{task.pk}/cancel/").status_code == 403
    assert pages("charlie").post(f"/tasks/{task.pk}/cancel/").status_code == 404
    assert pages("bob").get(f"/tasks/{task.pk}/cancel/").status_code == 405
    task.refresh_from_db()
    assert task.state == "PENDING"


def test_cancel_needs_the_csrf_token(world, make):
    from django.test import Client

    task = make.submit(world.bob)
    client = Client(enforce_csrf_checks=True)
    client.force_login(world.bob)
    assert client.post(f"/tasks/{task.pk}/cancel/").status_code == 403
    task.refresh_from_db()
    assert task.state == "PENDING"


def test_cancelling_a_finished_task_says_why_instead_of_failing(pages, world, make):
    task = make.finished(world.bob)
    response = pages("bob").post(f"/tasks/{task.pk}/cancel/", follow=True)
    assert response.status_code == 200 and "already ended" in response.content.decode()


def test_retry_runs_a_finished_task_again(pages, world, make):
    task = make.finished(world.bob, exit_code=1, log=b"the first attempt's words\n")
    assert pages("bob").post(f"/tasks/{task.pk}/retry/").status_code == 302
    task.refresh_from_db()
    assert task.state == "PENDING"
    assert make.admit(task).number == 2  # the retry runs as a new attempt
    assert list(task.attempts.order_by("number").values_list("number", "exit_code")) == [(1, 1), (2, None)]
    attempts = pages("bob").get(detail(task)).context["attempts"]
    assert [a.number for a in attempts] == [2, 1]  # newest first; the earlier attempt stays on the page
    first_log = pages("bob").get(f"/tasks/{task.pk}/log/download/?attempt=1")
    assert b"".join(first_log.streaming_content) == b"the first attempt's words\n"


# ---------------------------------------------------------------------------- logs
def test_a_big_log_shows_only_its_tail_and_earlier_text_loads_on_demand(pages, world, make):
    task, attempt = make.running(world.bob)
    lines = b"".join(b"line %06d\n" % i for i in range(100_000))  # 1.2 MB
    for start in range(0, len(lines), 64 * 1024):
        make.write_log(attempt, lines[start : start + 64 * 1024])
    client = pages("bob")
    response = client.get(detail(task))
    log = response.context["log"]
    assert log["end"] == len(lines) and log["end"] - log["start"] == LOG_TAIL_BYTES
    assert len(response.content) < LOG_TAIL_BYTES + 60_000
    assert b"line 099999" in response.content and b"line 000001" not in response.content
    assert b"Load earlier text" in response.content
    earlier = client.get(f"/tasks/{task.pk}/log/?attempt=1&before={log['start']}").json()
    assert earlier["end"] == log["start"] and earlier["start"] == log["start"] - LOG_TAIL_BYTES
    assert lines[earlier["start"] : earlier["end"]].decode() == earlier["data"]
    first = client.get(f"/tasks/{task.pk}/log/?attempt=1&before=100").json()
    assert first == {"attempt": 1, "start": 0, "end": 100, "data": lines[:100].decode()}


def test_the_log_endpoint_checks_its_parameters_and_the_owner(pages, world, make):
    task, _ = make.running(world.bob)
    assert pages("bob").get(f"/tasks/{task.pk}/log/").status_code == 400
    assert pages("bob").get(f"/tasks/{task.pk}/log/?attempt=1&before=x").status_code == 404
    assert pages("charlie").get(f"/tasks/{task.pk}/log/?attempt=1&before=10").status_code == 404


def test_the_whole_log_downloads_as_a_streamed_plain_text_file(pages, world, make):
    task, attempt = make.running(world.bob)
    data = "héllo wörld\n".encode() * 50_000
    for start in range(0, len(data), 100_000):
        make.write_log(attempt, data[start : start + 100_000])
    response = pages("rita").get(f"/tasks/{task.pk}/log/download/")
    assert response.status_code == 200 and response.streaming
    assert response["Content-Type"] == "text/plain; charset=utf-8"
    assert f'filename="cp-{task.id.hex}-1.log"' in response["Content-Disposition"]
    assert b"".join(response.streaming_content) == data
    assert pages("charlie").get(f"/tasks/{task.pk}/log/download/").status_code == 404
    assert pages("bob").get(f"/tasks/{make.submit(world.bob).pk}/log/download/").status_code == 404


def test_a_50_mb_log_page_sends_only_the_tail(pages, world, make, settings):
    """The case from the issue: the page sends the tail only, however long the log is.

    How fast that is, beside a page with a tiny log, is a figure of tests/bench/bench_portal.py."""
    task, attempt = make.running(world.bob)
    block = b"".join(b"%08d the quick brown fox jumps over the lazy dog\n" % i for i in range(20_000))  # ~1 MiB
    for _ in range(50):
        make.write_log(attempt, block)
    attempt.refresh_from_db()
    assert attempt.log_bytes >= 50 * 1024 * 1024
    client = pages("bob")
    response = client.get(detail(task))
    assert response.status_code == 200
    assert len(response.content) < LOG_TAIL_BYTES + 60_000
    assert block[-2000:].decode() in response.content.decode()  # the tail is what it shows


# ---------------------------------------------------------------------------- submit
def test_the_submit_page_renders_both_editors(pages, world):
    response = pages("bob").get("/tasks/new")
    assert response.status_code == 200 and "tasks/task_form.html" in templates(response)
    content = response.content.decode()
    assert 'role="tablist"' in content and 'name="form-command"' in content and 'name="raw-document"' in content
    assert '<option value="local" selected>local</option>' in content


def test_the_form_submits_a_task(pages, world):
    response = pages("bob").post(
        "/tasks/new",
        {
            "mode": "form",
            "form-cloud": "local",
            "form-project": "alpha",
            "form-name": "from the form",
            "form-command": "python3\r\n-c\r\nprint('hi there')\r\n",
            "form-env": "GREETING=hello world\nEMPTY=\n",
            "form-timeout_seconds": "60",
            "form-retry_limit": "1",
            "form-idempotency_key": "portal-test-1",
        },
    )
    task = Task.objects.get(name="from the form")
    assert response.status_code == 302 and response["Location"] == detail(task)
    assert task.owner == world.bob and task.project == world.alpha
    assert task.normalized["command"] == ["python3", "-c", "print('hi there')"]
    assert task.normalized["env"] == {"GREETING": "hello world", "EMPTY": ""}
    assert task.timeout_seconds == 60 and task.retry_limit == 1


def test_a_double_submitted_form_makes_one_task(pages, world):
    data = {
        "mode": "form",
        "form-cloud": "local",
        "form-command": "true",
        "form-retry_limit": "0",
        "form-idempotency_key": "portal-double",
    }
    client = pages("bob")
    first, second = client.post("/tasks/new", data), client.post("/tasks/new", data)
    assert first["Location"] == second["Location"]
    assert Task.objects.filter(owner=world.bob).count() == 1


@pytest.mark.parametrize(
    ("changes", "field", "text"),
    [
        ({"form-env": "1BAD=x"}, "env", "not a valid environment variable name: 1BAD"),
        ({"form-env": "no equals sign"}, "env", "expected KEY=VALUE"),
        ({"form-timeout_seconds": "0"}, "timeout_seconds", "greater than or equal to 1"),
        ({"form-retry_limit": "99"}, "retry_limit", "less than or equal to 20"),
        ({"form-command": "\n  \n"}, "command", "This field is required"),
        ({"form-project": "beta"}, "project", "Select a valid choice"),
    ],
)
def test_form_errors_show_next_to_the_field_at_fault(pages, world, changes, field, text):
    data = {"mode": "form", "form-cloud": "local", "form-command": "true", "form-retry_limit": "0"} | changes
    response = pages("bob").post("/tasks/new", data)
    assert response.status_code == 400
    form = response.context["form"]
    assert any(text in error for error in form.errors[field]), form.errors
    content = response.content.decode()
    block = content[content.index(f'id="field-form-{field}"') :]
    block = block[: block.find('id="field-form-', 10)]  # this field's markup only
    assert text.split(":")[0] in block and 'aria-invalid="true"' in block
    assert f'aria-describedby="id_form-{field}_errors' in block
    assert not Task.objects.exists()


def test_a_reader_cannot_submit_and_is_told_why(pages, world):
    response = pages("rita").post(
        "/tasks/new", {"mode": "form", "form-cloud": "local", "form-command": "true", "form-retry_limit": "0"}
    )
    assert response.status_code == 400
    assert "lets you submit" in " ".join(response.context["form"].non_field_errors())


def test_spec_error_paths_map_to_form_fields():
    form = TaskSubmitForm(clouds=["local"], projects=["alpha"])
    assert form.field_for("command.1", "must be a string") == ("command", "Argument 2: must be a string")
    assert form.field_for("env.FOO", "too long") == ("env", "FOO: too long")
    assert form.field_for("timeout_seconds", "too big") == ("timeout_seconds", "too big")
    assert form.field_for("resources.gpu", "no GPUs") == (None, "resources.gpu: no GPUs")
    assert form.field_for("", "bad") == (None, "bad")


def test_the_raw_editor_submits_json_and_yaml(pages, world):
    client = pages("bob")
    doc = {"cloud": "local", "name": "raw-json", "command": ["echo", "hi"], "labels": {"team": "x"}}
    response = client.post("/tasks/new", {"mode": "raw", "raw-document": json.dumps(doc)})
    assert response.status_code == 302 and Task.objects.get(name="raw-json").normalized["labels"] == {"team": "x"}
    yaml_doc = "cloud: local\nname: raw-yaml\ncommand:\n  - echo\n  - hi\n"
    assert client.post("/tasks/new", {"mode": "raw", "raw-document": yaml_doc}).status_code == 302
    assert Task.objects.get(name="raw-yaml").normalized["command"] == ["echo", "hi"]


@pytest.mark.parametrize(
    ("document", "text"),
    [
        ('{"cloud": "local", "command": ["echo", 5]}', "command.1: must be a string"),
        ('{"cloud": "local", "comand": ["echo"]}', "comand: unknown field"),
        ('{"cloud": "local", "command": ["x"], "image": "busybox"}', "image: the local cloud"),
        ("cloud: [unclosed", "Neither JSON nor YAML (line 1"),
        ("- just\n- a list\n", "must be a mapping"),
    ],
)
def test_raw_editor_errors_are_shown_on_the_editor(pages, world, document, text):
    response = pages("bob").post("/tasks/new", {"mode": "raw", "raw-document": document})
    assert response.status_code == 400 and response.context["mode"] == "raw"
    assert any(text in error for error in response.context["raw"].errors["document"])
    assert text.split("(")[0].strip() in response.content.decode().replace("&#x27;", "'")


def test_clone_and_edit_prefills_the_form(pages, world, make):
    task = make.submit(world.bob, name="original", env={"A": "1"}, timeout_seconds=30)
    response = pages("alice").get(f"/tasks/new?clone={task.pk}")
    form = response.context["form"]
    assert response.context["mode"] == "form"
    assert form.initial["command"] == "python3\n-c\nprint('hello')"
    assert form.initial["env"] == "A=1" and form.initial["timeout_seconds"] == 30
    assert json.loads(response.context["raw"].initial["document"])["name"] == "original"


def test_clone_of_a_document_the_form_cannot_hold_opens_the_raw_editor(pages, world):
    doc = {"cloud": "local", "command": ["python3", "-c", "print(1)\nprint(2)"], "labels": {"k": "v"}}
    pages("bob").post("/tasks/new", {"mode": "raw", "raw-document": json.dumps(doc)})
    task = Task.objects.get(owner=world.bob)
    response = pages("bob").get(f"/tasks/new?clone={task.pk}")
    assert response.context["mode"] == "raw"  # one line per argument cannot hold an argument with a line break
    assert json.loads(response.context["raw"].initial["document"])["command"] == doc["command"]


def test_clone_of_a_document_with_labels_fills_the_form(pages, world):
    doc = {"cloud": "local", "command": ["echo"], "labels": {"k": "v"}, "workdir": "/tmp"}
    pages("bob").post("/tasks/new", {"mode": "raw", "raw-document": json.dumps(doc)})
    task = Task.objects.get(owner=world.bob)
    response = pages("bob").get(f"/tasks/new?clone={task.pk}")
    form = response.context["form"]
    assert response.context["mode"] == "form" and form.initial["labels"] == "k=v" and form.initial["workdir"] == "/tmp"


def test_clone_of_a_foreign_task_is_refused(pages, world, make):
    task = make.submit(world.bob, name="secret-name")
    response = pages("charlie").get(f"/tasks/new?clone={task.pk}")
    assert response.status_code == 200 and b"secret-name" not in response.content
    assert b"not found" in response.content


# ---------------------------------------------------------------------------- clouds
def test_the_cloud_pages_show_health_and_capacity(pages, world, make):
    world.local.health_status = "ok"
    world.local.health_message = "runs tasks on this host"
    world.local.credentials_ref = "/etc/secret/kubeconfig"
    world.local.save()
    make.running(world.bob)
    client = pages("bob")
    listing = client.get("/clouds/")
    assert listing.status_code == 200 and "clusters/cloud_list.html" in templates(listing)
    assert b"runs tasks on this host" in listing.content
    page = client.get("/clouds/local/")
    assert page.status_code == 200 and "clusters/cloud_detail.html" in templates(page)
    content = page.content.decode()
    assert "Inventory" in content and "Metrics" in content and "1</strong> active task" in content
    assert "/etc/secret" not in content + listing.content.decode()


def test_a_cloud_not_granted_to_my_projects_is_a_404(pages, world):
    lab = CloudConnection.objects.create(cloud_id="k3s-lab", backend="kubernetes")
    lab.projects.add(world.beta)
    assert pages("bob").get("/clouds/k3s-lab/").status_code == 404
    assert b"k3s-lab" not in pages("bob").get("/clouds/").content
    assert pages("charlie").get("/clouds/k3s-lab/").status_code == 200


@pytest.mark.parametrize("url", ["/accounts/logout/", "/accounts/password/reset/"])
def test_allauth_pages_use_the_site_layout(pages, url):
    response = pages("bob").get(url)
    assert response.status_code == 200 and "base.html" in templates(response)
