"""The audit catalogue (issue 30, item 5): every action an entry may carry is in one list, the code's and
docs/audit.md's are the same, and an entry the database does not take is spilled, counted and loaded back."""

from __future__ import annotations

import ast
import inspect
import json
import re
from pathlib import Path

import pytest
from django.urls import URLResolver, get_resolver
from prometheus_client.parser import text_string_to_metric_families

from cloudpivot.accounts import audit_catalogue
from cloudpivot.accounts.audit import audit_save, audit_spill_load, audit_system, spilled_audit_entries
from cloudpivot.accounts.models import AuditEntry
from clusters.metrics.prometheus import render

ROOT = Path(__file__).resolve().parents[2]
WRITES = {"post", "put", "patch", "delete"}
NOT_AUDITED = ("runner",)  # /runner/… is machine traffic (cloudpivot/accounts/audit.py)


def view_names(resolver=None, namespaces=()):
    """(view_name, callback) of every URL pattern, named as Django's ResolverMatch names it."""
    for pattern in (resolver or get_resolver()).url_patterns:
        if isinstance(pattern, URLResolver):
            inner = (*namespaces, pattern.namespace) if pattern.namespace else namespaces
            yield from view_names(pattern, inner)
            continue
        func = getattr(pattern.callback, "view_class", pattern.callback)
        path = f"{func.__module__}.{func.__name__}" if hasattr(func, "__name__") else type(func).__name__
        yield ":".join([*namespaces, pattern.name or path]), pattern.callback


def takes_writes(callback) -> bool:
    """A DRF route with a writing action, a class-based view with a writing handler, or a function view whose
    code (or a decorator's) handles POST."""
    actions = getattr(callback, "actions", None)
    if actions:
        return bool(set(actions) & WRITES)
    cls = getattr(callback, "cls", None) or getattr(callback, "view_class", None)
    if cls is not None:
        return any(hasattr(cls, method) for method in WRITES)
    sources, func = [], callback
    while func is not None:
        try:
            sources.append(inspect.getsource(func))
        except (OSError, TypeError):
            pass
        func = getattr(func, "__wrapped__", None)
    return "POST" in "\n".join(sources)


def test_every_view_that_takes_writes_is_in_the_catalogue():
    missing = sorted(
        name
        for name, callback in view_names()
        if not name.startswith(NOT_AUDITED) and takes_writes(callback) and not audit_catalogue.catalogued(name)
    )
    assert not missing, f"add these to cloudpivot/accounts/audit_catalogue.py and docs/audit.md: {missing}"


def written_actions() -> set[str]:
    """The literal actions the code hands to an audit writer (`action=` or a first argument like "app:step")."""
    found = set()
    for path in ROOT.rglob("*.py"):
        if {".venv", "tests", "migrations", "cli", "node_modules"} & set(path.relative_to(ROOT).parts):
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "action" for t in node.targets):
                values = [node.value]
            elif isinstance(node, ast.Call) and (getattr(node.func, "id", "") or getattr(node.func, "attr", "")) in (
                "audit_system",
                "_audit",
            ):
                values = [kw.value for kw in node.keywords if kw.arg == "action"] + node.args[:2]
            else:
                continue
            found |= {
                v.value for v in values if isinstance(v, ast.Constant) and re.fullmatch(r"[\w-]+:[\w-]+", str(v.value))
            }
    return found


def test_every_action_the_code_writes_is_in_the_catalogue():
    actions = written_actions()
    assert {"tasks:debug-hold-started", "resources:orphan-delete", "accounts:membership-grant"} <= actions
    assert not sorted(a for a in actions if not audit_catalogue.catalogued(a))


def test_docs_audit_md_lists_the_catalogue_and_nothing_else():
    text = (ROOT / "docs" / "audit.md").read_text()
    rows = re.findall(r"^\| `([^`]*)`", text, flags=re.MULTILINE)
    documented = {row.removesuffix("…") for row in rows}
    assert documented == set(audit_catalogue.ACTIONS) | set(audit_catalogue.FAMILIES)
    assert len(rows) == len(documented)


@pytest.mark.django_db
def test_an_action_outside_the_catalogue_is_recorded_marked(caplog):
    entry = audit_system(action="tasks:not-in-the-catalogue", object_ref="x", details={"n": 1})
    assert AuditEntry.objects.get(pk=entry.pk).details == {"n": 1, "uncatalogued": True}
    assert "'tasks:not-in-the-catalogue' is not in the catalogue" in caplog.text


@pytest.mark.django_db(transaction=True)
def test_an_entry_the_database_refuses_is_spilled_counted_and_loaded_back(settings, tmp_path):
    from django.db import transaction

    settings.AUDIT_SPILL_FILE = tmp_path / "audit-spill.jsonl"
    with transaction.atomic():
        refused = AuditEntry(
            actor_name="bob", via="api", action="tasks-api:task-cancel", method="POST", path="/api/v1/tasks/1/cancel",
            status_code=-1, outcome="ok", details={},
        )  # fmt: skip
        audit_save(refused)  # a CHECK constraint refuses it: spilled, and the transaction goes on
        assert AuditEntry.objects.count() == 0
    assert spilled_audit_entries() == 1
    spilled = json.loads(settings.AUDIT_SPILL_FILE.read_text())
    assert spilled["action"] == "tasks-api:task-cancel" and spilled["status_code"] == -1
    assert oct(settings.AUDIT_SPILL_FILE.stat().st_mode & 0o777) == "0o600"
    families = {f.name: f for f in text_string_to_metric_families(render().decode())}
    assert families["cloudpivot_audit_spilled_entries"].samples[0].value == 1

    # The database takes it once the cause is gone (here: a status it accepts), with the time it was made.
    settings.AUDIT_SPILL_FILE.write_text(json.dumps(spilled | {"status_code": 202}) + "\n")
    assert audit_spill_load() == 1
    loaded = AuditEntry.objects.get()
    assert (loaded.action, loaded.status_code, loaded.actor_name) == ("tasks-api:task-cancel", 202, "bob")
    assert loaded.created_at.isoformat() == spilled["created_at"]
    assert spilled_audit_entries() == 0 and not settings.AUDIT_SPILL_FILE.exists()
