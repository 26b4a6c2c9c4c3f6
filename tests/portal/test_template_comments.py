"""Django's `{# #}` comment ends at the end of its line: one that spans lines is printed on the page as text (the
launch form, the task page and the dashboard showed theirs once). Longer notes go in {% comment %}."""

from __future__ import annotations

from tests.helpers import BASE_DIR


def test_no_template_comment_spans_lines():
    broken = [
        f"{path.relative_to(BASE_DIR)}:{number}"
        for path in sorted((BASE_DIR / "templates").rglob("*.html"))
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if "{#" in line and "#}" not in line[line.index("{#") :]
    ]
    assert not broken, f"a {{# comment spans lines (Django prints it): use {{% comment %}} at {', '.join(broken)}"
