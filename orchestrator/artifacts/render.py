"""Rendering tether's files: validated inputs in, checked text out (shared by the artifacts).

Every artifact (research plan, findings, merged findings, snapshot, checkpoint) is rendered
from a Jinja template through `memory.templating.render` (sandboxed, `StrictUndefined`, a
project's `templates/` overrides tether's). The artifact modules add three guarantees on
top, with the helpers here:

* **Inputs are validated** by a pydantic model with `extra="forbid"` (`validate_input`),
  so a misspelt or missing field is a `TemplateError` naming it, never a silently empty
  section.
* **Markdown stays markdown**: values are inserted as text (Jinja never re-evaluates a
  `{{` inside a value). Inline values (titles, `**Label**:` lines) have their line breaks
  folded (`md_inline`); block values have lines that would become headings, rules or an
  unclosed code fence neutralised (`md_block`); list items indent continuation lines in
  the template. The exact values also travel as JSON in a trailing HTML comment
  (`<!-- tether:KIND {...} -->`, written with `tojson`, which escapes `<` and `>` so no
  value can close the comment), which `orchestrator.artifacts.text.parse_meta` reads back.
* **JSON is valid and checked**: the checkpoint template passes every value through
  `tojson`; its output must parse and validate against the checkpoint model
  (`orchestrator.artifacts.checkpoint.render_checkpoint`).

Invariant: a render function either returns text that parses back to the values it was
given, or raises `TemplateError` with a one-line message; it never writes anything.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from memory.templating import TemplateRenderError, render
from orchestrator.errors import TemplateError
from orchestrator.types import FileNote

_HEADING_LIKE = re.compile(r"^(\s{0,3})(#{1,6}(?:\s|$)|[-=*_]{3,}\s*$|[=]+\s*$)")
_FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")

Pathish = str | os.PathLike[str]


# -- markdown helpers -----------------------------------------------------------------
def _lines(text: str) -> list[str]:
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")


def md_inline(text: str) -> str:
    """`text` on one line (line breaks folded to spaces), for titles and `**Label**:` lines."""
    return " ".join(part.strip() for part in _lines(str(text)) if part.strip())


def md_block(text: str) -> str:
    """`text` as markdown paragraphs that cannot add headings or swallow the rest of the file.

    Lines that would turn into a heading (`# x`) or a rule/setext underline (`---`) are
    escaped with a backslash; an unclosed code fence is closed at the end of the value.
    """
    out: list[str] = []
    open_fence: str | None = None
    for line in _lines(str(text)):
        fence = _FENCE.match(line)
        if fence:
            marker = fence.group(1)
            if open_fence is None:
                open_fence = marker
            elif marker[0] == open_fence[0] and len(marker) >= len(open_fence):
                open_fence = None
        elif open_fence is None:
            line = _HEADING_LIKE.sub(lambda m: m.group(1) + "\\" + m.group(2), line)
        out.append(line)
    if open_fence is not None:
        out.append(open_fence)
    return "\n".join(out).strip("\n")


def md_code(text: str) -> str:
    """`text` as an inline code span, with a fence longer than any backtick run inside."""
    value = md_inline(text)
    longest = max((len(run) for run in re.findall(r"`+", value)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if value.startswith("`") or value.endswith("`") else ""
    return f"{fence}{pad}{value}{pad}{fence}"


# -- inputs ---------------------------------------------------------------------------
class _Input(BaseModel):
    model_config = ConfigDict(extra="forbid")


class FileNoteInput(FileNote):
    """A file examined or changed, with a note (`(path, description)` pairs are accepted)."""

    description: str = ""


def _pairs(value: object, first: str, second: str) -> Any:
    """Accept `(a, b)` tuples and bare strings where a model with two fields is expected."""
    if not isinstance(value, list | tuple):
        return value
    out = []
    for item in value:
        if isinstance(item, str):
            out.append({first: item})
        elif isinstance(item, list | tuple) and len(item) == 2:
            out.append({first: item[0], second: item[1]})
        elif isinstance(item, BaseModel):
            out.append(item.model_dump())
        else:
            out.append(item)
    return out


def validate_input(
    model: type[BaseModel], template: str, data: BaseModel | Mapping[str, Any]
) -> Any:
    """`data` as a `model` (validated if it is a mapping), else a one-line `TemplateError`."""
    if isinstance(data, model):
        return data
    try:
        return model.model_validate(dict(data))
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "(input)"
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        raise TemplateError(
            f"invalid input for template {template!r}: field {where!r}: {err['msg']}{more}"
        ) from None


# -- rendering ------------------------------------------------------------------------
def render_template(name: str, project_dir: Pathish | None = None, **context: object) -> str:
    """Render `name` with `context`; every failure is a one-line `TemplateError`."""
    try:
        return render(name, project_dir, **context)
    except TemplateRenderError as exc:
        raise TemplateError(str(exc)) from None
    except (TypeError, ValueError) as exc:  # e.g. `tojson` given something not JSON-able
        raise TemplateError(f"template {name!r} could not serialise a value: {exc}") from None


def _file_views(files: Sequence[FileNoteInput]) -> list[dict[str, str]]:
    return [
        {"path": f.path, "code": md_code(f.path), "description": md_block(f.description)}
        for f in files
    ]


def _blocks(items: Sequence[str]) -> list[str]:
    return [md_block(item) for item in items]
