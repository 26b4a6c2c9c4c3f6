"""`manage.py check_cloud CLOUD_ID`: reachability, credentials, permissions, in words."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command


def run(*args) -> str:
    from io import StringIO

    out = StringIO()
    call_command("check_cloud", *args, stdout=out)
    return out.getvalue()


def test_a_cluster_with_everything_allowed_passes(kube, kube_connection):
    out = run("k3s-lab")
    assert "k3s-lab (kubernetes): ok: Kubernetes v1." in out
    assert "ok      create jobs (batch) in namespace tasks: needed to start tasks" in out
    assert "everything CloudPivot needs is allowed" in out


def test_missing_permissions_are_named_and_fail_the_check(kube, kube_connection):
    kube.configure(
        permissions={("list", "batch", "jobs", ""), ("create", "batch", "jobs", ""), ("list", "", "pods", "")}
    )
    with pytest.raises(CommandError) as error:
        run("k3s-lab")
    message = str(error.value)
    assert "missing 4 permission(s)" in message
    for words in ("get jobs", "watch jobs", "delete jobs", "get pods/log"):
        assert words in message


def test_bad_credentials_fail_the_check(kube, kube_connection):
    kube.configure(token="rotated")
    with pytest.raises(CommandError, match="401 Unauthorized"):
        run("k3s-lab")


def test_the_local_cloud_prints_its_health(world):
    assert "local (local): ok: runs tasks on this host" in run("local")


def test_an_unknown_cloud_is_named(world):
    with pytest.raises(CommandError, match="no cloud connection 'nope' \\(known: local\\)"):
        run("nope")
