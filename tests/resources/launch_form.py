"""The launch form (/instances/new/) through Django's test client, as its tests drive it: a logged-in client, a
post of the form (a cp.tiny `vm1` on os-dev in alpha unless told otherwise), the errors shown next to a field."""

from __future__ import annotations

import re

from django.test import Client


def page_client(user) -> Client:
    """A test client logged in as `user`."""
    client = Client()
    client.force_login(user)
    return client


def launch(client: Client, **fields) -> object:
    """The form posted with these fields over the defaults."""
    data = {"cloud": "os-dev", "project": "alpha", "name": "vm1", "flavor": "cp.tiny", "image": "cp-runner-fake"}
    return client.post("/instances/new/", data | fields)


def field_errors(html: str, field: str) -> str:
    """The error text shown in the field's own block (not at the top of the form)."""
    block = re.search(rf'id="field-{field}".*?(?=id="field-|</form>)', html, re.S)
    assert block, f"no field block for {field}"
    found = re.search(r'class="field-errors"[^>]*>(.*?)</div>', block.group(0), re.S)
    return re.sub(r"<[^>]+>", " ", found.group(1)) if found else ""
