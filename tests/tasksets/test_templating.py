"""The in-memory check of every item (tasksets.templating): the quick path for usual items agrees with the full one."""

from __future__ import annotations

import pytest

from cloudpivot.exceptions import InvalidSpec
from tasksets import templating
from tasksets.templating import MAX_ENV, elements_check, item_errors, item_plainly_good

TEMPLATE = {"cloud": "local", "command": ["run", "{{lr}}", "{{index}}"], "env": {"OUT": "/o", "lr": "x"}}
NEEDED = {"lr": ["command.1"]}
ITEMS = [
    {"lr": 0.1},
    {"lr": "a", "seed": 3, "fast": True},
    {"lr": 1, "index": 2},
    {"lr": 1, "CLOUDPIVOT_SET_INDEX": 2},
    {"lr": None},
    {"lr": [1]},
    {"lr": {"a": 1}},
    {"seed": 1},
    {"lr": 1, "1bad": 2},
    {"lr": 1, "bad-name": 2},
    "lr=1",
    ["lr", 1],
    None,
    {f"P{i}": i for i in range(MAX_ENV - 3)} | {"lr": 1},  # 498 parameters, the template's OUT and the index: fits
    {f"P{i}": i for i in range(MAX_ENV - 2)} | {"lr": 1},  # one more: over 500
    {f"P{i}": i for i in range(MAX_ENV - 3)} | {"lr": 1, "OUT": "/p"},  # shares OUT with the template: still fits
]


@pytest.mark.parametrize("item", ITEMS, ids=range(len(ITEMS)))
def test_the_quick_path_passes_only_items_the_full_check_finds_nothing_in(item):
    room = MAX_ENV - 1 - len(TEMPLATE["env"])
    if item_plainly_good(item, NEEDED, set(), room):
        assert item_errors(TEMPLATE, 0, item, NEEDED) == []


def test_a_name_learnt_good_does_not_let_a_bad_value_through():
    learnt: set[str] = set()
    assert item_plainly_good({"lr": 1}, NEEDED, learnt, 10) and learnt == {"lr"}
    assert not item_plainly_good({"lr": None}, NEEDED, learnt, 10)
    assert not item_plainly_good({"other": 1}, NEEDED, learnt, 10)  # lr missing


def test_a_large_set_of_usual_items_never_takes_the_full_check(monkeypatch):
    calls = []
    monkeypatch.setattr(templating, "item_errors", lambda *args: calls.append(args) or [])
    elements_check(TEMPLATE, count=None, items=[{"lr": i, "seed": i} for i in range(10_000)])
    assert calls == []


def test_the_faults_are_named_as_before():
    items = [{"lr": 1}] * 5 + [{"lr": None}, {"seed": 1}, {"lr": 1, "index": 1}, "x"]
    with pytest.raises(InvalidSpec) as raised:
        elements_check(TEMPLATE, count=None, items=items)
    assert [e["field"] for e in raised.value.errors] == ["items.5.lr", "items.6.lr", "items.7.index", "items.8"]
