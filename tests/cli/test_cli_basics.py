"""The installed `cloudpivot` command against the session Daphne: login and contexts, listing, refusals,
idempotent submits, tokens, clouds, instances, completion. Nothing here needs a task to run."""

from __future__ import annotations

import json
import stat
import subprocess
import time

import pytest
import yaml

from cloudpivot.accounts.models import ApiToken
from tasks.models import Task
from tasks.portal import copy_commands
from tests import helpers
from tests.cli.support import BIN, Lines, spec_file

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

HELLO = {"cloud": "local", "command": ["python3", "-c", "print('hello')"]}


def test_version_help_and_usage_errors(cli):
    version = cli("--version")
    assert version.returncode == 0 and version.stdout.startswith("cloudpivot 0.")
    top = cli("--help")
    assert top.returncode == 0 and "examples:" in top.stdout and "81  with --wait: the task was CANCELLED" in top.stdout
    for command in (["task", "submit"], ["task", "logs"], ["instance", "create"], ["cloud", "inventory"], ["login"]):
        shown = cli(*command, "--help")
        assert shown.returncode == 0 and "examples:" in shown.stdout, command
    missing = cli("task", "submit")
    assert missing.returncode == 2 and "-f/--file" in missing.stderr
    group = cli("task")
    assert group.returncode == 2 and "submit" in group.stderr


def test_every_command_has_help_with_examples_and_docs_list_every_exit_status(cli):
    import argparse

    from cloudpivot_cli.main import build_parser  # the installed package's parser, read in-process for speed

    def parsers(parser, path=()):
        yield path, parser
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    yield from parsers(sub, (*path, name))

    found = list(parsers(build_parser()))
    assert len(found) > 35
    for path, parser in found:
        assert "\nexamples:\n  " in parser.format_help(), path
    assert "examples:" in cli("instance", "snapshot", "--help").stdout  # and as the command prints it
    statuses = [line.split()[0] for line in cli("--help").stdout.split("exit status:")[1].splitlines() if line.strip()]
    docs = (helpers.BASE_DIR / "docs" / "cli.md").read_text()
    assert len(statuses) == 17 and all(f"| {status} |" in docs for status in statuses), statuses


def test_without_a_login_the_command_says_what_to_run(cli):
    done = cli("task", "list")
    assert done.returncode == 1 and "cloudpivot login" in done.stderr


def test_login_stores_contexts_0600_and_the_environment_overrides_them(cli, daphne, world):
    refused = cli("login", "--url", daphne.url, "--token", "not-a-token")
    assert refused.returncode == 85 and "error:" in refused.stderr
    assert not (cli.home / ".config" / "cloudpivot" / "config.yaml").exists()

    alice = cli("login", "--url", daphne.url, "--token", world.tokens["alice"], "--context", "alice")
    assert alice.returncode == 0, alice.stderr
    assert "alpha (admin)" in alice.stdout
    bob = cli("login", "--url", daphne.url, "--context", "bob", input=world.tokens["bob"] + "\n")  # token on stdin
    assert bob.returncode == 0, bob.stderr
    path = cli.home / ".config" / "cloudpivot" / "config.yaml"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert yaml.safe_load(path.read_text())["current-context"] == "bob"

    listed = cli("context", "list").stdout.splitlines()
    assert listed[0].split() == ["CURRENT", "NAME", "URL"]
    assert [line.split()[:2] for line in listed[1:]] == [["alice", daphne.url], ["*", "bob"]]

    def token_names(*args, **env) -> list[str]:
        return [t["name"] for t in cli.json(*args, "token", "list", **env)]

    made = cli("--context", "alice", "token", "create", "alice-ci")  # a context for one command
    assert made.returncode == 0 and made.stdout.strip().startswith("cpt_")
    assert "alice-ci" not in token_names()  # bob's
    assert "alice-ci" in token_names("--context", "alice")
    assert cli("context", "use", "alice").returncode == 0
    assert "alice-ci" in token_names()
    assert "alice-ci" not in token_names(CLOUDPIVOT_TOKEN=world.tokens["bob"])  # the environment wins
    unknown = cli("context", "use", "nobody")
    assert unknown.returncode == 1 and "no context named 'nobody'" in unknown.stderr

    # the created token works, and revoking it ends that
    token = made.stdout.strip()
    assert cli("task", "list", CLOUDPIVOT_TOKEN=token).returncode == 0
    token_id = str(ApiToken.objects.get(name="alice-ci").pk)
    assert cli("token", "revoke", token_id).returncode == 0
    assert cli("task", "list", CLOUDPIVOT_TOKEN=token).returncode == 85


def test_a_refused_spec_prints_the_message_and_the_field_and_exits_84(logged_in, tmp_path):
    bad = spec_file(tmp_path, "bad.yaml", "cloud: local\ncommand: [python3, 1]\n")
    done = logged_in("task", "submit", "-f", str(bad))
    assert done.returncode == 84, done.stderr
    assert "error: invalid task document" in done.stderr and "field command.1: must be a string" in done.stderr
    typo = logged_in("task", "submit", "-f", "-", input=json.dumps(HELLO | {"comand": ["x"]}))
    assert typo.returncode == 84 and "field comand:" in typo.stderr
    malformed = spec_file(tmp_path, "broken.json", "{not json")
    assert logged_in("task", "submit", "-f", str(malformed)).returncode == 2
    assert logged_in("task", "submit", "-f", str(tmp_path / "missing.yaml")).returncode == 2
    assert Task.objects.count() == 0


def test_the_same_idempotency_key_makes_one_task_and_another_document_is_a_conflict(logged_in, tmp_path, world):
    spec = spec_file(tmp_path, "spec.json", HELLO | {"name": "once"})
    first = logged_in("task", "submit", "-f", str(spec), "--idempotency-key", "nightly-1")
    again = logged_in("task", "submit", "-f", str(spec), "--idempotency-key", "nightly-1")
    assert first.returncode == again.returncode == 0, (first.stderr, again.stderr)
    assert first.stdout.split()[1] == again.stdout.split()[1]
    assert "already submitted" in again.stdout
    assert Task.objects.filter(name="once").count() == 1
    other = spec_file(tmp_path, "other.json", HELLO | {"name": "other"})
    conflict = logged_in("task", "submit", "-f", str(other), "--idempotency-key", "nightly-1")
    assert conflict.returncode == 87 and "idempotency_key_reused" in conflict.stderr
    # without a key, each command is a new task (each carries a key of its own)
    logged_in("task", "submit", "-f", str(spec))
    logged_in("task", "submit", "-f", str(spec))
    assert Task.objects.filter(name="once").count() == 3
    assert set(Task.objects.values_list("idempotency_key", flat=True).filter(name="once")) >= {"nightly-1"}


def test_task_list_filters_and_prints_table_json_and_yaml(logged_in, tmp_path, world):
    for name, project in (("one", "alpha"), ("two", "alpha")):
        assert (
            logged_in(
                "task", "submit", "-f", "-", "--project", project, input=json.dumps(HELLO | {"name": name})
            ).returncode
            == 0
        )
    as_json = logged_in.json("task", "list")
    assert [t["name"] for t in as_json] == ["two", "one"] and all(t["project"] == "alpha" for t in as_json)
    as_yaml = yaml.safe_load(logged_in("task", "list", "-o", "yaml", "-q", "two").stdout)
    assert [t["name"] for t in as_yaml] == ["two"]
    assert logged_in.json("task", "list", "--state", "SUCCEEDED") == []
    assert len(logged_in.json("task", "list", "--limit", "1")) == 1
    table = logged_in("task", "list", "-o", "wide").stdout.splitlines()
    assert table[0].split()[:4] == ["ID", "NAME", "STATE", "EXIT"] and "OWNER" in table[0] and len(table) == 3
    got = yaml.safe_load(logged_in("task", "get", as_json[0]["id"]).stdout)
    assert got["id"] == as_json[0]["id"] and got["spec"]["command"] == HELLO["command"]
    missing = logged_in("task", "get", "00000000-0000-0000-0000-000000000000")
    assert missing.returncode == 86 and "not found" in missing.stderr
    assert logged_in("task", "list", "--state", "NOPE").returncode == 2


def test_task_list_watch_prints_each_new_or_changed_task(logged_in, world):
    watcher = logged_in.start("task", "list", "--watch", "-o", "json", "--interval", "0.3")
    lines = Lines(watcher.stdout)
    try:
        time.sleep(1)
        done = logged_in("task", "submit", "-f", "-", input=json.dumps(HELLO | {"name": "watched"}))
        first = json.loads(lines.next(timeout=30))
        assert first["id"] == done.stdout.split()[1] and first["state"] == "PENDING"
        assert logged_in("task", "cancel", first["id"]).returncode == 0
        changed = json.loads(lines.next(timeout=30))
        assert (changed["id"], changed["state"]) == (first["id"], "CANCELLED")
    finally:
        watcher.kill()


def test_the_portals_copy_as_cli_text_submits_the_task_again(logged_in, world, daphne):
    done = logged_in("task", "submit", "-f", "-", input=json.dumps(HELLO | {"name": "again", "env": {"A": "1"}}))
    task = Task.objects.get(pk=done.stdout.split()[1])
    text = copy_commands(task=task, base_url=daphne.url)["cli"]
    rerun = subprocess.run(
        ["bash", "-c", text],
        capture_output=True,
        text=True,
        env=logged_in.environment(PATH=f"{BIN.parent}:/usr/bin:/bin"),
        timeout=60,
    )
    assert rerun.returncode == 0, rerun.stderr
    copy = Task.objects.get(pk=rerun.stdout.split()[1])
    assert copy.pk != task.pk and copy.spec == task.spec | {"project": "alpha"} and copy.project == task.project


def test_clouds_and_what_the_api_does_not_offer(logged_in, world):
    clouds = logged_in.json("cloud", "list")
    assert [c["cloud_id"] for c in clouds] == ["local"]
    described = logged_in("cloud", "describe", "local")
    assert described.returncode == 0 and "Capabilities:" in described.stdout
    check = logged_in("cloud", "check", "local")
    assert check.returncode == 89 and "no API to check" in check.stderr
    inventory = logged_in("cloud", "inventory", "local", "nodes")
    assert inventory.returncode in (0, 86), inventory.stderr
    assert logged_in("cloud", "describe", "nowhere").returncode == 86


def test_instances_refusals_carry_the_field(logged_in, world):
    assert logged_in.json("instance", "list") == []
    done = logged_in("instance", "create", "vm1", "--cloud", "nowhere", "--flavor", "cp.tiny", "--image", "x")
    assert done.returncode == 84 and "field cloud:" in done.stderr, done.stderr
    usage = logged_in("instance", "create", "vm1", "--cloud", "local", "--image", "x")
    assert usage.returncode == 2 and "--flavor" in usage.stderr
    missing = logged_in("instance", "stop", "00000000-0000-0000-0000-000000000000")
    assert missing.returncode == 86


def test_completion_scripts_for_bash_zsh_and_fish(cli):
    script = cli("completion", "bash").stdout

    def complete(*words: str) -> list[str]:
        line = " ".join(f"'{w}'" for w in words)
        probe = (
            f'{script}\nCOMP_WORDS=(cloudpivot {line}); COMP_CWORD={len(words)}; _cloudpivot; echo "${{COMPREPLY[@]}}"'
        )
        return subprocess.run(["bash", "-c", probe], capture_output=True, text=True, check=True).stdout.split()

    assert complete("t") == ["task", "token"]
    tasks = [
        "submit",
        "list",
        "get",
        "describe",
        "logs",
        "events",
        "cancel",
        "retry",
        "release-hold",
        "outputs",
        "provenance",
        "--help",
    ]
    assert complete("task", "") == tasks
    assert complete("task", "submit", "--w") == ["--wait"]
    assert complete("--context", "x", "instance", "re") == ["resume", "reboot", "restore"]
    zsh = cli("completion", "zsh").stdout
    assert zsh.startswith("#compdef cloudpivot") and "bashcompinit" in zsh
    fish = cli("completion", "fish").stdout
    assert "complete -c cloudpivot -n '__fish_seen_subcommand_from task; and not __fish_seen_subcommand_from" in fish
    assert "-a submit -d 'submit a task document" in fish and "-l follow" in fish
    assert cli("completion", "tcsh").returncode == 2
