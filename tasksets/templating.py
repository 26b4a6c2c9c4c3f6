"""Elements from a template: `{{name}}` substitution, checked for every element before a set is accepted.

Pure functions over documents (no database), so the check of a 100,000-element set is a loop in memory and
the materializer builds element `i`'s document the same way whenever it gets to it.

Substituted: the task's `name`, each `command` argument and each `env` value. Every element also gets its
index as `CLOUDPIVOT_SET_INDEX` and its item's parameters as environment variables (an item's value wins
over the template's `env` of the same name). `{{index}}` is the element's index in every set; the other
names come from the items.
"""

from __future__ import annotations

import re
from typing import Any

from cloudpivot.exceptions import InvalidSpec
from tasks.specs import ENV_NAME

PLACEHOLDER = re.compile(r"\{\{\s*([^{}\s]*)\s*\}\}")
INDEX = "index"
INDEX_ENV = "CLOUDPIVOT_SET_INDEX"
MAX_ENV = 500  # tasks.specs: at most 500 variables per task
MAX_ERRORS = 20  # a 400 names this many faults at most: enough to fix a file, not a megabyte of them
Scalar = str | int | float | bool


def placeholders(template: dict[str, Any]) -> dict[str, list[str]]:
    """Each name the template substitutes → the fields that use it (`command.2`, `env.LR`, `name`)."""
    uses: dict[str, list[str]] = {}
    for field, text in _substituted_fields(template):
        for name in PLACEHOLDER.findall(text):
            uses.setdefault(name, []).append(field)
    return uses


def elements_check(template: dict[str, Any], *, count: int | None, items: list[Any] | None) -> None:
    """Raise InvalidSpec naming each fault (`items.17.lr`, `template.command.2`) unless every element can be made."""
    uses = placeholders(template)
    errors = [
        {"field": f"template.{field}", "message": f"{{{{{name}}}}} is not a parameter name (letters, digits, _)"}
        for name, fields in uses.items()
        if not ENV_NAME.match(name)
        for field in fields
    ]
    needed = {name: fields for name, fields in uses.items() if name != INDEX and ENV_NAME.match(name)}
    if items is None and needed:
        errors += [
            {
                "field": f"template.{fields[0]}",
                "message": f"{{{{{name}}}}} has no value: a set with `count` gives only {{{{index}}}}; "
                "use `items` for parameters",
            }
            for name, fields in needed.items()
        ]
    valid_names: set[str] = set()  # parameter names already found good: a 10,000-item set repeats a few names
    room = MAX_ENV - 1 - len(template.get("env") or {})
    for index, item in enumerate(items or ()):
        if len(errors) >= MAX_ERRORS:
            break
        if not item_plainly_good(item, needed, valid_names, room):
            errors += item_errors(template, index, item, needed)
    if errors:
        errors = errors[:MAX_ERRORS]
        raise InvalidSpec(f"invalid task set: {errors[0]['field']}: {errors[0]['message']}", errors=errors)


def item_plainly_good(item: Any, needed: dict[str, list[str]], valid_names: set[str], room: int) -> bool:
    """The usual item, quickly (issue 29: a 10,000-item set accepted in milliseconds): an object of scalar values,
    each name good (learnt into `valid_names`), every needed name there, and at most `room` parameters, which is
    room enough whatever the template's `env` shares with it. False sends the item to `item_errors`, which names
    what is wrong, if anything: True only where `item_errors` would find nothing."""
    if type(item) is not dict or len(item) > room:
        return False
    for name, value in item.items():
        if value is None or isinstance(value, dict | list):
            return False
        if name not in valid_names:
            if not isinstance(name, str) or not ENV_NAME.match(name) or name in (INDEX, INDEX_ENV):
                return False
            valid_names.add(name)
    return all(name in item for name in needed)


def item_errors(template: dict[str, Any], index: int, item: Any, needed: dict[str, list[str]]) -> list[dict[str, str]]:
    """What is wrong with one item: not an object, a bad name or value, a parameter the template uses missing."""
    where = f"items.{index}"
    if not isinstance(item, dict):
        return [{"field": where, "message": 'must be an object of parameters, e.g. {"lr": 0.1}'}]
    errors = []
    for name, value in item.items():
        if not isinstance(name, str) or not ENV_NAME.match(name):
            errors.append({"field": f"{where}.{name}", "message": "not a valid parameter (environment variable) name"})
        elif name in (INDEX, INDEX_ENV):
            errors.append({"field": f"{where}.{name}", "message": f"`{name}` is the element's index; rename it"})
        elif isinstance(value, dict | list) or value is None:
            errors.append({"field": f"{where}.{name}", "message": "must be a string, a number or true/false"})
    for name, fields in needed.items():
        if name not in item:
            errors.append({"field": f"{where}.{name}", "message": f"missing: {fields[0]} uses {{{{{name}}}}}"})
    if len(set(template.get("env") or {}) | set(item)) + 1 > MAX_ENV:
        errors.append({"field": where, "message": f"the element would have over {MAX_ENV} environment variables"})
    return errors


def element_document(
    template: dict[str, Any], *, index: int, params: dict[str, Scalar] | None, project: str | None, set_name: str
) -> dict[str, Any]:
    """The task document of element `index`: the template with its values substituted, in `project` (if given)."""
    values = {INDEX: str(index), **{name: as_text(value) for name, value in (params or {}).items()}}

    def fill(text: str) -> str:
        return PLACEHOLDER.sub(lambda match: values[match.group(1).strip()], text)

    document = dict(template)
    if project:
        document["project"] = project
    document["command"] = [fill(argument) for argument in template["command"]]
    env = {name: fill(value) for name, value in (template.get("env") or {}).items()}
    env.update({name: values[name] for name in params or ()})
    env[INDEX_ENV] = str(index)
    document["env"] = env
    name = template.get("name") or set_name
    document["name"] = fill(name) if PLACEHOLDER.search(name) else f"{name}-{index}" if name else ""
    return document


def as_text(value: Scalar) -> str:
    """A parameter as the program sees it: JSON's words for true/false, numbers as written by Python."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _substituted_fields(template: dict[str, Any]) -> list[tuple[str, str]]:
    fields = [(f"command.{i}", text) for i, text in enumerate(template.get("command") or ()) if isinstance(text, str)]
    fields += [(f"env.{key}", text) for key, text in (template.get("env") or {}).items() if isinstance(text, str)]
    if isinstance(template.get("name"), str):
        fields.append(("name", template["name"]))
    return fields
