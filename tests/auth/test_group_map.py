"""The OIDC group map: parsing, the startup check, and the membership sync that logins run.

The sync is the service the login signal calls (the browser test drives it through a real login);
here its edge cases run directly against the database.
"""

from __future__ import annotations

import json

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from cloudpivot.accounts.checks import group_map_check
from cloudpivot.accounts.group_map import GroupMapError, granted_roles, parse_group_map
from cloudpivot.accounts.group_sync import claimed_groups, memberships_sync_from_groups
from cloudpivot.accounts.models import AuditEntry, Membership, Project, Role

MAP = {
    "alpha-admins": {"alpha": "admin"},
    "alpha-readers": {"alpha": "reader"},
    "staff": {"alpha": "submitter", "beta": "reader"},
}


def test_the_highest_role_wins_across_groups():
    assert granted_roles(MAP, ["alpha-readers", "staff"]) == {"alpha": "submitter", "beta": "reader"}
    assert granted_roles(MAP, ["alpha-readers", "alpha-admins", "staff"]) == {"alpha": "admin", "beta": "reader"}
    assert granted_roles(MAP, ["unknown"]) == {}


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("{not json", "not valid JSON"),
        ('["alpha"]', "must be a JSON object"),
        ('{"g": "alpha"}', "group 'g': must map to"),
        ('{"g": {}}', "group 'g': must map to"),
        ('{"g": {"alpha": "owner"}}', "role must be one of reader, submitter, admin, not 'owner'"),
    ],
)
def test_a_bad_map_is_refused_with_the_part_at_fault(value, message):
    with pytest.raises(GroupMapError, match=message):
        parse_group_map(value)


def test_claimed_groups_accepts_a_list_a_single_string_or_nothing():
    assert claimed_groups({"groups": ["a", "b"]}, "groups") == ["a", "b"]
    assert claimed_groups({"groups": "a"}, "groups") == ["a"]
    assert claimed_groups({}, "groups") == []
    assert claimed_groups({"roles": ["a"]}, "groups") == []


# ---------------------------------------------------------------------------- the startup check
def test_the_check_passes_for_a_map_of_existing_projects(world, settings):
    settings.CLOUDPIVOT_OIDC_GROUP_MAP = json.dumps(MAP)
    assert group_map_check(None) == []


def test_an_unknown_project_slug_is_a_configuration_error_at_startup(world, settings):
    settings.CLOUDPIVOT_OIDC_GROUP_MAP = json.dumps({**MAP, "ghosts": {"gamma": "reader"}})
    errors = group_map_check(None)
    assert [(e.id, e.msg) for e in errors] == [
        ("cloudpivot.E102", "CLOUDPIVOT_OIDC_GROUP_MAP names project 'gamma', which does not exist")
    ]
    # What `manage.py check` (and so `manage.py serve`) does at startup.
    with pytest.raises(SystemCheckError, match="names project 'gamma'"):
        call_command("check")


def test_an_invalid_map_is_a_configuration_error_at_startup(db, settings):
    settings.CLOUDPIVOT_OIDC_GROUP_MAP = '{"g": {"alpha": "owner"}}'
    errors = group_map_check(None)
    assert [e.id for e in errors] == ["cloudpivot.E101"]
    assert "role must be one of" in errors[0].msg


def test_no_map_no_check(db, settings):
    settings.CLOUDPIVOT_OIDC_GROUP_MAP = ""
    assert group_map_check(None) == []


# ---------------------------------------------------------------------------- the sync
@pytest.fixture
def olga(world, settings):
    settings.CLOUDPIVOT_OIDC_GROUP_MAP = json.dumps(MAP)
    return get_user_model().objects.create_user("olga", "olga@example.org")


def _roles(user) -> dict[str, str]:
    return dict(Membership.objects.filter(user=user).values_list("project__slug", "role"))


def test_the_sync_grants_changes_and_removes_only_mapped_projects(olga, world):
    gamma = Project.objects.create(slug="gamma", name="Gamma")
    Membership.objects.create(project=gamma, user=olga, role=Role.ADMIN)  # by hand, not in the map

    entries = memberships_sync_from_groups(user=olga, groups=["alpha-readers", "staff"], source="oidc:test")
    assert _roles(olga) == {"alpha": "submitter", "beta": "reader", "gamma": "admin"}
    assert sorted((e.action, e.object_ref) for e in entries) == [
        ("accounts:membership-grant", "alpha:olga"),
        ("accounts:membership-grant", "beta:olga"),
    ]

    entries = memberships_sync_from_groups(user=olga, groups=["alpha-admins"], source="oidc:test")
    assert _roles(olga) == {"alpha": "admin", "gamma": "admin"}
    assert sorted((e.action, e.details["role_before"], e.details["role_after"]) for e in entries) == [
        ("accounts:membership-change", "submitter", "admin"),
        ("accounts:membership-revoke", "reader", None),
    ]
    assert entries[0].details["groups"] == ["alpha-admins"] and entries[0].details["source"] == "oidc:test"

    entries = memberships_sync_from_groups(user=olga, groups=[], source="oidc:test")
    assert _roles(olga) == {"gamma": "admin"}  # the hand-made membership outlives every login
    assert [e.action for e in entries] == ["accounts:membership-revoke"]


def test_the_sync_writes_nothing_when_nothing_changes(olga):
    memberships_sync_from_groups(user=olga, groups=["staff"])
    before = AuditEntry.objects.count()
    assert memberships_sync_from_groups(user=olga, groups=["staff"]) == []
    assert AuditEntry.objects.count() == before


def test_a_hand_made_membership_in_a_mapped_project_follows_the_groups(olga, world):
    # The map owns the projects it names: a role given by hand there is replaced on the next login.
    Membership.objects.create(project=world.alpha, user=olga, role=Role.ADMIN)
    memberships_sync_from_groups(user=olga, groups=["alpha-readers"])
    assert _roles(olga) == {"alpha": "reader"}


def test_an_unknown_project_in_the_map_is_skipped_at_login_not_a_crash(olga, settings, caplog):
    settings.CLOUDPIVOT_OIDC_GROUP_MAP = json.dumps({"staff": {"alpha": "reader", "gamma": "admin"}})
    memberships_sync_from_groups(user=olga, groups=["staff"])
    assert _roles(olga) == {"alpha": "reader"}
    assert "names project 'gamma', which does not exist" in caplog.text


def test_an_invalid_map_leaves_memberships_alone_at_login(olga, world, settings, caplog):
    Membership.objects.create(project=world.alpha, user=olga, role=Role.READER)
    settings.CLOUDPIVOT_OIDC_GROUP_MAP = "{broken"
    assert memberships_sync_from_groups(user=olga, groups=[]) == []
    assert _roles(olga) == {"alpha": "reader"}
    assert "CLOUDPIVOT_OIDC_GROUP_MAP is invalid" in caplog.text


def test_no_map_leaves_memberships_alone(olga, world, settings):
    Membership.objects.create(project=world.alpha, user=olga, role=Role.READER)
    settings.CLOUDPIVOT_OIDC_GROUP_MAP = ""
    assert memberships_sync_from_groups(user=olga, groups=[]) == []
    assert _roles(olga) == {"alpha": "reader"}


# ---------------------------------------------------------------------------- which logins sync
def _login_signal(user, provider_kind: str, extra_data: dict, rf) -> None:
    from allauth.account.signals import user_logged_in
    from allauth.socialaccount.adapter import get_adapter
    from allauth.socialaccount.models import SocialAccount, SocialLogin

    request = rf.get("/accounts/x/login/callback/")
    provider = get_adapter().get_provider(request, "keycloak" if provider_kind == "openid_connect" else provider_kind)
    account = SocialAccount(provider=provider.app.provider_id or provider_kind, uid="1", extra_data=extra_data)
    sociallogin = SocialLogin(user=user, account=account, provider=provider)
    user_logged_in.send(sender=type(user), request=request, response=None, user=user, sociallogin=sociallogin)


@pytest.fixture
def two_providers(settings):
    settings.CLOUDPIVOT_OIDC_GROUP_PROVIDERS = ["keycloak"]
    settings.SOCIALACCOUNT_PROVIDERS = {
        "openid_connect": {
            "APPS": [
                {
                    "provider_id": "keycloak",
                    "name": "Keycloak",
                    "client_id": "cp",
                    "secret": "x",
                    "settings": {"server_url": "http://127.0.0.1:9/realms/x"},
                }
            ]
        },
        "github": {"APPS": [{"client_id": "gh", "secret": "y"}]},
    }


def test_an_oidc_login_syncs_from_userinfo_and_id_token_groups(olga, two_providers, rf):
    extra = {"userinfo": {"sub": "1", "groups": ["alpha-readers"]}, "id_token": {"sub": "1", "groups": ["staff"]}}
    _login_signal(olga, "openid_connect", extra, rf)
    assert _roles(olga) == {"alpha": "submitter", "beta": "reader"}
    entry = AuditEntry.objects.filter(actor=olga).first()
    assert entry.details["source"] == "oidc:keycloak" and entry.path == "/accounts/x/login/callback/"


def test_an_oidc_provider_not_trusted_for_groups_leaves_memberships_alone(olga, world, two_providers, rf, settings):
    settings.CLOUDPIVOT_OIDC_GROUP_PROVIDERS = ["oidc"]  # keycloak's claims are not trusted
    Membership.objects.create(project=world.alpha, user=olga, role=Role.READER)
    _login_signal(olga, "openid_connect", {"userinfo": {"sub": "1", "groups": ["staff"]}}, rf)
    assert _roles(olga) == {"alpha": "reader"}
    assert not AuditEntry.objects.filter(actor=olga).exists()


def test_a_github_login_leaves_memberships_alone(olga, world, two_providers, rf):
    Membership.objects.create(project=world.alpha, user=olga, role=Role.READER)
    _login_signal(olga, "github", {"id": 1, "login": "olga", "groups": ["staff"]}, rf)
    assert _roles(olga) == {"alpha": "reader"}


def test_a_password_login_leaves_memberships_alone(client, world, settings):
    settings.CLOUDPIVOT_OIDC_GROUP_MAP = json.dumps(MAP)
    client.post("/accounts/login/", {"login": "charlie", "password": "pw-charlie"}, REMOTE_ADDR="192.0.2.41")
    assert "_auth_user_id" in client.session
    assert _roles(world.charlie) == {"beta": "submitter"}
