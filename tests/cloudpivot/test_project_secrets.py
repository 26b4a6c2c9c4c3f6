"""Project secrets: who may list, add, replace and delete them (API, admin, page), and that values stay hidden.

alice is admin of alpha, bob a submitter there, rita a reader, charlie a member of beta only.
"""

from __future__ import annotations

import json

import pytest
from django.contrib.auth import get_user_model
from django.db import connection

from cloudpivot import secret_box
from cloudpivot.accounts.models import ProjectSecret

VALUE = "s3cr3t-Value-xyz-1234"
URL = "/api/v1/projects/alpha/secrets"


def add(api, who: str = "alice", name: str = "db-password", value: str = VALUE):
    return api(who).post(URL, {"name": name, "value": value}, format="json")


def test_a_project_admin_adds_replaces_and_deletes_a_secret_whose_value_never_comes_back(api, world):
    created = add(api)
    assert created.status_code == 201, created.content
    assert created.json()["name"] == "db-password" and created.json()["created_by"] == "alice"
    listed = api("bob").get(URL)
    assert listed.status_code == 200
    assert [s["name"] for s in listed.json()] == ["db-password"]
    one = api("rita").get(f"{URL}/db-password")
    assert one.status_code == 200
    assert set(one.json()) == {"name", "created_at", "updated_at", "created_by", "updated_by"}
    replaced = api("alice").put(f"{URL}/db-password", {"value": "another-value-5678"}, format="json")
    assert replaced.status_code == 200 and replaced.json()["updated_by"] == "alice"
    secret = ProjectSecret.objects.get()
    assert secret_box.decrypt(secret.value_encrypted) == "another-value-5678"
    for response in (created, listed, one, replaced):
        assert VALUE not in response.content.decode() and "another-value" not in response.content.decode()
        assert "value" not in json.dumps(response.json()).replace('"value_', "")
    assert api("alice").delete(f"{URL}/db-password").status_code == 204
    assert not ProjectSecret.objects.exists()
    assert api("alice").delete(f"{URL}/db-password").status_code == 404


@pytest.mark.parametrize("who", ["bob", "rita"])
def test_members_who_are_not_admins_may_not_change_secrets(api, world, who):
    add(api)
    assert add(api, who, name="other").status_code == 403
    assert api(who).put(f"{URL}/db-password", {"value": "x-y-z-w"}, format="json").status_code == 403
    assert api(who).delete(f"{URL}/db-password").status_code == 403
    assert add(api, who, name="other").json()["code"] == "permission_denied"
    assert list(ProjectSecret.objects.values_list("name", flat=True)) == ["db-password"]


def test_another_projects_member_sees_nothing(api, world):
    add(api)
    assert api("charlie").get(URL).status_code == 404
    assert api("charlie").get(f"{URL}/db-password").status_code == 404
    assert api("charlie").delete(f"{URL}/db-password").status_code == 404
    assert add(api, "charlie").status_code == 404
    assert api(None).get(URL).status_code == 401


def test_bad_input_is_a_400_naming_the_field(api, world):
    bad_name = add(api, name="DB_Password")
    assert bad_name.status_code == 400 and bad_name.json()["errors"][0]["field"] == "name"
    no_value = api("alice").post(URL, {"name": "db-password"}, format="json")
    assert no_value.status_code == 400 and no_value.json()["errors"][0]["field"] == "value"
    assert add(api).status_code == 201
    twice = add(api, value="other-value")
    assert twice.status_code == 409 and twice.json()["code"] == "already_exists"  # a conflict with what is stored
    assert twice.json()["errors"][0]["field"] == "name"
    assert "already has a secret named 'db-password'" in twice.json()["message"]


def test_the_value_is_encrypted_at_rest(api, world):
    add(api)
    with connection.cursor() as cursor:
        cursor.execute("SELECT * FROM accounts_projectsecret")
        row = cursor.fetchone()
    raw = " ".join(str(column) for column in row)
    assert "db-password" in raw  # the row is the one just saved
    assert VALUE not in raw and VALUE.encode().hex() not in raw


def test_the_admin_saves_a_value_it_never_shows(client, world):
    root = get_user_model().objects.create_superuser("root", "root@example.org", "pw")
    client.force_login(root)
    page = client.post(
        "/admin/accounts/projectsecret/add/", {"project": world.alpha.pk, "name": "api-key", "value": VALUE}
    )
    assert page.status_code == 302, page.content.decode()[:2000]
    secret = ProjectSecret.objects.get(name="api-key")
    assert secret_box.decrypt(secret.value_encrypted) == VALUE and secret.created_by == root
    change = client.get(f"/admin/accounts/projectsecret/{secret.pk}/change/")
    assert change.status_code == 200 and VALUE not in change.content.decode()
    assert secret.value_encrypted not in change.content.decode()
    assert VALUE not in client.get("/admin/accounts/projectsecret/").content.decode()
    kept = client.post(f"/admin/accounts/projectsecret/{secret.pk}/change/", {"value": ""})
    assert kept.status_code == 302
    secret.refresh_from_db()
    assert secret_box.decrypt(secret.value_encrypted) == VALUE  # an empty value keeps the saved one


def test_the_project_page_lists_adds_and_deletes_secrets_for_admins_only(pages, world):
    page_url = "/projects/alpha/secrets/"
    added = pages("alice").post(page_url + "new", {"name": "db-password", "value": VALUE})
    assert added.status_code == 302
    for who in ("alice", "bob"):
        listing = pages(who).get(page_url)
        assert listing.status_code == 200
        assert "db-password" in listing.content.decode() and VALUE not in listing.content.decode()
    assert "Add a secret" in pages("alice").get(page_url).content.decode()
    assert "Add a secret" not in pages("bob").get(page_url).content.decode()
    assert pages("bob").post(page_url + "db-password/delete").status_code == 403
    assert pages("charlie").get(page_url).status_code == 404
    refused = pages("alice").post(page_url + "new", {"name": "db-password", "value": "second-value-123"})
    assert refused.status_code == 409 and "second-value-123" not in refused.content.decode()  # as the API says
    assert pages("alice").post(page_url + "db-password/delete").status_code == 302
    assert not ProjectSecret.objects.exists()


def test_a_key_is_rotated_and_a_value_no_key_opens_fails_in_words(api, world, settings):
    from cryptography.fernet import Fernet
    from django.core.management import call_command

    from tasks.services.secret_delivery import task_secrets
    from tasks.services.submission import task_submit
    from tests.builders import hello_spec

    old, new = settings.CLOUDPIVOT_SECRETS_KEY, Fernet.generate_key().decode()
    add(api)
    task, _ = task_submit(user=world.bob, document=hello_spec(secrets=[{"name": "db-password", "env": "P"}]))
    settings.CLOUDPIVOT_SECRETS_KEY = f"{new},{old}"
    call_command("rotate_secrets_key")
    settings.CLOUDPIVOT_SECRETS_KEY = new  # the old key dropped: the value is still there
    assert task_secrets(task) == ({"db-password": VALUE}, "")
    settings.CLOUDPIVOT_SECRETS_KEY = old  # a key that never saw the rotated value
    values, error = task_secrets(task)
    assert values == {} and "'db-password' cannot be decrypted with the server's key" in error


def test_check_refuses_a_key_that_is_not_a_fernet_key(settings):
    from cloudpivot.accounts.checks import secrets_key_check

    settings.CLOUDPIVOT_SECRETS_KEY = "not-a-key"
    assert [error.id for error in secrets_key_check(None)] == ["cloudpivot.E103"]
    settings.CLOUDPIVOT_SECRETS_KEY = secret_box.derived_dev_key("x")
    assert secrets_key_check(None) == []
