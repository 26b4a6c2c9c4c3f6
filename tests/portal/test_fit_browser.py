"""Will it fit? in headless Chromium: as the submit form is filled the verdict beside the button changes
(starts now → never fits on the kmock cluster's largest node → waits on a full ResourceQuota), and the
launch form's verdict follows the chosen size on the development OpenStack. Nothing is submitted."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from cloudpivot.accounts.models import Quota
from resources.models import Instance
from tasks.models import Task
from tests.clusters.kube_api import NODES, RESOURCE_QUOTAS
from tests.plugins.browser import screenshot
from tests.plugins.kube import node
from tests.plugins.openstack import os_dev_connection

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_the_submit_form_says_whether_the_task_fits_as_it_is_filled(open_page, live, world, kube, kube_connection):
    kube.put(NODES, None, node("worker-1", cpu="8", memory="16Gi", gpus="1"))
    used = {"requests.cpu": "3", "requests.memory": "2Gi"}
    hard = {"requests.cpu": "4", "requests.memory": "128Gi"}
    kube.put(
        RESOURCE_QUOTAS,
        "tasks",
        {"metadata": {"name": "team"}, "spec": {"hard": hard}, "status": {"hard": hard, "used": used}},
    )
    page = open_page("bob")
    page.goto("/tasks/new")
    verdict = page.locator("#fit-verdict")
    expect(page.get_by_label("Cloud")).to_have_value("k3s-lab")
    page.get_by_label("Image").fill("python:3.12-slim")
    page.get_by_label("CPU").fill("1")
    page.get_by_label("Memory (MB)").fill("1024")
    expect(verdict).to_contain_text("Starts now")
    page.get_by_label("Memory (MB)").fill("65536")
    expect(verdict).to_contain_text("Never fits: memory 65536 MB > 16384 MB (node allocatable, largest node)")
    page.get_by_label("Memory (MB)").fill("4096")
    page.get_by_label("GPUs").fill("2")
    expect(verdict).to_contain_text("Never fits: GPUs 2 > 1 (node allocatable, largest node)")
    page.get_by_label("GPUs").fill("1")
    page.get_by_label("CPU").fill("2")
    expect(verdict).to_contain_text("Waits: 0 ahead, held by ResourceQuota tasks/team: CPU 3/4 in use, asks 2")
    page.get_by_label("Name").fill("train, 2 cores")
    page.get_by_label("Command").fill("python3\ntrain.py")
    screenshot(page, "task-submit-fit", full_page=True)
    # Another cloud: its own verdict (CloudPivot's quota on local), asked again once its fields came in.
    Quota.objects.create(project=world.alpha, connection=world.local, max_tasks=0)
    page.get_by_label("Cloud").select_option("local")
    expect(verdict).to_contain_text("Never fits: tasks 1 > 0 (project alpha's quota on local)")
    assert not Task.objects.exists()


def test_the_launch_form_says_whether_the_size_fits(open_page, live, world, openstack_cloud, settings):
    os_dev_connection(openstack_cloud, settings, world.alpha)
    page = open_page("bob")
    page.set_default_timeout(60_000)  # the first reads of a cold OpenStack connection take seconds on a busy host
    page.goto("/instances/new/")
    verdict = page.locator("#fit-verdict")
    page.get_by_label("Name").fill("fit-check")
    page.locator("#launch-sizes input[value='cp.tiny']").check()
    expect(verdict).to_contain_text("Starts now", timeout=30_000)
    page.locator("#launch-sizes input[value='cp.nohost']").check()
    expect(verdict).to_contain_text("Never fits: disk 5000000 GB >", timeout=30_000)
    expect(verdict).to_contain_text("(flavor cp.nohost vs the largest compute host)")
    screenshot(page, "instance-launch-fit", full_page=True)
    assert not Instance.objects.exists()
