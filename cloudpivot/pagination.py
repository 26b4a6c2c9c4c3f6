"""Cursor pages of the API lists with a `limit` that is checked, not guessed.

DRF's CursorPagination reads `?limit=` leniently: `limit=null`, `limit=0` or `limit=99999` silently become
the default or the maximum, so a client never learns its parameter was wrong and the schema's `integer`
says something the server does not hold to. Here a limit that is not a whole number in 1..max is a 400
naming the field, in the API's error shape, and the schema states the bounds.
"""

from __future__ import annotations

from rest_framework.exceptions import ValidationError
from rest_framework.pagination import CursorPagination


class NewestFirst(CursorPagination):
    """Newest first, `page_size` rows a page unless `?limit=` (1..max_page_size) asks for another number."""

    ordering = ("-created_at", "-id")
    page_size = 50
    page_size_query_param = "limit"
    max_page_size = 500

    def get_page_size(self, request) -> int:
        raw = request.query_params.get(self.page_size_query_param)
        if raw is None:
            return self.page_size
        text = raw.strip()
        if not (text.isascii() and text.isdigit()) or not 1 <= int(text) <= self.max_page_size:
            raise ValidationError({self.page_size_query_param: [f"a whole number from 1 to {self.max_page_size}"]})
        return int(text)

    def get_schema_operation_parameters(self, view) -> list[dict]:
        parameters = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            if parameter["name"] == self.page_size_query_param:
                parameter["schema"] = {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": self.max_page_size,
                    "default": self.page_size,
                }
                parameter["description"] = f"Rows per page, 1 to {self.max_page_size} (default {self.page_size})."
        return parameters
