"""The download of one stored output through its signed link (results/links.py)."""

from __future__ import annotations

from django.http import FileResponse, HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.http import require_GET

from cloudpivot.api import error_body
from results.links import LinkRefused, link_resolve
from results.stores import store_of_kind


@require_GET
def output_download(request: HttpRequest, token: str, name: str) -> HttpResponse:
    """The file's bytes (the directory store: served from this host). The link is the permission."""
    try:
        file = link_resolve(token, name)
        manifest = file.attempt.output_manifest
        handle = store_of_kind(manifest.store).open(file.attempt.external_name, file.ref)
    except LinkRefused as exc:
        code = "link_expired" if "expired" in str(exc) else "forbidden" if exc.status == 403 else "not_found"
        return JsonResponse(error_body(code, str(exc)), status=exc.status)
    except (OSError, LookupError):
        message = "this output is no longer in its store (retention may have removed it)"
        return JsonResponse(error_body("not_found", message), status=404)
    response = FileResponse(handle, as_attachment=True, filename=name.rsplit("/", 1)[-1])
    response["X-Checksum-SHA256"] = file.sha256
    response["Cache-Control"] = "private, no-store"
    return response
