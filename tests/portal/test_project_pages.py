"""The project pages with Django's test client: members and roles (admins change them, members only see,
outsiders get a 404), the last admin kept, quotas with what is in use, and the webhooks link.

alice: admin of alpha; bob: submitter in alpha; rita: reader in alpha; charlie: submitter in beta only.
"""

from __future__ import annotations

import re

import pytest
from allauth.account.models import EmailAddress
from django.contrib.auth import get_user_model

from cloudpivot.accounts.models import AuditEntry, Membership, Quota, Role
from notifications import webhooks
from tests.builders import running

pytestmark = pytest.mark.django_db


def member(world, name: str) -> Membership:
    return Membership.objects.get(project=world.alpha, user__username=name)


def roles(world) -> dict[str, str]:
    return dict(Membership.objects.filter(project=world.alpha).values_list("user__username", "role"))


# ---------------------------------------------------------------------------- seeing
def test_the_project_list_shows_my_projects_and_my_role(pages, world):
    response = pages("bob").get("/projects/")
    assert response.status_code == 200
    assert [(p.slug, p.role, p.member_count) for p in response.context["projects"]] == [("alpha", "submitter", 3)]
    assert b'data-project-row="beta"' not in response.content
    assert [p.slug for p in pages("charlie").get("/projects/").context["projects"]] == ["beta"]


@pytest.mark.parametrize("name", ["bob", "rita"])
def test_members_see_the_members_but_get_no_controls(pages, world, name):
    response = pages(name).get("/projects/alpha/")
    assert response.status_code == 200 and "accounts/project_detail.html" in [t.name for t in response.templates]
    content = response.content.decode()
    for user in ("alice", "bob", "rita"):
        assert f'data-member-row="{user}"' in content
    assert re.search(r'data-member-row="alice">.*?<span data-member-role>Admin</span>', content, re.S)
    assert "Add a member" not in content and 'name="action" value="remove"' not in content
    assert "Only the project's admins see and manage its webhooks." in content


def test_an_admin_gets_the_controls(pages, world):
    content = pages("alice").get("/projects/alpha/").content.decode()
    assert "Add a member" in content and content.count('name="action" value="remove"') == 3
    assert 'id="role-' in content


def test_outsiders_get_a_404_for_every_project_page(pages, world):
    rita_membership = member(world, "rita")
    charlie = pages("charlie")
    assert charlie.get("/projects/alpha/").status_code == 404
    assert charlie.post("/projects/alpha/members/", {"username": "charlie", "role": "admin"}).status_code == 404
    for data in ({"action": "remove"}, {"action": "role", "role": "admin"}):
        assert charlie.post(f"/projects/alpha/members/{rita_membership.pk}/", data).status_code == 404
    assert pages("bob").get("/projects/nope/").status_code == 404
    assert roles(world) == {"alice": "admin", "bob": "submitter", "rita": "reader"}


def test_a_member_of_another_project_is_a_404_through_this_ones_url(pages, world):
    charlies = Membership.objects.get(project=world.beta)
    assert pages("alice").post(f"/projects/alpha/members/{charlies.pk}/", {"action": "remove"}).status_code == 404
    assert Membership.objects.filter(pk=charlies.pk).exists()


# ---------------------------------------------------------------------------- changing
@pytest.mark.parametrize("name", ["bob", "rita"])
def test_members_who_are_not_admins_are_refused_with_403(pages, world, name):
    client = pages(name)
    alice = member(world, "alice")
    assert client.post("/projects/alpha/members/", {"username": "charlie", "role": "reader"}).status_code == 403
    assert client.post("/projects/alpha/members/", {"username": "", "role": "boss"}).status_code == 403
    assert client.post(f"/projects/alpha/members/{alice.pk}/", {"action": "role", "role": "reader"}).status_code == 403
    assert client.post(f"/projects/alpha/members/{alice.pk}/", {"action": "remove"}).status_code == 403
    assert roles(world) == {"alice": "admin", "bob": "submitter", "rita": "reader"}


def test_an_admin_adds_a_member_by_username_or_email(pages, world):
    alice = pages("alice")
    response = alice.post("/projects/alpha/members/", {"username": "charlie", "role": "reader"})
    assert response.status_code == 302 and response["Location"] == "/projects/alpha/"
    dana = get_user_model().objects.create_user("dana", "Dana@Example.org", "pw-dana")
    EmailAddress.objects.create(user=dana, email="Dana@Example.org", verified=True, primary=True)
    assert alice.post("/projects/alpha/members/", {"username": "dana@example.org", "role": "admin"}).status_code == 302
    added = {"charlie": "reader", "dana": "admin"}
    assert roles(world) == {"alice": "admin", "bob": "submitter", "rita": "reader", **added}
    assert pages("charlie").get("/projects/alpha/").status_code == 200  # charlie sees alpha now
    assert b"charlie added as Reader." in alice.get("/projects/alpha/").content
    assert dana.projects.filter(slug="alpha").exists()
    audit = AuditEntry.objects.filter(action="accounts:member_add").order_by("created_at", "id")
    assert [(a.actor_name, a.via, a.object_ref, a.outcome) for a in audit] == [("alice", "page", "alpha", "ok")] * 2


def test_an_email_nobody_verified_finds_nobody(pages, world):
    """An address someone typed into their profile could be anyone's: adding by email takes verified ones only."""
    get_user_model().objects.create_user("mallory", "dana@example.org", "pw-mallory")  # typed, never verified
    refused = pages("alice").post("/projects/alpha/members/", {"username": "dana@example.org", "role": "admin"})
    assert refused.status_code == 400 and b"no active user with the username or verified email" in refused.content
    assert "mallory" not in roles(world)


@pytest.mark.parametrize(
    ("data", "field", "words", "status"),
    [
        ({"username": "nobody", "role": "reader"}, "username", "no active user with the username or verified", 400),
        ({"username": "bob", "role": "reader"}, "username", "bob is already a member of alpha", 409),
        ({"username": "", "role": "reader"}, "username", "This field is required.", 400),
        ({"username": "charlie", "role": "boss"}, "role", "Select a valid choice", 400),
    ],
)
def test_bad_member_input_is_shown_next_to_the_field(pages, world, data, field, words, status):
    response = pages("alice").post("/projects/alpha/members/", data)
    assert response.status_code == status
    content = response.content.decode()
    errors = re.search(rf'<div class="field-errors" id="id_{field}_errors">(.*?)</div>', content, re.S)
    assert errors and words in errors.group(1)
    assert re.search(rf'name="{field}"[^>]*aria-invalid="true"', content)
    assert roles(world) == {"alice": "admin", "bob": "submitter", "rita": "reader"}


def test_an_inactive_user_cannot_be_added(pages, world):
    get_user_model().objects.create_user("gone", "gone@example.org", "pw", is_active=False)
    assert pages("alice").post("/projects/alpha/members/", {"username": "gone", "role": "reader"}).status_code == 400


def test_an_admin_changes_a_role_and_removes_a_member(pages, world):
    alice = pages("alice")
    rita = member(world, "rita")
    response = alice.post(f"/projects/alpha/members/{rita.pk}/", {"action": "role", "role": "submitter"})
    assert response.status_code == 302
    assert roles(world)["rita"] == "submitter"
    assert b"rita is now Submitter." in alice.get("/projects/alpha/").content
    bob = member(world, "bob")
    assert alice.post(f"/projects/alpha/members/{bob.pk}/", {"action": "remove"}).status_code == 302
    assert "bob" not in roles(world)
    assert pages("bob").get("/projects/alpha/").status_code == 404  # bob no longer sees it


def test_an_unknown_role_or_action_changes_nothing(pages, world):
    rita = member(world, "rita")
    response = pages("alice").post(f"/projects/alpha/members/{rita.pk}/", {"action": "role", "role": "boss"})
    assert response.status_code == 400 and b"unknown role &#x27;boss&#x27;" in response.content
    assert pages("alice").post(f"/projects/alpha/members/{rita.pk}/", {"action": "promote"}).status_code == 404
    assert roles(world)["rita"] == "reader"


def test_the_last_admin_can_be_neither_demoted_nor_removed(pages, world):
    alice_client, alice = pages("alice"), member(world, "alice")

    def act(client, membership, **data):
        return client.post(f"/projects/alpha/members/{membership.pk}/", data).status_code

    demoted = alice_client.post(f"/projects/alpha/members/{alice.pk}/", {"action": "role", "role": "reader"})
    assert demoted.status_code == 409
    content = demoted.content.decode()
    error = f'<p class="error" id="role-{alice.pk}-error" role="alert">'
    assert error + "alice is the last admin of alpha: make another member admin first</p>" in content
    assert f'id="role-{alice.pk}" name="role" aria-invalid="true"' in content
    assert alice_client.post(f"/projects/alpha/members/{alice.pk}/", {"action": "remove"}).status_code == 409
    assert roles(world)["alice"] == "admin"
    # with a second admin, the first may step down, and even leave
    bob = member(world, "bob")
    assert act(alice_client, bob, action="role", role="admin") == 302
    assert act(alice_client, alice, action="role", role="reader") == 302
    assert roles(world) == {"alice": "reader", "bob": "admin", "rita": "reader"}
    assert act(alice_client, bob, action="role", role="reader") == 403  # alice is no admin any more
    bob_client = pages("bob")
    assert act(bob_client, bob, action="remove") == 409
    response = bob_client.post(f"/projects/alpha/members/{alice.pk}/", {"action": "remove"})
    assert response.status_code == 302 and "alice" not in roles(world)


def test_an_admin_who_leaves_is_sent_to_the_project_list(pages, world):
    bob = member(world, "bob")
    bob.role = Role.ADMIN
    bob.save()
    response = pages("bob").post(f"/projects/alpha/members/{bob.pk}/", {"action": "remove"})
    assert response.status_code == 302 and response["Location"] == "/projects/"


def test_platform_staff_manage_members_of_any_project(pages, world):
    get_user_model().objects.create_superuser("root", "root@example.org", "pw-root")
    client = pages(None)
    client.force_login(get_user_model().objects.get(username="root"))
    assert client.get("/projects/beta/").status_code == 200
    assert client.post("/projects/beta/members/", {"username": "rita", "role": "reader"}).status_code == 302
    assert Membership.objects.filter(project=world.beta, user=world.rita, role="reader").exists()


# ---------------------------------------------------------------------------- quotas and webhooks
def test_the_page_shows_the_projects_quotas_with_use(pages, world):
    Quota.objects.create(project=world.alpha, max_tasks=4, max_vcpu=8)
    Quota.objects.create(project=world.beta, max_tasks=1)
    running(world.bob, resources={"cpu": 2})
    response = pages("rita").get("/projects/alpha/")
    cards = response.context["quota_cards"]
    assert [(c.project, c.scope) for c in cards] == [("alpha", "all clouds")]
    assert {b.label: (b.used, b.limit, b.percent) for b in cards[0].bars} == {
        "Tasks": ("1", "4", 25),
        "vCPU (tasks and instances)": ("2", "8", 25),
    }
    assert b'data-quota="alpha:all clouds"' in response.content and b"1 / 4" in response.content
    beta = pages("charlie").get("/projects/beta/").context["quota_cards"]
    assert [(c.project, [b.label for b in c.bars]) for c in beta] == [("beta", ["Tasks"])]


def test_a_project_without_quotas_says_so_and_shows_its_use(pages, world):
    running(world.bob, resources={"cpu": 2, "memory_mb": 256})
    response = pages("bob").get("/projects/alpha/")
    [card] = response.context["quota_cards"]
    assert not card.limited and b"No quotas set" in response.content
    assert {b.label: b.used for b in card.bars}["vCPU (tasks and instances)"] == "2"
    assert b'aria-label="alpha Memory (tasks and instances): 256 MB in use, no limit"' in response.content


def test_admins_see_the_webhook_count_and_link(pages, world, settings):
    settings.WEBHOOK_ALLOW_PRIVATE_TARGETS = True
    webhooks.webhook_endpoint_create(user=world.alice, project="alpha", url="http://127.0.0.1:9/h", event_types=[])
    content = pages("alice").get("/projects/alpha/").content.decode()
    assert re.search(r"data-webhook-count>1 webhook push", content) and 'href="/webhooks/"' in content
    assert "data-webhook-count" not in pages("bob").get("/projects/alpha/").content.decode()
