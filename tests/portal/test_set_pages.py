"""Task sets in the portal with Django's test client: "Run as a set" on the submit form (preview, a count, a
JSON Lines or CSV file, faults at their field), the set page (counts, the elements' filter, failure classes, who
may cancel or retry), the sets list, the dashboard and the task list's mark."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from tasks.models import Task
from tasksets.models import TaskSet
from tests import helpers
from tests.tasksets.helpers import materialize, post_set, run_open_elements, template

pytestmark = pytest.mark.django_db


def set_form(**extra) -> dict:
    """The submit form as the browser sends it with "A set of tasks" chosen."""
    return {
        "mode": "form",
        "form-cloud": "local",
        "form-project": "alpha",
        "form-name": "lr-{{lr}}",
        "form-command": "python3\ntrain.py\n--lr={{lr}}",
        "form-retry_limit": "0",
        "form-idempotency_key": "portal-test-key",
        "set-run_as": "set",
        **extra,
    }


def upload(name: str, text: str) -> SimpleUploadedFile:
    return SimpleUploadedFile(name, text.encode(), content_type="text/plain")


def page_of(api, pages, name: str, body: dict) -> tuple[str, str]:
    created = post_set(api("bob"), body).json()
    return created["id"], pages(name).get(f"/sets/{created['id']}/").content.decode()


# ---------------------------------------------------------------------------- the submit form
def test_the_form_offers_run_as_a_set(pages, world):
    content = pages("bob").get("/tasks/new").content.decode()
    assert 'name="set-run_as"' in content and 'name="set-params_file"' in content
    assert 'enctype="multipart/form-data"' in content and "Preview the set" in content
    assert not helpers.csrf_problems(content)


def test_preview_shows_the_first_elements_and_submits_nothing(pages, world):
    csv = "lr,tag\n0.1,a\n0.01,b\n0.001,c\n1e-4,d\n5,e\n6,f\n"
    response = pages("bob").post("/tasks/new", set_form(preview="1", **{"set-params_file": upload("p.csv", csv)}))
    assert response.status_code == 200
    content = response.content.decode()
    preview = content[content.index('id="set-preview"') :]
    assert "The first 5 of 6 elements" in preview
    for name in ("lr-0.1", "lr-0.01", "lr-0.001", "lr-0.0001", "lr-5"):
        assert f"<td>{name}</td>" in preview
    assert "python3 train.py --lr=0.01" in preview and "lr-6" not in preview
    assert "lr,tag\n0.1,a" in content  # the file's text kept in the form: Submit set needs no second upload
    assert not TaskSet.objects.exists() and not Task.objects.exists()


def test_a_count_set_is_submitted_through_the_sets_service(pages, world):
    data = set_form(**{"form-name": "sweep", "form-command": "echo\n{{index}}", "set-count": "3"})
    response = pages("bob").post("/tasks/new", data | {"set-max_running": "2", "submit_set": "1"})
    task_set = TaskSet.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/sets/{task_set.pk}/"
    assert (task_set.count, task_set.items, task_set.max_running, task_set.owner) == (3, None, 2, world.bob)
    assert task_set.template["command"] == ["echo", "{{index}}"] and task_set.idempotency_key == "portal-test-key"
    again = pages("bob").post("/tasks/new", data | {"set-max_running": "2", "submit_set": "1"})
    assert again.status_code == 302 and TaskSet.objects.count() == 1  # a double click: the same set
    materialize()
    assert sorted(Task.objects.values_list("name", flat=True)) == ["sweep-0", "sweep-1"]  # max_running 2


def test_a_jsonl_file_gives_one_element_per_line(pages, world):
    jsonl = '{"lr": 0.1}\n\n{"lr": 0.01, "note": "x y"}\n'
    response = pages("bob").post("/tasks/new", set_form(**{"set-params_file": upload("p.jsonl", jsonl)}))
    assert response.status_code == 302
    assert TaskSet.objects.get().items == [{"lr": 0.1}, {"lr": 0.01, "note": "x y"}]


def test_a_csv_file_with_a_header_row_reads_numbers_as_numbers(pages, world):
    csv = "lr,epochs,tag\n0.1,3,a\n1e-3,10,007b\n"
    response = pages("bob").post("/tasks/new", set_form(**{"set-params_file": upload("p.csv", csv)}))
    assert response.status_code == 302
    assert TaskSet.objects.get().items == [
        {"lr": 0.1, "epochs": 3, "tag": "a"},
        {"lr": 0.001, "epochs": 10, "tag": "007b"},
    ]


def test_pasted_parameters_work_as_a_file_does(pages, world):
    response = pages("bob").post("/tasks/new", set_form(**{"set-params": "lr\n0.5\n"}))
    assert response.status_code == 302 and TaskSet.objects.get().items == [{"lr": 0.5}]


def test_a_bad_item_is_named_at_the_file_field_with_its_line(pages, world):
    jsonl = '{"lr": 0.1}\n{"rate": 0.2}\n'
    response = pages("bob").post("/tasks/new", set_form(**{"set-params_file": upload("p.jsonl", jsonl)}))
    assert response.status_code == 400 and not TaskSet.objects.exists()
    errors = response.context["set_form"].errors["params_file"]
    assert errors == ["Element 1 (line 2): lr: missing: command.2 uses {{lr}}"]
    content = response.content.decode()
    field = content[content.index('id="field-set-params_file"') :].split('id="field-set-params"')[0]
    assert "Element 1 (line 2): lr: missing: command.2 uses {{lr}}" in field


def test_file_faults_and_template_faults_land_on_their_fields(pages, world):
    client = pages("bob")
    broken = client.post("/tasks/new", set_form(**{"set-params_file": upload("p.jsonl", '{"lr": 1}\n{oops\n')}))
    assert broken.status_code == 400
    assert broken.context["set_form"].errors["params_file"][0].startswith("Line 2: not JSON")
    neither = client.post("/tasks/new", set_form())
    assert "Give a count, or a parameter file" in neither.context["set_form"].errors["count"][0]
    both = client.post("/tasks/new", set_form(**{"set-count": "2", "set-params": "lr\n1\n"}))
    assert both.context["set_form"].errors["count"] == ["Give a count or parameters, not both."]
    counted = client.post("/tasks/new", set_form(**{"set-count": "2", "preview": "1"}))  # {{lr}} with a count
    assert counted.status_code == 400
    assert "{{lr}} has no value" in counted.context["form"].errors["command"][0]
    assert not TaskSet.objects.exists()


def test_a_single_task_is_still_a_task(pages, world):
    data = set_form(**{"set-run_as": "task", "form-name": "one", "form-command": "echo\nhi"})
    response = pages("bob").post("/tasks/new", data)
    assert response.status_code == 302 and response["Location"].startswith("/tasks/")
    assert Task.objects.get().name == "one" and not TaskSet.objects.exists()


# ---------------------------------------------------------------------------- the set page
def finished_set(api) -> str:
    created = post_set(api("bob"), {"template": template(name="sweep"), "count": 4}).json()
    materialize()
    run_open_elements(exit_codes={1: 3})
    materialize()
    return created["id"]


def test_the_set_page_shows_counts_elements_and_failure_classes(api, pages, world):
    set_id = finished_set(api)
    response = pages("bob").get(f"/sets/{set_id}/")
    assert response.status_code == 200 and "tasksets/set_detail.html" in [t.name for t in response.templates]
    content = response.content.decode()
    assert 'data-state="FINISHED"' in content and "4 / 4</strong> ended" in content
    assert 'data-count="succeeded">3 succeeded' in content and 'data-count="failed">1 failed' in content
    assert content.count("data-element=") == 4 and 'data-failure-class="exit_code"' in content
    assert "Retry failed elements" in content and "Cancel set" not in content  # finished: nothing to cancel
    assert f'data-live-set="{set_id}"' in content and not helpers.csrf_problems(content)


def test_the_elements_filter_by_state_and_the_panels_fragment(api, pages, world):
    set_id = finished_set(api)
    failed = pages("bob").get(f"/sets/{set_id}/?state=FAILED").content.decode()
    assert failed.count("data-element=") == 1 and 'data-element="1"' in failed
    none = pages("bob").get(f"/sets/{set_id}/?state=RUNNING").content.decode()
    assert "No element is running" in none
    panels = pages("bob").get(f"/sets/{set_id}/panels/?state=SUCCEEDED")
    assert panels.status_code == 200 and b"<html" not in panels.content
    assert panels.content.decode().count("data-element=") == 3


def test_the_elements_are_paginated(api, pages, world):
    created = post_set(api("bob"), {"template": template(), "count": 60}).json()
    materialize()
    first = pages("bob").get(f"/sets/{created['id']}/").content.decode()
    assert first.count("data-element=") == 50 and "Page 1 of 2" in first
    second = pages("bob").get(f"/sets/{created['id']}/?page=2").content.decode()
    assert second.count("data-element=") == 10 and 'data-element="59"' in second


def test_readers_get_no_buttons_and_a_403_outsiders_a_404(api, pages, world):
    created = post_set(api("bob"), {"template": template(), "count": 2}).json()
    url = f"/sets/{created['id']}/"
    rita = pages("rita").get(url).content.decode()
    assert "Cancel set" not in rita and "Retry failed" not in rita
    assert pages("rita").post(url + "cancel/").status_code == 403
    assert pages("charlie").get(url).status_code == 404
    assert pages("charlie").post(url + "cancel/").status_code == 404
    assert "Cancel set" in pages("alice").get(url).content.decode()  # alpha's admin
    assert TaskSet.objects.get().state == "ACTIVE"
    response = pages("bob").post(url + "cancel/")
    assert response.status_code == 302 and TaskSet.objects.get().state == "CANCELLED"


def test_retry_failed_from_the_page(api, pages, world):
    set_id = finished_set(api)
    assert pages("rita").post(f"/sets/{set_id}/retry-failed/").status_code == 403
    response = pages("alice").post(f"/sets/{set_id}/retry-failed/", follow=True)
    assert "Retrying 1 failed element" in response.content.decode()
    assert TaskSet.objects.get().state == "ACTIVE"
    materialize()
    run_open_elements()
    materialize()
    again = pages("alice").post(f"/sets/{set_id}/retry-failed/", follow=True)  # it succeeded: none failed now
    assert "no element of the task set failed" in again.content.decode()


# ---------------------------------------------------------------------------- lists
def test_sets_in_the_list_the_dashboard_and_the_task_list(api, pages, world):
    set_id = finished_set(api)
    post_set(api("charlie"), {"template": template(project="beta", name="charlies"), "count": 1})
    listed = pages("bob").get("/sets/").content.decode()
    assert f'data-set-row="{set_id}"' in listed and "charlies" not in listed and "3 succeeded" in listed
    assert 'href="/sets/"' in listed  # the nav
    home = pages("bob").get("/").content.decode()
    assert f'data-set-row="{set_id}"' in home and "My task sets" in home
    tasks = pages("bob").get("/tasks/").content.decode()
    assert f'data-set-mark="{set_id}"' in tasks and "element 1" in tasks


def test_the_template_summary_names_the_parameters_without_reading_every_item(api, pages, world):
    body = {"template": template(name="lr-{{lr}}"), "items": [{"lr": 0.1, "seed": 1}, {"lr": 0.2, "seed": 2}]}
    _, content = page_of(api, pages, "bob", body)
    assert "2 parameter rows (lr, seed)" in content and "lr-{{lr}}" in content
