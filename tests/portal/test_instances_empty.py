"""The Instances page on an installation whose clouds run no instances (the embedded default: `local` only)
says which kinds of connection can and how an admin adds one, instead of pointing at an API call that would
be refused (issue 30)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db


def test_with_only_the_local_cloud_the_page_says_which_clouds_run_instances(pages, world):
    text = pages("bob").get("/instances/").content.decode()
    assert "no cloud of your projects runs them: VM instances run on OpenStack and KubeVirt connections" in text
    assert "An admin adds one in the admin" in text
    assert "POST /api/v1/instances" not in text and "Launch one" not in text
