"""Which name a line of code defines: Python, Go, Rust, C-like keywords, and JavaScript's
methods and named functions. The offline model's outlines, call chains and change sites
read definitions through `def_name`."""

from __future__ import annotations

import re
from collections.abc import Sequence

_DEF_RE = re.compile(
    r"^\s*(?:export\s+)?(?:default\s+)?(?:pub\s+)?(?:async\s+)?"
    r"(class|def|function|func|fn|interface|struct)\s+([A-Za-z_][A-Za-z0-9_]*)"
)
#: JavaScript's other definitions: a function or arrow function given a name
#: (`const f = async (a) => {`), and a class method (`async run (args) {` ending its line).
_ASSIGNED_FN_RE = re.compile(
    r"^\s*(?:export\s+)?(?:const|let|var)\s+([A-Za-z_$][\w$]*)\s*=\s*(?:async\s+)?"
    r"(?:function\b|\([^()]*\)\s*=>|[A-Za-z_$][\w$]*\s*=>)"
)
_METHOD_RE = re.compile(
    r"^\s*(?:static\s+)?(?:async\s+)?(?:[gs]et\s+)?"
    r"(?!(?:if|for|while|switch|catch|return|function|else|with)\b)"
    r"([A-Za-z_$][\w$]*)\s*\([^()]*\)\s*\{\s*$"
)


def def_name(line: str) -> str | None:
    """The name a line of code defines (a function, class, method...), or None."""
    if m := _DEF_RE.match(line):
        return m.group(2)
    m = _ASSIGNED_FN_RE.match(line) or _METHOD_RE.match(line)
    return m.group(1) if m else None


def defs_with_lines(lines: Sequence[str]) -> list[tuple[str, int]]:
    """`(name, line number)` of each definition in `lines`, in order, without repeats."""
    return list(dict.fromkeys((name, i) for i, ln in enumerate(lines, 1) if (name := def_name(ln))))
