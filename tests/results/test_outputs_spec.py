"""Declared outputs in the task document: bounded, relative, inside the work directory (docs/data.md)."""

from __future__ import annotations

import json

import pytest

from tasks.models import Task
from tests.builders import hello_spec

URL = "/api/v1/tasks"


def post(client, body):
    return client.post(URL, data=json.dumps(body), content_type="application/json")


def test_it_accepts_declared_outputs_and_keeps_them_in_the_normalized_spec(api, world):
    outputs = [{"path": "result.csv"}, {"path": "plots/*.png", "to": "figures/"}]
    response = post(api("bob"), hello_spec(outputs=outputs))
    assert response.status_code == 201, response.json()
    task = Task.objects.get(pk=response.json()["id"])
    assert task.normalized["outputs"] == [{"path": "result.csv"}, {"path": "plots/*.png", "to": "figures"}]


@pytest.mark.parametrize(
    ("outputs", "field", "words"),
    [
        ([{"path": "ok.txt"}, {"path": "/etc/passwd"}], "outputs.1.path", "relative to the work directory"),
        ([{"path": "../secret"}], "outputs.0.path", "no '..'"),
        ([{"path": "out/../../x"}], "outputs.0.path", "no '..'"),
        ([{"path": "out//x"}], "outputs.0.path", "empty or '.'"),
        ([{"path": "x", "to": "../up"}], "outputs.0.to", "no '..'"),
        ([{"path": "x", "to": "/abs"}], "outputs.0.to", "not an absolute path"),
        ([{"path": "x", "where": "y"}], "outputs.0.where", "unknown field"),
        ([{"path": f"f{i}"} for i in range(51)], "outputs", "50"),
        ("out.txt", "outputs", ""),
    ],
)
def test_it_refuses_an_output_outside_the_work_directory_naming_the_field(api, world, outputs, field, words):
    response = post(api("bob"), hello_spec(outputs=outputs))
    assert response.status_code == 400, response.json()
    errors = {e["field"]: e["message"] for e in response.json()["errors"]}
    assert field in errors, errors
    assert words in errors[field]
    assert Task.objects.count() == 0
