"""What part of a line of code is a comment: TODO/FIXME notes that really are comments, and
the code of a line without its comment (a call quoted in a JSDoc example or a docstring is
no call site).

A small lexer for one line at a time (`_scan`), told by the caller whether the line starts
inside a triple-quoted Python string (from the file's earlier lines, when known). Pure
functions of their text; `orchestrator.offline.evidence` re-exports them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import PurePosixPath

_TODO_GREP = r"(#|//|<!--|/\*|^\s*\*|\{#)\s*(TODO|FIXME|XXX)\b"
_STRING_GREP = "\"{3}|'{3}"  # triple quotes, written so this line holds none
_TODO_START_RE = re.compile(r"(#|//|<!--|/\*|\{#)\s*(TODO|FIXME|XXX)\b")
_PROSE_SUFFIXES = (".md", ".rst", ".txt", ".html")
_PYTHON = (".py", ".pyi")
_ALL_MARKERS = ("#", "//", "/*", "<!--", "{#")
#: Languages whose comments start with `//` or `/*` only: `#` is a private field
#: (`this.#retry()`), a preprocessor line or an attribute there, not a comment.
_SLASH_SUFFIXES = frozenset(
    ".js .mjs .cjs .jsx .ts .tsx .go .rs .java .kt .kts .scala .swift .c .cc .cpp .h .hpp .cs"
    " .m .dart .zig".split()
)
#: Languages whose comments start with `#` only.
_HASH_SUFFIXES = frozenset(".py .pyi .rb .sh .bash .pl .r .ex .exs .jl .nim .cr".split())


def _scan(
    line: str, quote: str | None, markers: tuple[str, ...] = _ALL_MARKERS
) -> tuple[int | None, str | None]:
    """Where `line`'s comment starts outside string literals, and the open triple quote.

    A small lexer for Python-like code: `quote` is the triple quote open at the start of
    the line (None outside); single-quoted strings end on their line (backslash escapes
    honoured); `markers` (by default `#`, `//`, `/*`, `<!--` and `{#`) outside strings
    start a comment.
    """
    i = 0
    while i < len(line):
        if quote:
            j = line.find(quote, i)
            if j < 0:
                return None, quote
            i, quote = j + 3, None
        elif line.startswith(('"""', "'''"), i):
            quote, i = line[i : i + 3], i + 3
        elif line[i] in "\"'":
            j = i + 1
            while j < len(line) and line[j] != line[i]:
                j += 2 if line[j] == "\\" else 1
            i = j + 1
        elif line.startswith(markers, i):
            return i, None
        else:
            i += 1
    return None, quote


def _open_quote(suffix: str, before: Sequence[str] | None) -> str | None:
    """The triple quote a Python file's earlier lines leave open (None elsewhere)."""
    quote = None
    for line in before or () if suffix in _PYTHON else ():
        quote = _scan(line, quote)[1]
    return quote


def real_todo(path: str, text: str, before: Sequence[str] | None) -> bool:
    """Is this grep hit a real TODO/FIXME/XXX comment, not a word in a string or prose?

    The marker must open a comment (`# TODO`, `// FIXME`, `<!-- TODO`, `* TODO` in a
    block comment) outside any string literal; in prose files only `<!-- TODO` counts.
    `before` are the file's earlier lines holding triple quotes (for `.py` files: a hit
    inside a multi-line string is fixture text), or None when unknown.
    """
    suffix = PurePosixPath(path).suffix.lower()
    if suffix in _PROSE_SUFFIXES:
        return bool(re.search(r"<!--\s*(TODO|FIXME|XXX)\b", text))
    if suffix not in _PYTHON and re.match(r"\*+\s*(TODO|FIXME|XXX)\b", text.strip()):
        return True
    start, _ = _scan(text.strip(), _open_quote(suffix, before))
    return start is not None and bool(_TODO_START_RE.match(text.strip()[start:]))


def open_quotes(lines: Sequence[str]) -> list[str | None]:
    """The triple quote open at the start of each of a Python file's `lines` (None: none)."""
    states, quote = [], None
    for line in lines:
        states.append(quote)
        quote = _scan(line, quote)[1]
    return states


def code_part(path: str, text: str, inside: bool = False) -> str:
    """The code of a line without its comment: "" for a comment line, a block comment's
    continuation (` * res.location('/foo')` in JSDoc) or a Python docstring's line (one
    opening with triple quotes, or any line when `inside` says it starts inside a
    triple-quoted string)."""
    suffix = PurePosixPath(path).suffix.lower()
    line = text.strip()
    if suffix not in _PYTHON and line.startswith("*"):
        return ""
    if suffix in _PYTHON and (inside or re.match(r"[rbuRBU]?(\"\"\"|''')", line)):
        return ""
    if suffix in _SLASH_SUFFIXES:
        markers: tuple[str, ...] = ("//", "/*")
    elif suffix in _HASH_SUFFIXES:
        markers = ("#",)
    else:
        markers = _ALL_MARKERS
    start, _ = _scan(line, None, markers)
    return line if start is None else line[:start].rstrip()
