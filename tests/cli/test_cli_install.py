"""The README's commands from a fresh checkout: `pip install ./cli` into a new virtualenv, then the example.

The other CLI tests run the development install (requirements/dev.txt, editable); this one proves the package
installs on its own (its pyproject, its three dependencies, nothing from the server) and that the command it
installs does what the issue's "Done when" asks: `task submit -f spec.yaml --wait` on a task that exits 3
exits 3, and `task logs -f` shows a live task's lines as they come. pip uses whatever index the machine is
configured with (PyPI, or a local mirror / wheel directory through pip.conf).
"""

from __future__ import annotations

import shutil
import subprocess
import venv
from pathlib import Path

import pytest

from tasks.models import Task
from tests import helpers
from tests.cli.support import Cli, Lines, spec_file

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

README = helpers.BASE_DIR / "README.md"
INSTALL = "pip install ./cli"


def readme_block() -> str:
    """The README's shell block that starts with the install line, as written there."""
    text = README.read_text()
    assert f"```sh\n{INSTALL}\n" in text, "the README no longer installs the CLI with `pip install ./cli`"
    return INSTALL + "\n" + text.split(f"```sh\n{INSTALL}\n", 1)[1].split("```", 1)[0]


@pytest.fixture(scope="module")
def checkout(tmp_path_factory) -> Path:
    """What a fresh clone has of the CLI: its folder, without build leftovers of a development install."""
    root = tmp_path_factory.mktemp("clone")
    ignore = shutil.ignore_patterns("build", "*.egg-info", "__pycache__")
    shutil.copytree(helpers.BASE_DIR / "cli", root / "cli", ignore=ignore)
    return root


@pytest.fixture(scope="module")
def fresh_venv(tmp_path_factory) -> Path:
    """A new virtualenv (python -m venv) with nothing in it but pip."""
    path = tmp_path_factory.mktemp("venv") / "venv"
    venv.EnvBuilder(with_pip=True).create(path)
    return path


def activated(cli: Cli, fresh_venv: Path, **extra: str) -> dict[str, str]:
    """The environment of a shell where `. venv/bin/activate` was run: its bin first, no other Python's."""
    return cli.environment(VIRTUAL_ENV=str(fresh_venv), PATH=f"{fresh_venv / 'bin'}:/usr/bin:/bin", **extra)


def test_the_readme_installs_the_cli_into_a_fresh_venv_and_its_example_exits_3(
    cli, checkout, fresh_venv, daphne, world, worker
):
    script = readme_block().replace("http://127.0.0.1:8000", daphne.url)
    done = subprocess.run(
        ["bash", "-c", script],
        input=world.tokens["bob"] + "\n",  # "paste the printed token"
        capture_output=True,
        text=True,
        cwd=checkout,
        env=activated(cli, fresh_venv),
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    installed = fresh_venv / "bin" / "cloudpivot"
    assert installed.exists() and str(installed.resolve()).startswith(str(fresh_venv))
    assert "hi\nexit 3\n" in done.stdout and "STATE" in done.stdout
    assert "Successfully installed" in done.stdout and "cloudpivot-cli-0.1.0" in done.stdout
    # The installed package is the copy's, not the development one: nothing of the server came with it.
    listed = subprocess.run(
        [str(fresh_venv / "bin" / "python"), "-m", "pip", "list", "--format=freeze"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    names = {line.split("==")[0].lower() for line in listed.splitlines()}
    assert "django" not in names and {"cloudpivot-cli", "httpx", "pyyaml"} <= names


def test_the_installed_command_exits_3_and_follows_a_live_tasks_lines(
    cli, checkout, fresh_venv, daphne, world, worker, tmp_path
):
    installed = Cli(cli.home, activated(cli, fresh_venv), command=fresh_venv / "bin" / "cloudpivot")
    if not installed.command.exists():  # this test alone: install it the README's way first
        subprocess.run(
            ["bash", "-c", f"{INSTALL} --quiet"],
            cwd=checkout,
            env=installed.env,
            check=True,
            timeout=300,
            capture_output=True,
        )
    env = {"CLOUDPIVOT_URL": daphne.url, "CLOUDPIVOT_TOKEN": world.tokens["bob"]}
    spec = spec_file(tmp_path, "spec.yaml", "cloud: local\nname: three\ncommand: [sh, -c, 'echo three; exit 3']\n")
    waited = installed("task", "submit", "-f", str(spec), "--wait", timeout=180, **env)
    assert waited.returncode == 3, waited.stderr

    counter = "import time\nfor i in range(20):\n    print('line %02d' % i, flush=True)\n    time.sleep(0.25)\n"
    document = spec_file(tmp_path, "counter.yaml", {"cloud": "local", "command": ["python3", "-c", counter]})
    submitted = installed("task", "submit", "-f", str(document), **env)
    assert submitted.returncode == 0, submitted.stderr
    task_id = submitted.stdout.split()[1]
    follower = installed.start("task", "logs", "-f", task_id, **env)
    lines = Lines(follower.stdout)
    try:
        first = lines.next(timeout=120)
        assert first == "line 00\n"
        assert Task.objects.get(pk=task_id).state == "RUNNING"  # live: the line came while the task ran
        rest = lines.rest(timeout=120)
        follower.wait(timeout=10)
    finally:
        if follower.poll() is None:
            follower.kill()
    assert follower.returncode == 0
    assert first + rest == "".join(f"line {i:02d}\n" for i in range(20))
