"""Reading a task document from a file or stdin (YAML or JSON; JSON is read as JSON for exact errors)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml

from cloudpivot_cli.parsing import UsageError


def read(name: str) -> dict:
    if name == "-":
        text, where = sys.stdin.read(), "stdin"
    else:
        try:
            text, where = Path(name).read_text(encoding="utf-8"), name
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"cannot read {name}: {exc}") from None
    try:
        document = json.loads(text) if name.endswith(".json") else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as exc:
        raise UsageError(
            f"{where} is not valid {'JSON' if name.endswith('.json') else 'YAML or JSON'}: {exc}"
        ) from None
    if not isinstance(document, dict):
        raise UsageError(f"{where} must hold one task document (a mapping such as `cloud: local`)")
    return document
