"""GET /api/v1/task-sets, /{id} and /{id}/tasks: what the user may see, paged, with progress."""

from __future__ import annotations

from tests.tasksets.helpers import URL, materialize, post_set, run_open_elements, template


def test_sets_are_listed_newest_first_to_their_project_only(api, world):
    older = post_set(api("bob"), {"template": template(), "count": 2}).json()
    newer = post_set(api("alice"), {"template": template(), "count": 3}).json()
    post_set(api("charlie"), {"template": template(), "count": 1})
    rows = api("rita").get(URL).json()["results"]
    assert [row["id"] for row in rows] == [newer["id"], older["id"]]
    assert rows[0]["counts"]["waiting"] == 3
    assert [row["owner"] for row in api("charlie").get(URL).json()["results"]] == ["charlie"]


def test_a_foreign_or_unknown_set_is_a_404(api, world):
    created = post_set(api("bob"), {"template": template(), "count": 2}).json()
    for path in (f"{URL}/{created['id']}", f"{URL}/{created['id']}/tasks", f"{URL}/not-a-uuid"):
        response = api("charlie").get(path)
        assert response.status_code == 404, path
        assert response.json()["code"] == "not_found"
    assert api(None).get(URL).status_code == 401


def test_the_elements_are_paged_by_index_and_filtered_by_state(api, world):
    created = post_set(api("bob"), {"template": template(name="shard"), "count": 5}).json()
    materialize()
    run_open_elements(exit_codes={3: 2})
    first = api("bob").get(f"{URL}/{created['id']}/tasks?limit=2").json()
    assert [e["index"] for e in first["elements"]] == [0, 1] and first["has_more"]
    assert first["elements"][0]["name"] == "shard-0" and first["elements"][0]["state"] == "SUCCEEDED"
    assert first["elements"][0]["url"].endswith(f"/api/v1/tasks/{first['elements'][0]['task_id']}")
    rest = api("bob").get(f"{URL}/{created['id']}/tasks?after_index={first['next_after_index']}").json()
    assert [e["index"] for e in rest["elements"]] == [2, 3, 4] and not rest["has_more"]
    failed = api("bob").get(f"{URL}/{created['id']}/tasks?state=FAILED").json()
    assert [(e["index"], e["exit_code"]) for e in failed["elements"]] == [(3, 2)]
    assert api("bob").get(f"{URL}/{created['id']}/tasks?limit=0").status_code == 400


def test_each_element_is_an_ordinary_task_in_the_task_api(api, world):
    post_set(api("bob"), {"template": template(), "count": 2})
    materialize()
    tasks = api("bob").get("/api/v1/tasks").json()["results"]
    assert len(tasks) == 2 and all(task["spec"]["env"]["CLOUDPIVOT_SET_INDEX"] in ("0", "1") for task in tasks)
