"""Signed, expiring download links of stored outputs (docs/data.md).

A link names one output file and the time it was minted, signed with the installation's secret key
(django.core.signing, a salt of its own). Whoever holds it may download that file until it expires, as with
an object store's temporary URL: the link is the permission, so a CLI or a browser needs no token for it.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from django.conf import settings
from django.core import signing
from django.urls import reverse
from django.utils import timezone

from results.models import OutputFile
from results.stores import OutputStore

SALT = "cloudpivot.results.download"


class LinkRefused(Exception):
    """A link that is not (or no longer) good; `status` is the HTTP answer, the message says why in words."""

    def __init__(self, message: str, *, status: int) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Link:
    url: str  # a path on this server (the API makes it absolute)
    expires_at: dt.datetime


def link_mint(file: OutputFile, store: OutputStore) -> Link:
    """A fresh link for one stored output: the object store's own temporary URL where it has one (the bytes go
    from the store to the person), else ours to the download view."""
    seconds = settings.RESULTS_LINK_SECONDS
    expires_at = timezone.now() + dt.timedelta(seconds=seconds)
    url = store.link(file.ref, file.name)
    if url:
        return Link(url=url, expires_at=expires_at)
    token = signing.TimestampSigner(salt=SALT).sign_object({"f": file.pk, "a": file.attempt_id})
    return Link(
        url=reverse("results:output_download", kwargs={"token": token, "name": file.name}), expires_at=expires_at
    )


def link_resolve(token: str, name: str) -> OutputFile:
    """The output a link names, or LinkRefused: 403 for an expired or altered link, 404 for a gone file."""
    seconds = settings.RESULTS_LINK_SECONDS
    try:
        payload = signing.TimestampSigner(salt=SALT).unsign_object(token, max_age=seconds)
    except signing.SignatureExpired:
        raise LinkRefused(
            f"this download link has expired (links work for {seconds} s); ask for a fresh one: "
            "`cloudpivot task outputs ID` or GET /api/v1/tasks/{id}/outputs",
            status=403,
        ) from None
    except (signing.BadSignature, ValueError):
        message = "this is not a valid download link (it was altered or is not one of ours)"
        raise LinkRefused(message, status=403) from None
    file = (
        OutputFile.objects.select_related("attempt", "attempt__output_manifest")
        .filter(pk=payload.get("f"), attempt_id=payload.get("a"), state="stored")
        .first()
    )
    if file is None or file.name != name:
        raise LinkRefused("this output no longer exists (retention may have removed it)", status=404)
    return file
