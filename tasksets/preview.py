"""What the first elements of a set request would be, before it is sent: the portal's "Preview".

The same checks as tasksets.services.submission make on the request itself (its shape, the template as a task
document, every element's substitution), none of the cloud's or the quota's, and nothing written: the submit
that follows goes through taskset_submit as the API's does.
"""

from __future__ import annotations

from typing import Any

from tasks.specs import spec_normalize
from tasksets.specs import fields_under, set_request_check
from tasksets.templating import element_document, elements_check

PREVIEW_ELEMENTS = 5


def set_preview(body: Any, *, limit: int = PREVIEW_ELEMENTS) -> dict[str, Any]:
    """{total, elements: [{index, name, command, params}]} of the first `limit` elements, or InvalidSpec."""
    request = set_request_check(body)
    template, items, count = request["template"], request["items"], request["count"]
    with fields_under("template"):
        spec_normalize(template)
    elements_check(template, count=count, items=items)
    total = count or len(items)
    elements = []
    for index in range(min(limit, total)):
        params = items[index] if items else None
        document = element_document(template, index=index, params=params, project=None, set_name=request["name"])
        elements.append({"index": index, "name": document["name"], "command": document["command"], "params": params})
    return {"total": total, "elements": elements}
