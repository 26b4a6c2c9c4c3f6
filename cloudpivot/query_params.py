"""An empty query parameter (`?state=`) is a 400 naming it, on every API operation.

Django and django-filter read `?state=` as "no filter", and a DRF field that allows null reads it as None,
so a client that meant a value (a variable left unset in a script) silently got every row. The schema says
each string parameter has at least one character; this holds the server to it.

It is a DRF permission class, beside IsAuthenticated in DEFAULT_PERMISSION_CLASSES, because that is the one
hook DRF runs on every API view after authentication: a caller without a token still gets its 401 first, and
the error goes through the API's exception handler like any other.
"""

from __future__ import annotations

from rest_framework.exceptions import ValidationError
from rest_framework.permissions import BasePermission


class NoEmptyQueryParameters(BasePermission):
    def has_permission(self, request, view) -> bool:
        empty = sorted({name for name, values in request.query_params.lists() if any(v == "" for v in values)})
        if empty:
            raise ValidationError({name: ["must not be empty: leave the parameter out instead"] for name in empty})
        return True
