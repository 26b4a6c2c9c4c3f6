"""Service errors back on a portal form, next to the field they name (every app's pages share it)."""

from __future__ import annotations

from cloudpivot.exceptions import ApplicationError


class FieldErrorsMixin:
    """Put a service's field errors on the form (an error naming no field of the form goes on top)."""

    def add_service_errors(self, exc: ApplicationError) -> None:
        errors = exc.errors or [{"field": "", "message": exc.message}]
        for error in errors:
            field = error.get("field") or None
            self.add_error(field if field in self.fields else None, error.get("message") or exc.message)
        self.describe_errors()

    def describe_errors(self) -> None:
        """Point each invalid input at its error text, so screen readers read it with the field."""
        for name in self.errors:
            if name in self.fields:
                field = self[name]
                ids = [f"{field.auto_id}_errors"] + ([f"{field.auto_id}_helptext"] if field.help_text else [])
                self.fields[name].widget.attrs["aria-describedby"] = " ".join(ids)
                self.fields[name].widget.attrs["aria-invalid"] = "true"
