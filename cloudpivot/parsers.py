"""Request bodies parsed within the limits of cloudpivot.documents: a 400 in words, never a 500 or a bomb."""

from __future__ import annotations

from rest_framework.exceptions import ParseError
from rest_framework.parsers import BaseParser

from cloudpivot.documents import DocumentError, load_json, load_yaml


class _BoundedParser(BaseParser):
    load = staticmethod(load_json)

    def parse(self, stream, media_type=None, parser_context=None):
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
