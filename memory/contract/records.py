"""The storage contract's records (documents, search rows, tasks, subagents, locks) and
the input checks every backend shares. Re-exported by `memory.contract.base`."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from memory.contract.entries import Entry
from memory.errors import (
    ChunkOutOfRangeError,
    ConflictError,
    InvalidInputError,
    InvalidQueryError,
    LockHeldError,
    PathEscapeError,
    UnknownEntryError,
)

#: The contract's entry record is the public `memory.Entry`.
EntryRecord = Entry


@dataclass(frozen=True)
class DocumentInfo:
    """A document's metadata."""

    path: str
    version: int
    mtime: float
    size: int


@dataclass(frozen=True)
class Document(DocumentInfo):
    """A document and its exact bytes (from `offset` on, when one was asked for)."""

    data: bytes = b""

    @property
    def text(self) -> str:
        return self.data.decode("utf-8")


@dataclass(frozen=True)
class SearchDoc:
    """One document of the search index, replaced as a whole by `index_upsert`."""

    doc_id: str
    source: str
    text: str
    path: str = ""
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SearchHit:
    """One ranked result of `index_query` (higher `score` is better)."""

    doc_id: str
    source: str
    path: str
    score: float
    text: str
    """The document's text, or (when `citation` is set) a snippet of it around the match."""
    line: int | None = None
    """The line the backend cites inside the document, when it chose one."""
    citation: str = ""
    """Where to read it (`detail/x.md#L12`), when the backend chose the snippet and line."""


@dataclass
class IndexReport:
    """What one `sync_index()` or `reindex()` did."""

    files_seen: int = 0
    files_indexed: int = 0
    files_removed: int = 0
    rows_added: int = 0
    rows_removed: int = 0
    entries_added: int = 0
    entries_removed: int = 0
    seconds: float = 0.0
    rows_total: int = 0
    stale: bool = False
    """True when the memory is read-only and the index could not be brought up to date."""
    warnings: list[str] = field(default_factory=list)
    """What a rebuild could not bring back, one line each (e.g. an unreadable journal line)."""

    @property
    def changed(self) -> bool:
        return bool(
            self.files_indexed or self.files_removed or self.entries_added or self.entries_removed
        )

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class TaskRecord:
    task_id: str
    status: str
    data: dict[str, Any] = field(default_factory=dict)
    updated_at: float = 0.0


@dataclass(frozen=True)
class SubagentRecord:
    task_id: str
    agent_id: str
    status: str
    data: dict[str, Any] = field(default_factory=dict)
    updated_at: float = 0.0


@dataclass(frozen=True)
class LockInfo:
    task_id: str
    owner: str
    expires_at: float


def check_doc_path(path: str) -> str:
    """A document path as stored: relative, POSIX, no `..`, `.` or empty parts."""
    if not isinstance(path, str) or not path or "\x00" in path or "\\" in path:
        raise InvalidInputError(f"invalid document path {path!r}: use a relative POSIX path")
    if path.startswith("/") or any(part in ("", ".", "..") for part in path.split("/")):
        raise PathEscapeError(
            f"document path {path!r} leaves the memory or is not normalised; "
            "use a relative path such as 'findings/t1/overview.md'"
        )
    return path


def check_data(data: Any) -> bytes:
    if not isinstance(data, bytes | bytearray):
        raise InvalidInputError(f"document data must be bytes, not {type(data).__name__!r}")
    return bytes(data)


def lock_timeout(name: str, timeout: float) -> LockHeldError:
    """The error of a mutex still held by another after `timeout` seconds."""
    return LockHeldError(f"{name!r} stayed locked for {timeout:g}s; try again")


def wait_for_lock(try_acquire: Callable[[], bool], name: str, timeout: float) -> None:
    """Call `try_acquire` every 10 ms until it returns True; `LockHeldError` after `timeout`."""
    deadline = time.monotonic() + timeout
    while not try_acquire():
        if time.monotonic() > deadline:
            raise lock_timeout(name, timeout)
        time.sleep(0.01)


def encode_lines(lines: Sequence[bytes | str]) -> bytes:
    """Whole lines to append: each item one line, without a newline of its own."""
    if isinstance(lines, bytes | str) or not lines:
        raise InvalidInputError("append_lines needs a non-empty list of lines")
    out = []
    for line in lines:
        raw = line.encode("utf-8") if isinstance(line, str) else bytes(line)
        if b"\n" in raw:
            raise InvalidInputError(f"a line to append holds a newline: {raw[:60]!r}")
        out.append(raw + b"\n")
    return b"".join(out)


def lines_before(data: bytes) -> int:
    """Physical lines of `data` (a last line without a newline counts as one)."""
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


def check_version(path: str, have: int, expected: int | None) -> None:
    if expected is not None and expected != have:
        raise ConflictError(
            f"{path!r} is at version {have}, not {expected}; read it again and retry"
        )


def check_id(value: str, what: str) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > 200 or "\x00" in value:
        raise InvalidInputError(f"invalid {what} {value!r}: give a non-empty name")
    return value


def json_text(data: dict[str, Any]) -> str:
    """`data` as canonical JSON; `InvalidInputError` if it holds something JSON cannot."""
    try:
        return json.dumps(data, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"record data is not JSON ({exc}); store plain values") from None


def check_chunk(entry_id: str, chunk: int | None, chunks: int) -> None:
    """`chunk` is 0-based; an entry kept in one piece has chunk 0 only."""
    count = max(chunks, 1)
    if chunk is not None and not 0 <= chunk < count:
        valid = "0" if count == 1 else f"0..{count - 1}"
        raise ChunkOutOfRangeError(
            f"chunk {chunk} is out of range for {entry_id!r}: it has {count} "
            f"chunk{'s' if count != 1 else ''} (valid: {valid})"
        )


def unknown_entry(entry_id: str, where: str = "") -> UnknownEntryError:
    place = f" in {where!r}" if where else ""
    return UnknownEntryError(f"no entry {entry_id!r}{place}: see `memory list` for ids")


def check_query(query: str, limit: int) -> None:
    """What `index_query` accepts: words to search for and a positive limit."""
    if not isinstance(query, str) or not query.strip():
        raise InvalidQueryError("empty query: give words to search for")
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise InvalidQueryError(f"invalid limit {limit!r}: use a positive number")


def check_limit(limit: int | None) -> None:
    if limit is not None and limit < 0:
        raise InvalidInputError(f"invalid limit {limit!r}: use 0 or a positive number")
