"""The dependency rules of docs/architecture.md, checked on the code itself.

Every module of every app is parsed with `ast` (imports inside functions count: they hide cycles,
they do not remove them; only `if TYPE_CHECKING:` blocks are skipped, they never run). The rules:

- no import cycle between modules, except those docs/architecture.md lists with a reason;
- no module imports another app's underscore names, nor uses private members only another app defines;
- each cloud SDK is imported only inside its backend package;
- the core of an app imports only its own app and the layers below it (interfaces may import any core);
- no source file over 600 lines (the single-file Runner excepted);
- the state of a Task, an Attempt and an Operation is written only by its one writer module;
- no test module (tests/**/test_*.py) imports another: what tests share lives in a support module or a fixture.

Every violation fails at once, with the path or the line that breaks the rule.
"""

from __future__ import annotations

import ast
import os
import re
import sys
from collections import defaultdict
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from tests.graphs import cycle_path, strongly_connected

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "architecture.md"
MAX_LINES = 600
LONG_FILE_ALLOWED: set[str] = set()

# Layers, lowest first: an app's core may import its own app and the layers below, nothing above or beside.
LAYERS = {
    "agent": 0,  # runner_api/agent: the host program, standard library only, imports nothing of ours
    "cloudpivot": 0,  # the project's shared pieces: exceptions, idempotency, api, realtime, common
    "accounts": 1,
    "clusters": 2,
    "tasks": 3,
    "resources": 3,
    "orphans": 4,
    "notifications": 4,  # the event feed and webhooks: copies of tasks' and resources' events
    "tasksets": 4,  # task sets: many tasks as one object, made Tasks through the tasks services
    "runner_api": 4,
    "results": 4,  # declared outputs of attempts: manifests, stores, signed download links (docs/data.md)
    "metrics": 4,  # clusters/metrics: sampling, charts and Prometheus figures of every app
    "usage": 5,  # usage accounting and budgets over tasks and resources; warnings through the feed
}
# Interfaces (HackSoft): parse input, call one service or selector, render. They may import any app's core.
INTERFACE = re.compile(
    r"\.(api|views|admin|urls|routing|consumers|portal|forms|filtersets|templatetags|jobs|apps|schema)(\.|$)"
    r"|\.management\.commands\."
)
# The project package's top: its wiring and the housekeeping over every app (retention). The rest of
# cloudpivot/ is the shared core at the bottom.
PROJECT_TOP = re.compile(r"^cloudpivot\.(urls|routing|views|quota_bars|asgi|wsgi|settings|retention)(\.|$)")
# Imports against the layers that stay, each with its reason (docs/architecture.md lists them too).
LAYER_EXCEPTIONS = {
    "tasks.services.attempts → runner_api.bootstrap": "the start path issues a VM's one-time bootstrap secret, "
    "whose table belongs to the Runner API; no module cycle (bootstrap imports tasks.models, not attempts)",
}
# Each SDK (with the libraries of its stack) and the one package that may import it.
SDK_HOMES = {
    "kubernetes": "clusters.backends.kubernetes",
    "openstack": "clusters.backends.openstack",
    "keystoneauth1": "clusters.backends.openstack",
}


@dataclass(frozen=True)
class Import:
    importer: str
    target: str  # the module imported (a project module, or the top-level name of a third-party one)
    names: tuple[str, ...]  # `from target import names`; empty for `import target`
    line: int


def _module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def modules(root: Path = ROOT) -> dict[str, Path]:
    """Every module of the apps (each top-level package but tests), migrations aside, by dotted name."""
    found = {}
    for package in sorted(p.parent for p in root.glob("*/__init__.py") if p.parent.name != "tests"):
        for path in package.rglob("*.py"):
            if "migrations" not in path.parts:
                found[_module_name(root, path)] = path
    return found


def app_of(module: str) -> str:
    """The app a module belongs to; clusters.metrics counts as its own, the read side on top (see the doc)."""
    parts = module.split(".")
    if parts[:2] == ["cloudpivot", "accounts"]:
        return "accounts"
    if parts[:2] == ["clusters", "metrics"]:
        return "metrics"
    if parts[:2] == ["runner_api", "agent"]:
        return "agent"
    return parts[0]


def _resolve(name: str, known: dict[str, Path]) -> str:
    """The project module a dotted name lives in (`clusters.backends.base.BackendError` → clusters.backends.base)."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name


def _type_checking_lines(tree: ast.AST) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
            for child in node.body:
                lines.update(range(child.lineno, (child.end_lineno or child.lineno) + 1))
    return lines


@cache
def imports(root: Path = ROOT) -> tuple[Import, ...]:
    """Every import statement of every module, wherever it is in the file."""
    known = modules(root)
    found: list[Import] = []
    for module, path in sorted(known.items()):
        tree = ast.parse(path.read_text(), filename=str(path))
        skipped = _type_checking_lines(tree)
        for node in ast.walk(tree):
            if getattr(node, "lineno", None) in skipped:
                continue
            if isinstance(node, ast.Import):
                for alias in node.names:
                    found.append(
                        Import(module, _resolve(alias.name, known) or alias.name.split(".")[0], (), node.lineno)
                    )
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: from the importer's package
                    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
                    base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
                names = tuple(alias.name for alias in node.names)
                submodules = [f"{base}.{name}" for name in names if f"{base}.{name}" in known]
                for submodule in submodules:  # `from tasks import jobs`: the module tasks.jobs
                    found.append(Import(module, submodule, (), node.lineno))
                if len(submodules) < len(names):
                    rest = tuple(name for name in names if f"{base}.{name}" not in known)
                    found.append(Import(module, _resolve(base, known) or base.split(".")[0], rest, node.lineno))
    return tuple(found)


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {module: set() for module in modules(root)}
    for edge in imports(root):
        if edge.target in graph and edge.target != edge.importer:
            graph[edge.importer].add(edge.target)
    return graph


def allowed_cycles() -> dict[frozenset[str], str]:
    """The cycles docs/architecture.md allows: under "## Allowed import cycles", one bullet each,
    "- `a.b` ↔ `c.d`: why"; a bullet without a reason is refused."""
    text = DOC.read_text()
    section = text.split("## Allowed import cycles", 1)[1].split("\n## ", 1)[0]
    allowed = {}
    for line in section.splitlines():
        if not line.startswith("- "):
            continue
        head, _, reason = line[2:].partition(":")
        members = frozenset(re.findall(r"`([\w.]+)`", head))
        assert len(members) > 1 and reason.strip(), (
            f"docs/architecture.md: an allowed cycle needs modules and a why: {line}"
        )
        allowed[members] = reason.strip()
    return allowed


def _report(what: str, found: list[str]) -> str:
    return f"{len(found)} {what} (see docs/architecture.md):\n  " + "\n  ".join(found)


# ---------------------------------------------------------------------------- (a) cycles
def cycles() -> list[str]:
    graph = import_graph()
    allowed = allowed_cycles()
    found = []
    for component in strongly_connected(graph):
        if frozenset(component) in allowed:
            continue
        path = cycle_path(graph, component)
        others = sorted(component - set(path))
        found.append(" → ".join(path) + (f" (the same cycle also holds {', '.join(others)})" if others else ""))
    return sorted(found)


def test_no_import_cycle_but_the_documented_ones():
    mine = cycles()
    assert not mine, _report("import cycles between modules", mine)


def test_every_documented_cycle_still_exists():
    """An allowed cycle that is gone is a stale exception: delete it from docs/architecture.md."""
    components = {frozenset(component) for component in strongly_connected(import_graph())}
    stale = [" ↔ ".join(sorted(members)) for members in allowed_cycles() if members not in components]
    assert not stale, _report("allowed cycles that no longer exist", stale)


# ---------------------------------------------------------------------------- (b) private names
def private_imports() -> list[str]:
    found = []
    for edge in imports():
        if edge.target not in modules() or app_of(edge.target) == app_of(edge.importer):
            continue
        private_module = any(part.startswith("_") and not part.startswith("__") for part in edge.target.split("."))
        names = [name for name in edge.names if name.startswith("_") and not name.startswith("__")]
        if private_module or names:
            what = ", ".join(names) if names else "the private module"
            found.append(f"{edge.importer} (line {edge.line}) imports {what} from {edge.target}")
    return sorted(found)


def test_no_module_imports_another_apps_underscore_names():
    assert not private_imports(), _report("imports of another app's private names", private_imports())


def private_member_uses() -> list[str]:
    """`x._name` where `_name` is defined (def, class, assignment) only in other apps: a borrowed private member.

    Names defined in the module's own app are not counted (the same word may be private in two apps), nor
    `self.`/`cls.` access, nor names no app defines (a library's own, like Django's `_meta`).
    """
    defined: dict[str, set[str]] = defaultdict(set)
    trees = {module: ast.parse(path.read_text()) for module, path in modules().items()}
    for module, tree in trees.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                name = node.name
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                name = node.attr
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                name = node.id
            else:
                continue
            if name.startswith("_") and not name.startswith("__"):
                defined[name].add(app_of(module))
    found = []
    for module, tree in trees.items():
        for node in ast.walk(tree):
            if not isinstance(node, ast.Attribute) or not node.attr.startswith("_") or node.attr.startswith("__"):
                continue
            if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                continue
            owners = defined.get(node.attr, set())
            if owners and app_of(module) not in owners:
                found.append(f"{module} (line {node.lineno}) uses {ast.unparse(node)}, private to {', '.join(owners)}")
    return sorted(found)


def test_no_module_uses_private_members_of_another_app():
    mine = private_member_uses()
    assert not mine, _report("uses of another app's private members", mine)


# ---------------------------------------------------------------------------- (c) cloud SDKs
def sdk_imports() -> list[str]:
    found = []
    for edge in imports():
        home = SDK_HOMES.get(edge.target.split(".")[0]) if edge.target not in modules() else None
        if home and edge.importer != home and not edge.importer.startswith(home + "."):
            found.append(f"{edge.importer} (line {edge.line}) imports {edge.target}, which only {home} may import")
    return sorted(found)


def test_each_cloud_sdk_is_imported_only_in_its_backend_package():
    mine = sdk_imports()
    assert not mine, _report("cloud SDK imports outside their backend package", mine)


# ---------------------------------------------------------------------------- layers
def is_interface(module: str) -> bool:
    if app_of(module) == "cloudpivot":
        return bool(PROJECT_TOP.match(module))
    return bool(INTERFACE.search(module))


def layer_violations() -> list[str]:
    found = set()
    for edge in imports():
        if edge.target not in modules() or is_interface(edge.importer):
            continue
        mine, theirs = app_of(edge.importer), app_of(edge.target)
        if mine != theirs and LAYERS.get(theirs, 99) >= LAYERS.get(mine, 99):
            if f"{edge.importer} → {edge.target}" in LAYER_EXCEPTIONS:
                continue
            found.add(f"{edge.importer} → {edge.target} (line {edge.line}: {mine} may not depend on {theirs})")
    return sorted(found)


def test_every_app_is_in_a_layer():
    apps = {app_of(module) for module in modules()}
    assert apps <= set(LAYERS), (
        f"apps without a layer (add them to LAYERS and docs/architecture.md): {apps - set(LAYERS)}"
    )


def test_the_core_of_an_app_depends_only_on_lower_layers():
    mine = layer_violations()
    assert not mine, _report("imports against the layers", mine)


# ---------------------------------------------------------------------------- (d) file sizes
def source_files() -> list[Path]:
    """Every .py file of the repository (apps, tests, deploy), not the virtualenv or var/."""
    found = []
    for directory, subdirectories, files in os.walk(ROOT):
        subdirectories[:] = sorted(d for d in subdirectories if not d.startswith(".") and d != "var")
        found += [Path(directory) / name for name in sorted(files) if name.endswith(".py")]
    return found


def long_files() -> list[str]:
    found = []
    for path in source_files():
        relative = path.relative_to(ROOT).as_posix()
        lines = len(path.read_text().splitlines())
        if lines > MAX_LINES and relative not in LONG_FILE_ALLOWED:
            found.append(f"{relative} has {lines} lines (at most {MAX_LINES})")
    return found


def test_no_source_file_is_over_600_lines():
    mine = long_files()
    assert not mine, _report("files too long", mine)


# ---------------------------------------------------------------------------- (e) one writer per stateful row
# The state of each of these rows is written by one module (docs/architecture.md, "One writer per row"); any other
# assignment of it, or a queryset write of it, is a second writer. Reads (filter, exclude, comparisons) are free.
STATE_WRITERS = {
    "TaskState": "tasks.services.lifecycle",
    "AttemptState": "tasks.services.lifecycle",
    "OperationState": "resources.services.operations",
    "TaskSetState": "tasksets.services.lifecycle",
}
BORN_BY = {"Operation": "resources.services.operations"}  # rows whose birth is a state too
WRITING_CALLS = {"update", "create", "bulk_create", "get_or_create", "update_or_create"}


def _states_named(node: ast.AST) -> set[str]:
    """The state enums whose members `node` mentions (`AttemptState.RUNNING` → AttemptState)."""
    return {
        sub.value.id
        for sub in ast.walk(node)
        if isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name) and sub.value.id in STATE_WRITERS
    }


def _targets(node: ast.AST) -> list[ast.AST]:
    return [leaf for target in getattr(node, "targets", [getattr(node, "target", None)]) for leaf in ast.walk(target)]


def state_writes(root: Path = ROOT) -> list[str]:
    found = []
    for module, path in modules(root).items():
        if module.endswith("choices"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            written: set[str] = set()
            if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign) and node.value is not None:
                if any(isinstance(t, ast.Attribute) and t.attr == "state" for t in _targets(node)):
                    written = _states_named(node.value)
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                if node.func.attr in WRITING_CALLS:
                    written = {name for kw in node.keywords if kw.arg == "state" for name in _states_named(kw.value)}
                receiver = node.func.value
                if node.func.attr == "create" and isinstance(receiver, ast.Attribute) and receiver.attr == "objects":
                    model = receiver.value.id if isinstance(receiver.value, ast.Name) else ""
                    if model in BORN_BY and BORN_BY[model] != module:
                        found.append(f"{path.relative_to(root)}:{node.lineno}: {model} is born in {BORN_BY[model]}")
            for name in sorted(written):
                if STATE_WRITERS[name] != module:
                    found.append(f"{path.relative_to(root)}:{node.lineno}: writes a {name}; only {STATE_WRITERS[name]}")
    return found


def test_each_stateful_row_has_one_writer():
    mine = state_writes()
    assert not mine, _report("state written outside its one writer", mine)


def test_the_state_rule_sees_an_assignment_a_tuple_and_a_queryset_update(tmp_path):
    package = tmp_path / "shop"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "sneaky.py").write_text(
        "def f(attempt, now):\n"
        "    attempt.state = AttemptState.LOST\n"
        "    attempt.state, attempt.at = AttemptState.RUNNING, now\n"
        "    Attempt.objects.filter(pk=1, state=AttemptState.CREATED).update(state=AttemptState.STARTING)\n"
        "    Operation.objects.create(action='stop')\n"
        "    return attempt.state == AttemptState.RUNNING\n"
    )
    modules.cache_clear()
    try:
        found = state_writes(tmp_path)
    finally:
        modules.cache_clear()
    assert [line.split(": ")[0] for line in found] == [f"shop/sneaky.py:{n}" for n in (2, 3, 4, 5)], found


def upward_calls_in_code(root: Path = ROOT) -> set[str]:
    """Each `register_*` function and each module-level `X = Signal()` of the apps, as `module.name`."""
    found = set()
    for module, path in modules(root).items():
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.FunctionDef) and node.name.startswith("register_"):
                found.add(f"{module}.{node.name}")
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
                called = node.value.func
                if getattr(called, "id", getattr(called, "attr", "")) == "Signal":
                    found.update(f"{module}.{target.id}" for target in node.targets if isinstance(target, ast.Name))
    return found


def upward_calls_listed() -> set[str]:
    section = DOC.read_text().split("## Calls that go up the layers", 1)[1].split("\n## ", 1)[0]
    return {name for line in section.splitlines() for name in re.findall(r"^- `([\w.]+)`", line)}


def test_every_registry_and_signal_is_listed_as_a_call_up_the_layers_and_every_listed_one_exists():
    code, listed = upward_calls_in_code(), upward_calls_listed()
    assert not code - listed, _report("registries or signals missing from docs/architecture.md", sorted(code - listed))
    assert not listed - code, _report("listed in docs/architecture.md but not in the code", sorted(listed - code))


# ---------------------------------------------------------------------------- the checker itself
def test_the_checker_finds_a_cycle_hidden_in_a_function_and_says_it_as_a_path(tmp_path):
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "__init__.py").write_text("")
    (tmp_path / "app" / "jobs.py").write_text("def run():\n    from app.services import work\n    work()\n")
    (tmp_path / "app" / "services.py").write_text("from app import jobs\n")
    (tmp_path / "app" / "models.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from app.services import work\n"
    )
    graph = import_graph(tmp_path)
    assert graph == {"app": set(), "app.jobs": {"app.services"}, "app.services": {"app.jobs"}, "app.models": set()}
    [component] = strongly_connected(graph)
    assert cycle_path(graph, component) == ["app.jobs", "app.services", "app.jobs"]


AGENT_DIR = ROOT / "runner_api" / "agent"
AGENT_OLDEST_PYTHON = (3, 8)  # docs/runner.md: the Runner and the host agent run on stock cloud images


def test_the_agent_programs_import_only_the_standard_library_and_each_other_and_parse_for_python_3_8():
    """They are copied to hosts and VMs as they are: no third-party package, nothing of CloudPivot's."""
    siblings = {path.stem for path in AGENT_DIR.glob("*.py")}
    problems = []
    for path in sorted(AGENT_DIR.glob("*.py")):
        text = path.read_text()
        try:
            tree = ast.parse(text, str(path), feature_version=AGENT_OLDEST_PYTHON)
        except SyntaxError as exc:
            problems.append(f"{path.name}: does not parse as Python 3.8 ({exc.msg}, line {exc.lineno})")
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if name.startswith("runner_api.agent"):  # the siblings again, as the tests import them
                    top = name.removeprefix("runner_api.agent").lstrip(".").split(".")[0] or "cloudpivot_agent"
                if top not in sys.stdlib_module_names and top not in siblings and top != "__future__":
                    problems.append(f"{path.name}:{node.lineno}: imports {name}, not of the standard library")
    assert not problems, "\n".join(problems)


# ---------------------------------------------------------------------------- (f) each app writes its own rows
ORM_WRITES = {"create", "update", "bulk_create", "bulk_update", "delete", "get_or_create", "update_or_create"}
# Housekeeping over every app, on purpose (docs/architecture.md): retention removes what each app keeps.
CROSS_APP_WRITERS_ALLOWED = {"cloudpivot.retention"}
# A model whose table lives in one app and whose rows another owns: the metrics' samples (docs/architecture.md).
MODEL_OWNERS = {"MetricSample": "metrics"}


def cross_app_writes(root: Path = ROOT) -> list[str]:
    """`Model.objects….create/update/delete…` of a model another app owns: that app's service should do it."""
    found = []
    for module, path in modules(root).items():
        if module in CROSS_APP_WRITERS_ALLOWED or app_of(module) == "agent":
            continue
        tree = ast.parse(path.read_text(), str(path))
        owners = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.endswith(".models"):
                owner = node.module.removesuffix(".models")
                if owner in modules(root) or f"{owner}.models" in modules(root):
                    for alias in node.names:
                        owners[alias.asname or alias.name] = MODEL_OWNERS.get(alias.name, app_of(owner))
        for node in ast.walk(tree):
            if not (
                isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ORM_WRITES
            ):
                continue
            base, chain = node.func.value, []
            while isinstance(base, ast.Call | ast.Attribute):
                chain += [base.attr] if isinstance(base, ast.Attribute) else []
                base = base.func if isinstance(base, ast.Call) else base.value
            if (
                isinstance(base, ast.Name)
                and "objects" in chain
                and owners.get(base.id, app_of(module)) != app_of(module)
            ):
                found.append(f"{module}:{node.lineno} writes {owners[base.id]}'s {base.id} ({node.func.attr})")
    return found


def test_each_app_writes_only_its_own_rows():
    mine = cross_app_writes()
    assert not mine, _report("ORM writes to another app's model (call that app's service)", mine)


def test_the_cross_app_rule_sees_a_write_through_a_queryset_chain(tmp_path):
    for app, text in {
        "alpha": "from django.db import models\n\n\nclass Thing(models.Model):\n    pass\n",
        "beta": "from alpha.models import Thing\n\n\ndef clear():\n    Thing.objects.filter(pk=1).update(x=2)\n",
    }.items():
        (tmp_path / app).mkdir()
        (tmp_path / app / "__init__.py").write_text("")
        (tmp_path / app / ("models.py" if app == "alpha" else "jobs.py")).write_text(text)
    assert cross_app_writes(tmp_path) == ["beta.jobs:5 writes alpha's Thing (update)"]


# ---------------------------------------------------------------------------- (g) test modules import no test module
# Test modules that still import another, each with its reason; delete the entry once its import is gone.
TEST_IMPORTS_ALLOWED: set[str] = set()


def imports_of_test_modules(root: Path = ROOT) -> list[str]:
    """`path:line imports module` for each import of a test module in a test module (relative ones resolved,
    imports inside functions too): `from tests.x.test_y import …`, `from .test_y import …`, `from . import test_y`."""
    found = []
    for path in sorted((root / "tests").rglob("test_*.py")):
        relative = path.relative_to(root)
        package = list(relative.parent.parts)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: from the importer's package
                    base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
                targets = [base] + [f"{base}.{alias.name}" for alias in node.names]
            else:
                continue
            for target in targets:
                parts = target.split(".")
                if parts[0].startswith("test_") or (parts[0] == "tests" and any(p.startswith("test_") for p in parts)):
                    found.append((relative.as_posix(), node.lineno, target))
                    break
    return [f"{path}:{line} imports {target}" for path, line, target in sorted(found)]


def test_no_test_module_imports_another_test_module():
    found = imports_of_test_modules()
    mine = [line for line in found if line.split(":")[0] not in TEST_IMPORTS_ALLOWED]
    assert not mine, _report("test modules importing a test module (move what they share out of it)", mine)
    stale = sorted(TEST_IMPORTS_ALLOWED - {line.split(":")[0] for line in found})
    assert not stale, f"in TEST_IMPORTS_ALLOWED but importing no test module now (delete them): {stale}"


def test_the_test_import_rule_sees_absolute_relative_and_hidden_imports(tmp_path):
    (tmp_path / "tests" / "area").mkdir(parents=True)
    (tmp_path / "tests" / "area" / "support.py").write_text("from tests.area.test_b import x\n")  # not a test module
    (tmp_path / "tests" / "area" / "test_a.py").write_text(
        "from tests.area.test_b import helper\nfrom . import support, test_b\nfrom .support import fine\n"
        "import tests.area.test_b\nfrom tests.area import test_b\nfrom ..other.test_c import y\n"
        "from tests import builders, helpers\ndef f():\n    from .test_b import hidden\n"
    )
    assert imports_of_test_modules(tmp_path) == [
        f"tests/area/test_a.py:{line} imports {target}"
        for line, target in [(1, "tests.area.test_b"), (2, "tests.area.test_b"), (4, "tests.area.test_b"),
                             (5, "tests.area.test_b"), (6, "tests.other.test_c"), (9, "tests.area.test_b")]
    ]  # fmt: skip
