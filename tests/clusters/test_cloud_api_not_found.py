"""An unknown cloud in the path is the 404 docs/api.md promises: code, message naming it, errors."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("path", ["/api/v1/clouds/no-such-cloud", "/api/v1/clouds/no-such-cloud/resources/nodes"])
def test_an_unknown_cloud_is_a_404_with_the_documented_error_shape(api, path):
    response = api("bob").get(path)
    assert response.status_code == 404
    body = response.json()
    assert set(body) == {"code", "message", "errors"}, body
    assert body["code"] == "not_found"
    assert "no-such-cloud" in body["message"]
    assert body["message"] == "cloud no-such-cloud not found" and body["errors"] == []  # as a missing task's
