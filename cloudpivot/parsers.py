"""Request bodies parsed within the limits of cloudpivot.documents: a 400 in words, never a 500 or a bomb;
a body over DATA_UPLOAD_MAX_MEMORY_SIZE is a 413, refused by its length before a byte is read (DRF reads
the stream itself, so Django's own check on `request.body` never runs for API bodies)."""

from __future__ import annotations

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import BaseParser

from cloudpivot.documents import DocumentError, load_json, load_yaml
from cloudpivot.exceptions import RequestTooLarge


def refuse_if_too_large(parser_context: dict | None) -> None:
    request = (parser_context or {}).get("request")
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0) if request is not None else 0
    except ValueError:
        raise ParseError("the Content-Length header is not a number") from None
    if limit is not None and length > limit:
        message = f"the request body is {length} bytes: at most {limit} bytes are accepted"
        raise RequestTooLarge(message, errors=[{"field": "", "message": message}])


class _BoundedParser(BaseParser):
    load = staticmethod(load_json)

    def parse(self, stream, media_type=None, parser_context=None):
        refuse_if_too_large(parser_context)
        try:
            return self.load(stream.read().decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise ParseError(f"the body is not UTF-8 text: {exc}") from None
        except DocumentError as exc:
            raise ParseError(str(exc)) from None


class BoundedJSONParser(_BoundedParser):
    media_type = "application/json"


class YAMLParser(_BoundedParser):
    """YAML task documents, for people who write specs by hand."""

    media_type = "application/yaml"
    load = staticmethod(load_yaml)
