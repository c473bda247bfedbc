"""Reading tether's markdown files back: the metadata line, sections, listings.

Every markdown artifact ends with one machine-readable line, `<!-- tether:KIND {...} -->`,
holding the values it was written with as JSON (`parse_meta`); the rest is plain markdown,
split into its `## Title` sections by `sections`. Each reader takes the path a listing gave
(or a person named) and, optionally, the memory's `Docs`: a path inside the memory is then
read through its backend (on PostgreSQL a listing gives bare document paths); without one,
or for a file outside the memory, from disk.

Importing this module is cheap (no Jinja or LangGraph): `orchestrator status` and the
recovery of a run's state read files through it. Nothing here writes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from memory.contract.base import DocumentInfo
from orchestrator.artifacts.documents import Docs
from orchestrator.artifacts.names import name_timestamp, read_text
from orchestrator.errors import ArtifactError

if TYPE_CHECKING:
    from orchestrator.types import JsonObject

_META_RE = r"^<!-- tether:{kind} (?P<json>\{{.*\}}) -->[ \t]*$"
_ANY_META = re.compile(r"^<!-- tether:\w+ .* -->[ \t]*$\n?", re.MULTILINE)
_SECTION = re.compile(r"^## (?P<title>.+?)\s*$", re.MULTILINE)


# -- the metadata line ----------------------------------------------------------------
def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


_STRICT = json.JSONDecoder(parse_constant=_reject_constant)


def loads_strict(text: str | bytes) -> Any:
    """`json.loads` that refuses NaN and Infinity (Python accepts them; JSON does not).

    orjson parses first (strict already, and several times faster on a checkpoint); what it
    refuses goes through the standard parser, which names the problem (or accepts what
    orjson cannot hold, such as an integer beyond 64 bits).
    """
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        pass
    return _STRICT.decode(text.decode("utf-8") if isinstance(text, bytes) else text)


def parse_meta(text: str, kind: str) -> JsonObject | None:
    """The values stored in the last `<!-- tether:KIND {...} -->` line of `text`, or None."""
    matches = list(re.finditer(_META_RE.format(kind=re.escape(kind)), text, re.MULTILINE))
    if not matches:
        return None
    try:
        value = loads_strict(matches[-1].group("json"))
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def strip_meta(text: str) -> str:
    """`text` without its `<!-- tether:KIND ... -->` lines."""
    return _ANY_META.sub("", text)


def body_text(path: Path | str, docs: Docs | None = None) -> str:
    """A memory file's text without its metadata line, stripped ("" if unreadable)."""
    try:
        return strip_meta(_read_text(path, "file", ArtifactError, docs)).strip()
    except ArtifactError:
        return ""


# -- markdown artifacts ---------------------------------------------------------------
#: How a person finds the files of a kind, for "not found" errors.
_LISTING = {"snapshot": "`orchestrator snapshot list`"}


def _read_text(
    path: Path | str,
    what: str,
    error: type[ArtifactError] = ArtifactError,
    docs: Docs | None = None,
) -> str:
    listing = _LISTING.get(what, "`ls` in the memory directory")
    try:
        data = docs.read_named(path) if docs is not None else None
        text = data.decode("utf-8") if data is not None else None
    except UnicodeDecodeError:
        raise error(f"{what} {str(path)!r} is not UTF-8 text") from None
    except OSError as exc:
        raise error(f"cannot read {what} {str(path)!r}: {exc.strerror or exc}") from None
    if text is None:  # not a document of this memory: a file a person named
        return read_text(path, what, error, missing=f"list them with {listing}")
    return text


def sections(text: str) -> dict[str, str]:
    """`## Title` -> body text of each second-level section of a markdown document."""
    text = strip_meta(text)
    found = list(_SECTION.finditer(text))
    out: dict[str, str] = {}
    for i, match in enumerate(found):
        end = found[i + 1].start() if i + 1 < len(found) else len(text)
        out[match.group("title")] = text[match.end() : end].strip("\n").rstrip()
    return out


def _text_and_meta(path: Path, kind: str, what: str, docs: Docs | None) -> tuple[str, JsonObject]:
    text = _read_text(path, what, ArtifactError, docs)
    meta = parse_meta(text, kind)
    if meta is None:
        raise ArtifactError(
            f"{what} {str(Path(path))!r} has no tether metadata block "
            f"('<!-- tether:{kind} ... -->'); was it written by tether?"
        )
    return text, meta


def _read_kind(path: Path, kind: str, what: str, docs: Docs | None) -> JsonObject:
    text, meta = _text_and_meta(path, kind, what, docs)
    return {**meta, "sections": sections(text), "text": text, "path": str(path)}


def _name(info: DocumentInfo) -> str:
    return info.path.rsplit("/", 1)[-1]


def _newest_first(docs: Docs, found: Iterable[DocumentInfo]) -> list[Path]:
    ordered = sorted(found, key=lambda i: (name_timestamp(i.path) or "", _name(i)), reverse=True)
    return [docs.path(i.path) for i in ordered]
