"""Task documents are parsed within hard limits before anything else touches them (issue 12, item 1).

A YAML alias bomb of a few hundred bytes names one list a billion times; before the limits the
server expanded it while canonicalising the document for the Idempotency-Key, from any logged-in
user, in the API and in the portal's raw editor.
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request

import pytest

from cloudpivot.documents import MAX_DEPTH, DocumentError, load_json, load_yaml
from tasks.models import Task
from tests import helpers
from tests.builders import hello_spec

URL = "/api/v1/tasks"
# 9 levels of 10 aliases each: 10**9 strings once expanded, 600 bytes as written.
BOMB = (
    "cloud: local\ncommand: [echo]\n"
    + "a0: &a0 [lol]\n"
    + "".join(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]\n" for i in range(1, 10))
)


def within(seconds: float, call):
    """Run `call` (no database work) in a thread; fail instead of hanging the run if it does not return in time."""
    box: dict = {}

    def run():
        try:
            box["result"] = call()
        except Exception as exc:  # re-raised in the test's thread
            box["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"still working after {seconds} s: the document was expanded"
    if "error" in box:
        raise box["error"]
    return box.get("result")


def test_the_parser_measures_the_bomb_without_expanding_it():
    assert len(BOMB) < 1024
    with pytest.raises(DocumentError, match="aliases expanded"):
        within(5, lambda: load_yaml(BOMB))


@pytest.mark.e2e
def test_a_yaml_alias_bomb_is_a_400_over_http_and_the_server_keeps_answering(live, world):
    request = urllib.request.Request(
        live.url + URL,
        data=BOMB.encode(),
        method="POST",
        headers={
            "Authorization": f"Bearer {world.tokens['bob']}",
            "Content-Type": "application/yaml",
            "Idempotency-Key": "bomb",
        },
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    assert refused.value.code == 400
    assert "aliases expanded" in json.loads(refused.value.read())["message"]
    assert not Task.objects.exists()
    task = helpers.api_call(live.url, "POST", URL, world.tokens["bob"], hello_spec())
    assert task["state"] == "PENDING"


def test_a_recursive_alias_is_refused_in_words():
    with pytest.raises(DocumentError, match="recursive YAML alias"):
        load_yaml("a: &a [*a]\n")


@pytest.mark.parametrize("content_type", ["application/json", "application/yaml"])
def test_deep_nesting_is_a_400_not_a_500(api, world, content_type):
    body = '{"cloud": "local", "command": ["x"], "labels": ' + "[" * 100_000 + "]" * 100_000 + "}"
    response = api("bob").post(URL, data=body, content_type=content_type)
    assert response.status_code == 400, response.content[:300]
    assert "nested too deeply" in response.json()["message"]


def test_the_limits_allow_an_ordinary_document():
    nested = {"env": {f"V{i}": str(i) for i in range(500)}, "deep": [[[["ok"]]]]}
    assert load_json(json.dumps(nested)) == nested
    assert load_yaml("env:\n  A: &x hi\n  B: *x\n") == {"env": {"A": "hi", "B": "hi"}}
    deep_enough = "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1)
    load_json(deep_enough)
    with pytest.raises(DocumentError):
        load_json("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1))


def test_the_portal_raw_editor_refuses_the_bomb_too(client, world):
    client.force_login(world.bob)
    response = client.post("/tasks/new", {"mode": "raw", "raw-document": BOMB})
    assert response.status_code == 400
    assert any("aliases expanded" in error for error in response.context["raw"].errors["document"])
    assert not Task.objects.exists()


def test_the_portal_applies_the_api_size_and_idempotency_key_limits(client, world, settings):
    settings.SPEC_MAX_BYTES = 1000
    client.force_login(world.bob)
    big = json.dumps(hello_spec(env={"PAD": "x" * 2000}))
    response = client.post("/tasks/new", {"mode": "raw", "raw-document": big})
    assert response.status_code == 400
    assert any("at most 1000 are accepted" in error for error in response.context["raw"].errors["document"])
    long_key = {"mode": "raw", "raw-document": json.dumps(hello_spec()), "raw-idempotency_key": "k" * 201}
    assert client.post("/tasks/new", long_key).status_code == 400
    assert not Task.objects.exists()
