"""The orphan report in the admin, in headless Chromium against the shared real Daphne (`live`).

The cloud is the kmock Kubernetes API server on loopback; the Daphne process lists and deletes there
through the real `kubernetes` client when the admin clicks.
"""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import expect

from cloudpivot.accounts.models import AuditEntry
from orphans.models import OrphanFinding
from tests.clusters.kube_api import JOBS
from tests.plugins.kube import job, ours

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_an_admin_scans_sees_the_orphan_job_and_deletes_it_from_the_report(browser, live, kube, kube_connection, world):
    get_user_model().objects.create_superuser("root", "root@example.org", "pw-root-orphans")
    kube.put(JOBS, "tasks", job("cp-lost-b", ours("cp-lost-b")))
    kube.put(JOBS, "tasks", job("cp-kept-b", ours("cp-kept-b", **{"cloudpivot.io/protected": "true"})))
    kube.put(JOBS, "tasks", job("not-ours-b", {"app": "handmade"}))
    page = browser.new_page()
    try:
        page.goto(f"{live.url}/admin/login/?next=/admin/orphans/orphanfinding/")
        page.fill("input[name=username]", "root")
        page.fill("input[name=password]", "pw-root-orphans")
        page.click("input[type=submit]")
        expect(page.locator("#orphan-scan")).to_be_visible()

        page.click("#orphan-scan")

        expect(page.locator("ul.messagelist")).to_contain_text(
            "K3s-lab: 2 found, 0 resolved"
        )  # the admin capitalises messages
        rows = page.locator("#result_list tbody tr")
        expect(rows).to_have_count(2)
        expect(page.locator("#result_list")).not_to_contain_text("not-ours-b")
        lost = page.locator("#result_list tbody tr", has_text="cp-lost-b")
        expect(lost).to_contain_text("made for attempt cp-lost-b")
        kept = page.locator("#result_list tbody tr", has_text="cp-kept-b")
        expect(kept.locator("img[alt=True]")).to_have_count(1)  # the protected column

        lost.locator("input[name=_selected_action]").check()
        kept.locator("input[name=_selected_action]").check()
        page.select_option("select[name=action]", "delete_in_cloud")
        page.click("button[name=index]")

        messages = page.locator("ul.messagelist")
        expect(messages).to_contain_text("Asked the k3s-lab cloud to delete job cp-lost-b")
        expect(messages).to_contain_text("Job cp-kept-b is protected: labelled cloudpivot.io/protected")
    finally:
        page.close()
    assert set(kube.jobs()) == {"cp-kept-b", "not-ours-b"}
    assert OrphanFinding.objects.get(ref="cp-lost-b").state == "deleted"
    entry = AuditEntry.objects.get(action="resources:orphan-delete", object_ref="k3s-lab/job/cp-lost-b")
    assert (entry.outcome, entry.actor_name) == ("ok", "root")
