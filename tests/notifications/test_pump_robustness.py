"""Issue 34, item 2: one bad webhook receiver or one bad mail never stops or delays the notifications pump.

Hostile receivers are real TCP servers on loopback (tests/notifications/servers.py); the good receiver is the
signed-webhook receiver process (servers.start_receiver); mails go to a real SMTP server.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from django.utils import timezone

from notifications import jobs
from notifications.models import DeliveryState, FeedEvent, FeedSequence, MailCursor, WebhookDelivery
from tasks.models import Task, TaskEvent
from tests import builders, helpers
from tests.notifications.servers import (
    HOSTILE_KINDS,
    HostileReceiver,
    mail_times,
    received,
    smtp_server,
    start_receiver,
)


@pytest.fixture
def private_targets(settings):
    settings.WEBHOOK_ALLOW_PRIVATE_TARGETS = True  # the receivers are on loopback


@pytest.fixture
def maildir(tmp_path) -> Path:
    return tmp_path / "maildir"


@pytest.fixture
def smtp(settings, maildir):
    with smtp_server(settings, maildir) as read:
        yield read


@pytest.fixture
def good_receiver(api, tmp_path):
    """An endpoint of project alpha (every task.state) with a well-behaved receiver process behind it."""
    port = helpers.free_port()
    endpoint = subscribe(api, f"http://127.0.0.1:{port}/hooks")
    log = tmp_path / "good.jsonl"
    process = start_receiver(port, endpoint["secret"], log)
    yield log
    helpers.stop_process_group(process)


def subscribe(api, url: str) -> dict:
    response = api("alice").post(
        "/api/v1/webhooks", {"project": "alpha", "url": url, "event_types": ["task.state"]}, format="json"
    )
    assert response.status_code == 201, response.json()
    return response.json()


@pytest.mark.parametrize("kind", HOSTILE_KINDS)
def test_a_hostile_receiver_and_a_task_name_with_a_newline_delay_no_one_elses_webhooks_or_mails(
    world, api, private_targets, smtp, maildir, good_receiver, kind
):
    hostile = HostileReceiver(kind)
    try:
        subscribe(api, f"http://127.0.0.1:{hostile.port}/hooks")
        for user, wanted in (("bob", "all"), ("alice", "all")):
            assert api(user).put("/api/v1/email-preferences", {"task_end": wanted}, format="json").status_code == 200
        jobs.pump(seconds=0.1)  # the mail cursor starts here

        odd = builders.finished(world.bob, name="nightly")
        Task.objects.filter(pk=odd.pk).update(name="nightly\r\nBcc: mallory@example.org")  # as if an old row
        later = builders.finished(world.alice, name="report")
        wanted = {(str(e.task_id), e.seq) for e in TaskEvent.objects.filter(task__in=[odd, later], type="state")}
        started = time.time()
        jobs.pump(seconds=4)

        got = {(i["body"]["data"]["task"], i["body"]["data"]["data"]["task_seq"]) for i in received(good_receiver)}
        assert got == wanted
        late = [i["received_at"] - started for i in received(good_receiver) if i["received_at"] - started > 3]
        assert not late, f"the good receiver's deliveries waited {late} s behind the {kind} receiver"
        mails = {(m["To"], " ".join(str(m["Subject"]).split())) for m in smtp()}
        assert mails == {
            ("bob@example.org", "[CloudPivot] task nightly Bcc: mallory@example.org SUCCEEDED"),
            ("alice@example.org", "[CloudPivot] task report SUCCEEDED"),
        }
        assert all(not m["Bcc"] for m in smtp())
        assert all(at - started < 3 for at in mail_times(maildir))

        assert hostile.requests >= 1
        tried = WebhookDelivery.objects.filter(endpoint__url__contains=f":{hostile.port}/", attempts__gte=1)
        assert tried.exists()
        for delivery in tried:
            assert delivery.state == DeliveryState.PENDING and delivery.last_status is None, delivery.last_error
            assert delivery.last_error and delivery.last_duration_ms <= 12_000
    finally:
        hostile.close()


def test_a_mail_that_cannot_be_made_is_skipped_and_the_mails_after_it_still_go_out_once(world, api, smtp):
    assert api("alice").put("/api/v1/email-preferences", {"task_end": "all"}, format="json").status_code == 200
    jobs.pump(seconds=0.1)  # the mail cursor starts here
    odd = builders.finished(world.alice, name="nightly")
    Task.objects.filter(pk=odd.pk).update(name="nightly\nBcc: mallory@example.org")
    # a budget entry whose data lacks what its mail needs (a bug elsewhere, a hand-made row): its mail raises
    FeedEvent.objects.create(
        project=world.alpha, type="project.budget_warning", data={}, occurred_at=timezone.now(), source="test:broken"
    )
    builders.finished(world.alice, name="report")
    jobs.pump(seconds=0.1)
    subjects = sorted(" ".join(str(m["Subject"]).split()) for m in smtp())
    assert subjects == [
        "[CloudPivot] task nightly Bcc: mallory@example.org SUCCEEDED",
        "[CloudPivot] task report SUCCEEDED",
    ]
    top = FeedSequence.objects.get(pk=1).last_position
    assert MailCursor.objects.get(pk=1).last_position == top  # past every entry, the broken one included
    jobs.pump(seconds=0.1)
    assert len(smtp()) == 2  # nothing twice
