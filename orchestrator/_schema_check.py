"""A fast yes/no check of a JSON document against a small subset of JSON Schema.

`jsonschema` walks a document in pure Python with a validator object per keyword and per
item; for a checkpoint of a few hundred subtasks that costs about 10 ms, most of a
checkpoint write. `compile_check(schema)` turns a schema written with the keywords listed
in `SUPPORTED` into one plain function that answers "valid?" in a fraction of that.

Invariant: the function returns True only for documents `jsonschema` also finds valid. It
is conservative: whatever it is unsure about (a float where an integer is expected, say)
counts as "not valid", and the caller then asks `jsonschema`, which also words the
problem. A schema with any other keyword compiles to None: use `jsonschema` alone.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

Check = Callable[[Any], bool]

#: Keywords that only describe (never constrain) a document.
ANNOTATIONS = frozenset({"$schema", "$id", "$comment", "$defs", "title", "description"})
SUPPORTED = frozenset(
    {
        "type",
        "required",
        "properties",
        "additionalProperties",
        "items",
        "minItems",
        "minLength",
        "maxLength",
        "pattern",
        "minimum",
        "$ref",
    }
    | ANNOTATIONS
)

_TYPES: dict[str, Check] = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "null": lambda v: v is None,
    "boolean": lambda v: isinstance(v, bool),
    # conservative: `jsonschema` also takes 1.0 as an integer; the fallback decides
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
}


class Unsupported(Exception):
    """The schema uses a keyword this checker does not implement."""


def compile_check(schema: dict[str, Any]) -> Check | None:
    """One function checking a document against `schema`, or None when it is not usable."""
    try:
        return _compile(schema, schema)
    except Unsupported:
        return None


def _compile(node: Any, root: dict[str, Any]) -> Check:
    if node is True or node == {}:
        return lambda v: True
    if node is False:
        return lambda v: False
    if not isinstance(node, dict) or set(node) - SUPPORTED:
        raise Unsupported(node)
    checks: list[Check] = []
    if "$ref" in node:
        checks.append(_compile(_resolve(node["$ref"], root), root))
    if "type" in node:
        names = node["type"] if isinstance(node["type"], list) else [node["type"]]
        if any(n not in _TYPES for n in names):
            raise Unsupported(node["type"])
        tests = [_TYPES[n] for n in names]
        checks.append(lambda v: any(t(v) for t in tests))
    checks += _object_checks(node, root) + _array_checks(node, root) + _scalar_checks(node)
    if len(checks) == 1:
        return checks[0]
    return lambda v: all(c(v) for c in checks)


def _resolve(ref: str, root: dict[str, Any]) -> Any:
    if not ref.startswith("#/"):
        raise Unsupported(ref)
    node: Any = root
    for part in ref[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, dict) or part not in node:
            raise Unsupported(ref)
        node = node[part]
    return node


def _object_checks(node: dict[str, Any], root: dict[str, Any]) -> list[Check]:
    required = list(node.get("required") or [])
    props = {k: _compile(s, root) for k, s in (node.get("properties") or {}).items()}
    extra = node.get("additionalProperties", True)
    other = None if extra is True else _compile(extra, root)
    if not required and not props and other is None:
        return []

    def check(value: Any) -> bool:
        if not isinstance(value, dict):
            return True  # these keywords apply to objects only
        if any(k not in value for k in required):
            return False
        if other is None:  # only the named properties are checked
            return all(test(value[k]) for k, test in props.items() if k in value)
        for key, item in value.items():
            if not props.get(key, other)(item):
                return False
        return True

    return [check]


def _array_checks(node: dict[str, Any], root: dict[str, Any]) -> list[Check]:
    items = _compile(node["items"], root) if "items" in node else None
    min_items = node.get("minItems")
    if items is None and min_items is None:
        return []

    def check(value: Any) -> bool:
        if not isinstance(value, list):
            return True
        if min_items is not None and len(value) < min_items:
            return False
        return items is None or all(items(v) for v in value)

    return [check]


def _scalar_checks(node: dict[str, Any]) -> list[Check]:
    checks: list[Check] = []
    lo, hi = node.get("minLength"), node.get("maxLength")
    if lo is not None or hi is not None:
        low, high = lo or 0, hi if hi is not None else float("inf")
        checks.append(lambda v: not isinstance(v, str) or low <= len(v) <= high)
    if "pattern" in node:
        pattern = re.compile(node["pattern"])
        checks.append(lambda v: not isinstance(v, str) or pattern.search(v) is not None)
    if "minimum" in node:
        minimum = node["minimum"]
        checks.append(
            lambda v: isinstance(v, bool) or not isinstance(v, int | float) or v >= minimum
        )
    return checks
