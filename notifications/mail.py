"""Emails for people who asked (EmailPreference): a task of theirs ended, an operation they asked failed; and,
unasked, to a project's admins when its monthly budget reaches 80 % and 100 % (usage/budgets.py writes those
entries once a month each; like a paused webhook, that is the admins' business, at most two mails a month).

Read from the feed after the sequencer, in position order, from a cursor of their own (MailCursor): a mail
is sent, then the cursor moves past its entry (entry by entry), so a worker that dies in between sends that
one mail twice, never none. A mail that the SMTP server refuses, or that cannot be made at all (an entry
whose mail raises), is logged and skipped, never retried: the cursor moves past it all the same, so it holds
back no later mail (email is a courtesy here; the feed and webhooks are the reliable paths). Subjects are
one line: a line break in a task's name becomes a space.
"""

from __future__ import annotations

import logging
from smtplib import SMTPException

from django.conf import settings
from django.core.mail import send_mail

from cloudpivot.accounts.models import Membership, Role
from notifications.models import EmailPreference, FeedEvent, FeedSequence, MailCursor, TaskEndMail
from resources.models import Operation
from tasks.choices import TERMINAL
from tasks.models import Task

logger = logging.getLogger(__name__)
BATCH = 500
BUDGET_TYPES = ["project.budget_warning", "project.budget_exhausted"]


def mails_send() -> int:
    """Send the mails due for new feed entries; returns how many were sent.

    No transaction is held while talking to the SMTP server (under SQLite it would stop every writer); the
    cursor moves by compare-and-set afterwards, so two pumps at once may both mail an entry, never skip one.
    """
    top = FeedSequence.objects.filter(pk=1).values_list("last_position", flat=True).first() or 0
    start = MailCursor.objects.filter(pk=1).values_list("last_position", flat=True).first()
    if start is None:  # first run: mail what happens from now on, not the whole history
        MailCursor.objects.bulk_create([MailCursor(pk=1, last_position=top)], ignore_conflicts=True)
        return 0
    sent, end = 0, top
    if top > start:
        types = list(BUDGET_TYPES)  # always: their mails go to admins, asked or not
        if EmailPreference.objects.exclude(task_end=TaskEndMail.NONE, operation_failed=False).exists():
            types += ["task.state", "operation.state"]
        entries = list(
            FeedEvent.objects.filter(position__gt=start, position__lte=top, type__in=types).order_by("position")[:BATCH]
        )
        at = start
        for entry in entries:
            try:
                sent += mail_for(entry)
            except Exception:  # one mail that cannot be made (a bug, an odd row) must not hold back the others
                logger.exception("the mail for feed entry %s was not sent (skipped)", entry.position)
            if not MailCursor.objects.filter(pk=1, last_position=at).update(last_position=entry.position):
                return sent  # another pump moved the cursor: the rest is its work
            at = entry.position
        if len(entries) == BATCH:
            end = entries[-1].position
        start = at
    MailCursor.objects.filter(pk=1, last_position=start).update(last_position=max(start, end))
    return sent


def mail_for(entry: FeedEvent) -> int:
    if entry.type in BUDGET_TYPES:
        return budget_mail(entry)
    if entry.type == "task.state" and entry.data.get("to") in TERMINAL:
        task = Task.objects.select_related("owner", "project").filter(pk=entry.task_id).first()
        if task is None:
            return 0
        wanted = preference(task.owner).task_end
        if wanted == TaskEndMail.ALL or (wanted == TaskEndMail.FAILURES and entry.data["to"] != "SUCCEEDED"):
            name = task.name or task.short_id
            subject = f"[CloudPivot] task {name} {entry.data['to']}"
            body = (
                f"Your task {name} ({task.pk}) in project {task.project.slug} ended {entry.data['to']}.\n"
                f"{entry.message}\n\nexit code: {task.exit_code}\n{site_url()}/tasks/{task.pk}\n"
            )
            return send(task.owner, subject, body)
    if entry.type == "operation.state" and entry.data.get("state") == "failed":
        operation = Operation.objects.select_related("requested_by").filter(pk=entry.operation_id).first()
        asker = operation.requested_by if operation else None
        if asker is None or not preference(asker).operation_failed:
            return 0
        subject = f"[CloudPivot] {operation.action} failed"
        body = f"The {operation.action} you asked for failed: {operation.error_message}\n\noperation {operation.pk}\n"
        return send(operation.requested_by, subject, body)
    return 0


def budget_mail(entry: FeedEvent) -> int:
    """One mail to each active admin of the project with an address: where the month stands and what it holds."""
    data, slug = entry.data, entry.project.slug
    exhausted = entry.type == "project.budget_exhausted"
    words = "exhausted" if exhausted else "warning"
    subject = f"[CloudPivot] budget {words}: project {slug} at {data['percent']} % for {data['month']}"
    if exhausted and data["hard_stop"]:
        subject += ", new tasks held"
    if exhausted and data["hard_stop"]:
        holds = (
            "New tasks are held: they wait PENDING until the budget is raised or the month is over. "
            "Running tasks go on."
        )
    elif exhausted:
        holds = "Nothing is held (the budget has no hard stop): new tasks still start."
    elif data["hard_stop"]:
        holds = "At 100 % new tasks will be held (hard stop) until the budget is raised or the month is over."
    else:
        holds = "Nothing will be held at 100 % (the budget has no hard stop)."
    body = (
        f"Project {slug} has used {data['used_core_hours']} of its {data['budget_core_hours']} core-hour budget "
        f"for {data['month']} ({data['percent']} %).\n{holds}\n\n"
        f"Usage and budget: {site_url()}/projects/{slug}/usage/?month={data['month']}\n"
        "Platform admins set budgets in the admin (Project budgets). "
        f"You get this mail as an admin of project {slug}.\n"
    )
    admins = Membership.objects.filter(project_id=entry.project_id, role=Role.ADMIN, user__is_active=True)
    return sum(send(m.user, subject, body) for m in admins.select_related("user").order_by("user_id"))


def preference(user) -> EmailPreference:
    return EmailPreference.objects.filter(user=user).first() or EmailPreference(user=user)


def site_url() -> str:
    return getattr(settings, "CLOUDPIVOT_SITE_URL", "").rstrip("/")


def one_line(text: str) -> str:
    """A header value on one line (a task's name may hold a line break: it must not end the Subject)."""
    return " ".join(text.split())


def send(user, subject: str, body: str) -> int:
    if not user.email:
        return 0
    try:
        return send_mail(one_line(subject), body, None, [user.email])
    except (SMTPException, OSError, ValueError) as exc:  # ValueError: BadHeaderError, a malformed address
        logger.warning("mail to user %s not sent: %s", user.pk, exc)
        return 0
