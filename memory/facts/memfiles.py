"""Memory files an agent may read and write: confined paths, summary lines, five operations.

Facts (`facts/*.md`), episodes (`episodes/*.md`) and a task's `overview.md` / `detail/*.md`
notes are plain markdown a person can open, read and edit. Each carries a file-level
`> Summary:` line regenerated after every write, patch or append (facts: the keys of their
`- Key: value` bullets; episodes: the titles of their entries). `list_memory()` reads those
lines; `read_memory`, `write_memory`, `patch_memory` and `append_memory` are what the
LangChain tools (`memory.facts.tools`) and the MCP server (`memory.mcp.mcp_server`) call.

Invariants:
* Every path an agent gives goes through `memory.paths.check_relative` (no `..`, absolute
  paths, NUL bytes, over-long names; the files backend also refuses symlinks out) and, for
  writes, `_check_writable`: only
  `facts/*.md`, `episodes/*.md` and a task's `overview.md` / `detail/*.md` notes; never
  `messages.jsonl`, archive summaries, plans, checkpoints or `memory.db`.
* Nothing is read from a cache: a hand edit is what the next read returns.
* A patch that replaces a fact keeps the old value readable below it, struck through with
  the date (`  - ~~old value~~ (superseded 2026-11-22)`), because users audit memory.
* Writes go through the store's backend (atomic); read-modify-writes are compare-and-set
  (`update_document`), so two writers never lose each other's change.
"""

import json
import posixpath
import re
from dataclasses import dataclass
from datetime import date
from typing import Any

from memory.clock import now_iso, today_utc
from memory.errors import InvalidInputError, PatchNotFoundError, PathEscapeError
from memory.paths import check_relative
from memory.templating import render
from memory.text.words import keywords

LONGTERM_FOLDERS = ("facts", "episodes")
MAX_FILE_BYTES = 1_000_000
SUMMARY_PREFIX = "> Summary:"
_BULLET_KEY = re.compile(r"^- ([^:\n]{1,40}):\s*\S")
_ENTRY_HEADING = re.compile(r"^## (.+)$", re.M)
_ENTRY_SUMMARY = re.compile(r"^- Summary:\s*(.+)$", re.M)
_EPISODE_FILE = re.compile(r"^\d{4}-\d{2}\.md$")
_SUMMARY_MAX_CHARS = 160


@dataclass(frozen=True)
class MemoryFile:
    """One long-term memory file as `memory_list` shows it."""

    path: str
    summary: str
    size: int

    def line(self) -> str:
        return f"- {self.path} ({format_size(self.size)}): {self.summary or '(no summary)'}"


@dataclass
class PatchReport:
    path: str
    applied: int
    total: int


def format_size(size: int) -> str:
    """`320B`, `1.2KB`, `3.4MB` (the listing style of `memory facts`)."""
    if size < 1024:
        return f"{size}B"
    if size < 1024 * 1024:
        return f"{size / 1024:.1f}KB"
    return f"{size / (1024 * 1024):.1f}MB"


# -- paths -------------------------------------------------------------------------------
def resolve(store: Any, path: str) -> str:
    """Check an agent-given path; the document path it names (relative POSIX).

    The backend refuses what this cannot see (on a memory directory, a symlink out).
    """
    rel = posixpath.normpath(check_relative(path))
    if (
        rel in ("", ".")
        or any(part.startswith(".") for part in rel.split("/"))
        or rel.startswith(("memory.db", "entries/"))
        or rel == "entries"
    ):
        raise PathEscapeError(
            f"path {path!r} is internal to tether; use memory_list to see memory files"
        )
    return rel


def _check_writable(rel: str) -> None:
    parts = rel.split("/")
    ok = (
        (len(parts) == 2 and parts[0] in LONGTERM_FOLDERS and parts[1].endswith(".md"))
        or (len(parts) == 3 and parts[0] == "working" and parts[2] == "overview.md")
        or (
            len(parts) == 4
            and parts[0] == "working"
            and parts[2] == "detail"
            and parts[3].endswith(".md")
            and not parts[3].startswith("summary-")
        )
    )
    if not ok:
        raise PathEscapeError(
            f"path {rel!r} is not writable: write facts/NAME.md, episodes/YYYY-MM.md, "
            "working/TASK/overview.md or working/TASK/detail/NOTE.md"
        )


def _read_text(store: Any, rel: str) -> str:
    doc = store.backend.get_document(rel)
    if doc is None:
        raise InvalidInputError(f"no memory file {rel!r}: use memory_list to see what exists")
    if doc.size > MAX_FILE_BYTES:
        raise InvalidInputError(
            f"{rel!r} is {format_size(doc.size)}; too big to read whole, "
            "use recall_memory to find the part you need"
        )
    try:
        return doc.data.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidInputError(
            f"{rel!r} is not a UTF-8 text file; use memory_fetch for stored entries"
        ) from None


# -- summary lines -----------------------------------------------------------------------
def file_summary(rel: str, text: str) -> str:
    """The summary a file's `> Summary:` line should carry, derived from its content."""
    body = "\n".join(line for line in text.splitlines() if not line.startswith(SUMMARY_PREFIX))
    if rel.startswith("episodes/"):
        items = [h.strip() for h in _ENTRY_HEADING.findall(body)]
    else:
        items = [
            m.group(1).strip().lower()
            for line in body.splitlines()
            if (m := _BULLET_KEY.match(line)) and m.group(1).strip().lower() != "updated"
        ]
    if not items:
        items = [
            line.strip("#> -").strip()
            for line in body.splitlines()
            if line.strip() and not line.startswith("# ")
        ][:1]
    return _join_capped(items)


def _join_capped(items: list[str]) -> str:
    seen: list[str] = []
    for item in items:
        if item and item not in seen:
            seen.append(item)
    text = ", ".join(seen)
    while len(text) > _SUMMARY_MAX_CHARS and len(seen) > 1:
        seen.pop(0)  # keep the newest entries; say how many older ones exist
        text = f"(+{len(items) - len(seen)} older) " + ", ".join(seen)
    return text[:_SUMMARY_MAX_CHARS]


def summary_line_of(text: str) -> str:
    for line in text.splitlines():
        if line.startswith(SUMMARY_PREFIX):
            return line[len(SUMMARY_PREFIX) :].strip()
    return ""


def with_summary_line(text: str, summary: str) -> str:
    """`text` with its `> Summary:` line set (replaced, else put under the title)."""
    line = f"{SUMMARY_PREFIX} {summary}".rstrip()
    lines = text.splitlines()
    for i, existing in enumerate(lines):
        if existing.startswith(SUMMARY_PREFIX):
            lines[i] = line
            return "\n".join(lines) + "\n"
    if lines and lines[0].startswith("# "):
        return "\n".join([lines[0], "", line, *lines[1:]]).rstrip("\n") + "\n"
    return "\n".join([line, "", *lines]).rstrip("\n") + "\n"


def _finish(rel: str, text: str, summary: str | None = None) -> str:
    if rel.split("/")[0] not in LONGTERM_FOLDERS:
        return text
    return with_summary_line(text, summary if summary is not None else file_summary(rel, text))


# -- the five operations -----------------------------------------------------------------
def list_memory(store: Any) -> list[MemoryFile]:
    """Every `facts/*.md` and `episodes/*.md` with its summary line and size."""
    found = []
    for folder in LONGTERM_FOLDERS:
        for info in store.backend.list_documents(f"{folder}/"):
            name = info.path[len(folder) + 1 :]
            if "/" in name or name.startswith(".") or not name.endswith(".md"):
                continue
            try:
                summary = summary_line_of(store.backend.read_text(info.path) or "")
            except UnicodeDecodeError:
                summary = "(unreadable)"
            found.append(MemoryFile(info.path, summary, info.size))
    return found


def read_memory(store: Any, path: str) -> str:
    """The file's content exactly as stored."""
    return _read_text(store, resolve(store, path))


def write_memory(store: Any, path: str, content: str) -> MemoryFile:
    """Create or overwrite a memory file; its `> Summary:` line is regenerated."""
    rel = resolve(store, path)
    _check_writable(rel)
    if not content.strip():
        raise InvalidInputError(f"empty content for {rel!r}: nothing to write")
    text = _finish(rel, content if content.endswith("\n") else content + "\n")
    if rel.split("/")[2:3] == ["detail"] and "META:" not in text:
        text = with_meta_block(text)
    store.backend.write_text(rel, text)
    return MemoryFile(rel, summary_line_of(text), len(text.encode("utf-8")))


def with_meta_block(text: str) -> str:
    """A detail note given without a META block gets one under its title."""
    meta = f"<!--\nMETA:\n- created: {now_iso()}\n- keywords: {json.dumps(keywords(text))}\n-->"
    lines = text.splitlines()
    if lines and lines[0].startswith("# "):
        return "\n".join([lines[0], "", meta, *lines[1:]]).rstrip("\n") + "\n"
    return "\n".join([meta, "", *lines]).rstrip("\n") + "\n"


def patch_memory(
    store: Any, path: str, patches: list[tuple[str, str]], *, today: date | None = None
) -> PatchReport:
    """Apply exact `(old, new)` replacements, all or none.

    Each old text must occur exactly once. In `facts/`, a replaced value stays readable
    under the new one, struck through with the date.

    Raises:
        PatchNotFoundError: an old text is absent or ambiguous; the file is unchanged.
    """
    rel = resolve(store, path)
    _check_writable(rel)
    if not patches:
        raise InvalidInputError("no patches given: pass [{old_text, new_text}, ...]")
    stamp = (today or today_utc()).isoformat()

    def edit(_old: bytes | None) -> bytes:
        text = _read_text(store, rel)
        for number, (old, new) in enumerate(patches, start=1):
            count = text.count(old) if old else 0
            if count != 1:
                problem = "not found" if count == 0 else f"found {count} times (add context)"
                raise PatchNotFoundError(
                    f"patch {number} of {len(patches)}: old text {old[:80]!r} {problem} in "
                    f"{rel!r}; nothing was changed, memory_read the file and retry"
                )
            text = _replace_keeping_history(text, old, new, stamp, rel.startswith("facts/"))
        return _finish(rel, text).encode("utf-8")

    store.backend.update_document(rel, edit)
    return PatchReport(rel, len(patches), len(patches))


def _replace_keeping_history(text: str, old: str, new: str, stamp: str, keep: bool) -> str:
    start = text.index(old)
    replaced = text[:start] + new + text[start + len(old) :]
    if not keep or old.strip() in new:
        return replaced
    struck = [_struck(line, new, stamp) for line in old.splitlines() if line.strip()]
    end = start + len(new)
    eol = replaced.find("\n", end)
    eol = len(replaced) if eol < 0 else eol
    history = "".join(f"\n  - {s}" for s in struck)
    return replaced[:eol] + history + replaced[eol:]


def _struck(line: str, new: str, stamp: str) -> str:
    value = line.strip()
    value = value[2:] if value.startswith("- ") else value
    key, sep, rest = value.partition(":")
    if sep and rest.strip() and f"{key.strip()}:" in new:
        value = rest.strip()  # same key: strike just the old value
    return f"~~{value}~~ (superseded {stamp})"


def append_memory(store: Any, path: str, entry: str, summary: str | None = None) -> MemoryFile:
    """Append a markdown block (an episode entry) to a file; the summary line is regenerated.

    Args:
        path: e.g. `episodes/2026-11.md` (created with a title if missing).
        entry: markdown, usually `## Title` + `- Summary: ...` + details.
        summary: overrides the regenerated file-level summary.
    """
    rel = resolve(store, path)
    _check_writable(rel)
    if not entry.strip():
        raise InvalidInputError(f"empty entry for {rel!r}: nothing to append")

    written: list[str] = []

    def edit(old: bytes | None) -> bytes:
        if old is not None:
            text = _read_text(store, rel).rstrip("\n") + "\n\n"
        else:
            text = render("longterm_file.md.j2", title=_title_for(rel)).rstrip("\n") + "\n\n"
        written[:] = [_finish(rel, text + entry.strip("\n") + "\n", summary)]
        return written[0].encode("utf-8")

    store.backend.update_document(rel, edit)
    text = written[0]
    return MemoryFile(rel, summary_line_of(text), len(text.encode("utf-8")))


def _title_for(rel: str) -> str:
    folder, name = rel.split("/", 1)[0], rel.rsplit("/", 1)[-1][:-3]
    if folder == "episodes":
        return f"{name} Episodes"
    return f"{name.replace('-', ' ').replace('_', ' ').title()} Facts"
