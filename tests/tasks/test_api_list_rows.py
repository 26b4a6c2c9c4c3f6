"""The task list writes its rows by hand (TaskListSerializer, for speed): each row must equal what GET /tasks/{id}
(TaskSerializer) answers for the same task, and queue places must count every waiting task of the connection."""

from __future__ import annotations

from clusters.models import CloudConnection
from tests.builders import finished, hello_spec, submit


def test_each_list_row_equals_the_tasks_own_document(api, world, tmp_path):
    second = CloudConnection.objects.create(
        cloud_id="second", backend="local", options={"runs_dir": str(tmp_path / "second")}, dispatch_enabled=False
    )
    second.projects.add(world.alpha)
    done = finished(world.bob, name="done", exit_code=3)
    submit(world.charlie, name="theirs")  # beta's: not listed for bob, yet ahead of bob's in the local queue
    waiting = [submit(world.bob, name=f"w{i}", timeout_seconds=60 + i) for i in range(3)]
    elsewhere = [submit(world.bob, **hello_spec(name=f"s{i}", cloud="second")) for i in range(2)]
    client = api("bob")

    rows = client.get("/api/v1/tasks?limit=3").json()
    rows = rows["results"] + client.get(rows["next"]).json()["results"]

    assert [row["name"] for row in rows] == ["s1", "s0", "w2", "w1", "w0", "done"]
    for row in rows:
        assert row == client.get(f"/api/v1/tasks/{row['id']}").json()
    places = {row["name"]: row["queue_position"] for row in rows}
    assert places == {"s1": 2, "s0": 1, "w2": 4, "w1": 3, "w0": 2, "done": None}
    assert rows[-1]["exit_code"] == 3 and rows[-1]["result"] and rows[-1]["finished_at"].endswith("Z")
    assert {row["id"] for row in rows} >= {str(done.pk), *(str(t.pk) for t in waiting + elsewhere)}
    assert rows[0]["url"] == f"http://testserver/api/v1/tasks/{elsewhere[-1].pk}"


def test_a_filtered_list_of_waiting_tasks_keeps_their_places(api, world):
    for i in range(4):
        submit(world.bob, name=f"w{i}")
    rows = api("bob").get("/api/v1/tasks?state=PENDING&limit=2").json()["results"]
    assert [(row["name"], row["queue_position"]) for row in rows] == [("w3", 4), ("w2", 3)]


def test_rows_with_dates_on_whole_seconds_and_unusual_text_equal_the_tasks_own_document(api, world):
    """On PostgreSQL the rows are JSON written by the database (tasks/list_json.py): Python's ISO dates leave out
    a zero fraction, and names, reasons and results carry quotes, backslashes, newlines and non-ASCII."""
    from datetime import UTC, datetime

    from tasks.models import Task

    whole = finished(world.bob, name='say "hi"\\ \n ünï ✓', exit_code=0)
    Task.objects.filter(pk=whole.pk).update(
        created_at=datetime(2026, 12, 3, 17, 5, 4, tzinfo=UTC),
        finished_at=datetime(2026, 12, 3, 17, 6, 0, 500, tzinfo=UTC),
        state_reason="line one\nline «two»",
        result={"text": 'a "b" \\ c', "n": [1, 2.5, None, True]},
    )
    client = api("bob")
    answer = client.get("/api/v1/tasks")
    assert answer["Content-Type"] == "application/json"
    (row,) = answer.json()["results"]
    assert row["created_at"] == "2026-12-03T17:05:04Z" and row["finished_at"] == "2026-12-03T17:06:00.000500Z"
    assert row == client.get(f"/api/v1/tasks/{whole.pk}").json()
    assert row["name"] == 'say "hi"\\ \n ünï ✓' and row["result"]["n"] == [1, 2.5, None, True]


def test_the_browsable_api_lists_the_same_rows(api, world):
    """A browser asking for HTML gets DRF's browsable page, written from the same rows by TaskListSerializer."""
    task = submit(world.bob, name="seen in a browser")
    page = api("bob").get("/api/v1/tasks", HTTP_ACCEPT="text/html")
    assert page.status_code == 200 and page["Content-Type"].startswith("text/html")
    assert str(task.pk) in page.content.decode() and "seen in a browser" in page.content.decode()


def test_on_postgresql_the_database_writes_the_rows_and_an_unfiltered_page_builds_no_filterset(api, world, monkeypatch):
    """The two cuts of a list request's CPU (docs/benchmarks.md, "the task list while tasks stream"): the
    page's statement returns each row's JSON on PostgreSQL, and the default page (and its next pages) skip
    django-filter, which a filter still goes through."""
    from django.db import connection

    from tasks.filtersets import TaskFilterSet

    for i in range(3):
        submit(world.bob, name=f"t{i}")
    client = api("bob")
    sent: list[str] = []

    def record(execute, sql, params, many, context):
        sent.append(sql)
        return execute(sql, params, many, context)

    built, original = [], TaskFilterSet.__init__

    def counted(self, *args, **kwargs):
        built.append(1)
        original(self, *args, **kwargs)

    monkeypatch.setattr(TaskFilterSet, "__init__", counted)
    with connection.execute_wrapper(record):
        first = client.get("/api/v1/tasks?limit=2").json()
        assert len(client.get(first["next"]).json()["results"]) == 1
    assert not built
    writes_json = any("json_build_object" in sql for sql in sent)
    assert writes_json == (connection.vendor == "postgresql")
    assert [row["name"] for row in client.get("/api/v1/tasks?state=PENDING").json()["results"]] == ["t2", "t1", "t0"]
    assert built
