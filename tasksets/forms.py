"""The submit form's "Run as a set" part: a count, or a parameter file (or its text), and max_running.

It only reads what the browser sends into the set request's `count` / `items` / `max_running`; the request
is checked by tasksets.services.submission (or tasksets.preview), whose errors come back onto these fields.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings
from django.forms.utils import ErrorDict

from cloudpivot.exceptions import InvalidSpec
from tasksets.params import Params, params_parse

SINGLE, SET = "task", "set"
CARRIED_MAX = 1024 * 1024  # a file's text kept in the form after a preview; a larger one is chosen again


class SetForm(forms.Form):
    run_as = forms.ChoiceField(
        label="Run as",
        choices=[(SINGLE, "A single task"), (SET, "A set of tasks (a count, or one task per parameter row)")],
        widget=forms.RadioSelect,
        initial=SINGLE,
        required=False,
    )
    count = forms.IntegerField(
        label="Count",
        required=False,
        min_value=1,
        max_value=settings.TASK_SET_MAX_ELEMENTS,
        help_text="Elements 0 … count-1; {{index}} in the name, command or environment is each element's index.",
    )
    params_file = forms.FileField(
        label="Parameter file",
        required=False,
        help_text="JSON Lines (one object per line) or CSV with a header row: one element per line or row, each "
        "key or column a parameter used as {{lr}} and given as an environment variable.",
    )
    params = forms.CharField(
        label="Parameters",
        required=False,
        widget=forms.Textarea(attrs={"rows": 4, "spellcheck": "false", "autocapitalize": "off", "class": "mono"}),
        help_text="Or paste them here (JSON Lines or CSV). A chosen file wins over this text.",
    )
    max_running = forms.IntegerField(
        label="At most running at once",
        required=False,
        min_value=1,
        help_text="Empty: as many as the quotas and the fair share allow.",
    )

    def wanted(self) -> bool:
        """A set is asked for: chosen as "Run as", or its own Preview or Submit set button pressed."""
        return self.data.get(self.add_prefix("run_as")) == SET or bool({"preview", "submit_set"} & set(self.data))

    def unchecked(self) -> SetForm:
        """A cloud refresh shows what was typed with no errors yet (as TaskSubmitForm.unchecked)."""
        self._errors = ErrorDict()
        return self

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        upload = data.get("params_file")
        text, where = data.get("params") or "", "params"
        if upload is not None:
            text, where = self._read(upload), "params_file"
        data["items"], data["lines"] = None, []
        if self.errors:
            return data
        if data.get("count") and text.strip():
            self.add_error("count", "Give a count or parameters, not both.")
        elif not data.get("count") and not text.strip():
            self.add_error("count", "Give a count, or a parameter file (or paste its text below).")
        elif text.strip():
            try:
                parsed: Params = params_parse(text, upload.name if upload is not None else "")
            except InvalidSpec as exc:
                for error in exc.errors:
                    self.add_error(where, _capital(error["message"]))
                return data
            data["items"], data["lines"] = parsed.items, parsed.lines
            self._carry(text)
        return data

    def _read(self, upload: Any) -> str:
        limit = settings.TASK_SET_MAX_BYTES
        if upload.size > limit:
            self.add_error("params_file", f"The file is {upload.size} bytes; at most {limit} are accepted.")
            return ""
        try:
            return upload.read().decode("utf-8-sig")
        except UnicodeDecodeError:
            self.add_error("params_file", "The file is not UTF-8 text.")
            return ""

    def _carry(self, text: str) -> None:
        """Keep a chosen file's text in the text area, so a preview (or a refused submit) needs no second upload."""
        if len(text) <= CARRIED_MAX and self.data.get(self.add_prefix("params")) != text:
            self.data = self.data.copy()
            self.data[self.add_prefix("params")] = text

    def body(self, template: dict[str, Any]) -> dict[str, Any]:
        """The set request for the API's service, the task form's document as the template."""
        data = self.cleaned_data
        body: dict[str, Any] = {"template": template}
        if data["items"] is not None:
            body["items"] = data["items"]
        else:
            body["count"] = data["count"]
        if data.get("max_running"):
            body["max_running"] = data["max_running"]
        return body

    def field_for(self, path: str, message: str) -> tuple[str | None, str]:
        """Where a set error (not the template's) goes: `items.17.lr` → the parameters, with the item's line."""
        head, _, rest = path.partition(".")
        if head == "count" or head == "max_running":
            return head, message
        if head != "items":
            return None, f"{path}: {message}" if path else message
        where = "params_file" if self.cleaned_data.get("params_file") is not None else "params"
        index, _, name = rest.partition(".")
        if not index.isdigit():
            return where, _capital(message)
        lines = self.cleaned_data.get("lines") or []
        line = f" (line {lines[int(index)]})" if int(index) < len(lines) else ""
        return where, f"Element {index}{line}{': ' + name if name else ''}: {message}"


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]
