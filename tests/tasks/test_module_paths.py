"""Every import path inside the tasks app is one-way, counting imports inside functions.

Services queue jobs through tasks/dispatch.py by their dotted names; jobs call services;
nothing imports back (issue 14).
"""

from __future__ import annotations

import ast
from pathlib import Path

from django.conf import settings

APP = Path(settings.BASE_DIR) / "tasks"


def module_name(path: Path) -> str:
    parts = path.relative_to(APP.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path, modules: set[str]) -> set[str]:
    """The tasks modules `path` imports anywhere in it (a package's own submodules count as themselves)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found |= {f"{node.module}.{alias.name}" for alias in node.names} | {node.module}
    return {name for name in found if name in modules}


def import_graph() -> dict[str, set[str]]:
    files = {module_name(path): path for path in APP.rglob("*.py") if "migrations" not in path.parts}
    modules = set(files)
    graph = {name: imports_of(path, modules) - {name} for name, path in files.items()}
    # A package's __init__ re-exports its modules; importing a submodule is not an import of the package.
    return {name: {t for t in targets if not name.startswith(t + ".")} for name, targets in graph.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    found, done = [], set()

    def visit(name: str, path: list[str]) -> None:
        if name in path:
            found.append(path[path.index(name) :] + [name])
            return
        if name in done:
            return
        for target in sorted(graph.get(name, ())):
            visit(target, path + [name])
        done.add(name)

    for name in sorted(graph):
        visit(name, [])
    return found


def test_no_import_cycle_in_the_tasks_app():
    graph = import_graph()
    # The compatibility module of the old paths is a leaf nobody in the app imports.
    assert not [name for name, targets in graph.items() if "tasks.services.execution" in targets]
    assert cycles(graph) == []


def test_services_never_import_the_jobs_and_the_jobs_only_call_services():
    graph = import_graph()
    assert [name for name, targets in graph.items() if "tasks.jobs" in targets] == []
    assert graph["tasks.jobs"] == {"tasks.services"}
