"""The set request's JSON: the API's document limits, with room for a set's many items.

A task document is held to DATA_UPLOAD_MAX_MEMORY_SIZE and cloudpivot.documents.MAX_NODES values; a set of
100,000 parameter objects needs more of both, so its body has its own bounds (TASK_SET_MAX_BYTES, and values in
proportion to TASK_SET_MAX_ELEMENTS), still refused by length before a byte is read and by count before use.
"""

from __future__ import annotations

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import BaseParser

from cloudpivot.documents import MAX_NODES, DocumentError, load_json
from cloudpivot.exceptions import RequestTooLarge

VALUES_PER_ITEM = 40  # an item of up to about 20 parameters


class TaskSetJSONParser(BaseParser):
    media_type = "application/json"

    def parse(self, stream, media_type=None, parser_context=None):
        request = (parser_context or {}).get("request")
        limit = settings.TASK_SET_MAX_BYTES
        try:
            length = int(request.META.get("CONTENT_LENGTH") or 0) if request is not None else 0
        except ValueError:
            raise ParseError("the Content-Length header is not a number") from None
        if length > limit:
            message = f"the request body is {length} bytes: at most {limit} bytes are accepted for a task set"
            raise RequestTooLarge(message, errors=[{"field": "", "message": message}])
        try:
            text = stream.read(limit + 1).decode("utf-8") if stream is not None else ""
            if len(text) > limit:
                raise RequestTooLarge(f"the request body is over {limit} bytes: at most {limit} are accepted")
            return load_json(text, max_nodes=MAX_NODES + VALUES_PER_ITEM * settings.TASK_SET_MAX_ELEMENTS)
        except UnicodeDecodeError as exc:
            raise ParseError(f"the body is not UTF-8 text: {exc}") from None
        except DocumentError as exc:
            raise ParseError(str(exc)) from None
