"""The one table from a cloud's error kind to the API's answer (cloudpivot.exceptions.cloud_error)."""

from __future__ import annotations

import pytest

from cloudpivot.exceptions import BackendError, cloud_error


@pytest.mark.parametrize(
    ("kind", "field", "status", "code"),
    [
        ("transient", None, 503, "cloud_unavailable"),
        ("transient", "flavor", 503, "cloud_unavailable"),  # a field does not make an outage the caller's fault
        ("auth", None, 502, "cloud_refused"),
        ("quota", None, 422, "quota_exceeded"),
        ("not_found", None, 404, "not_found"),
        ("not_found", "flavor", 400, "invalid"),
        ("invalid_spec", "image", 400, "invalid"),
    ],
)
def test_each_kind_has_one_answer(kind, field, status, code):
    error = cloud_error(BackendError("the cloud's words", kind=kind), doing="reading the flavor", field=field)
    assert (error.status, error.code) == (status, code)
    if status == 400:
        assert error.errors == [{"field": field, "message": "the cloud's words"}]
    else:
        assert error.message == "reading the flavor: the cloud's words"
