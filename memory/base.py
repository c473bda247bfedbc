"""The storage contract: what every tether memory backend provides.

A backend stores six kinds of thing, each as a typed record defined here:

* **documents** by relative POSIX path (`findings/t1/overview.md`), with a version that grows
  by one on every write and the mtime of the last write; a write or delete may name the
  version it expects (compare-and-set), so two writers never lose each other's update;
* **entries** (large outputs) with their chunks: `log_entry` returns the record,
  `fetch_entry` gives back the exact text or one chunk of it;
* a **search index** of small documents: `index_upsert`, `index_delete`, `index_query`
  (ranked, best first);
* **task records** (one JSON-able dict per task, last write wins);
* the **subagent registry** of a task, with `transition_subagent`, an atomic
  compare-and-set on the status so that a subagent is claimed by exactly one process;
* the **per-task lock**, a lease with an owner and an expiry.

The model is LangGraph's `BaseStore` / `BaseCheckpointSaver`: a small ABC whose abstract
methods are the primitive operations, convenience methods built on them here, `setup()`
idempotent (it applies named, append-only migrations recorded in a table), a constructor that
takes an open connection and a classmethod context manager (`open`) that makes one.

Invariants every backend keeps (checked by `tests/memory/test_backend_conformance.py`):
a document read is always some complete version that was written (never a torn mix); a
version number is never reused for a path; `fetch_entry` is byte-exact; a failed call leaves
the stored data as it was; bad input raises a `memory.errors.MemoryUserError` whose message
names the offending value.
"""

from __future__ import annotations

import abc
import secrets
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from memory.errors import (
    ChunkOutOfRangeError,
    ConflictError,
    InvalidInputError,
    LockHeldError,
    PathEscapeError,
    StorageError,
)

__all__ = [
    "BaseBackend",
    "ConflictError",
    "Document",
    "DocumentInfo",
    "EntryRecord",
    "LockHeldError",
    "LockInfo",
    "SearchDoc",
    "SearchHit",
    "StorageError",
    "SubagentRecord",
    "TaskRecord",
    "check_doc_path",
]


@dataclass(frozen=True)
class DocumentInfo:
    """A document's metadata."""

    path: str
    version: int
    mtime: float
    size: int


@dataclass(frozen=True)
class Document(DocumentInfo):
    """A document and its exact bytes."""

    data: bytes = b""

    @property
    def text(self) -> str:
        return self.data.decode("utf-8")


@dataclass(frozen=True)
class EntryRecord:
    """Metadata of one stored entry; the content comes from `fetch_entry`."""

    id: str
    type: str
    tokens: int
    bytes: int
    chunks: int
    """Number of stored chunks (1 for an entry kept in one piece); `chunk` is 0-based."""
    summary: str
    tags: tuple[str, ...] = ()
    directory: str | None = None
    created_at: str = ""


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


def check_id(value: str, what: str) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > 200 or "\x00" in value:
        raise InvalidInputError(f"invalid {what} {value!r}: give a non-empty name")
    return value


def new_entry_id() -> str:
    """`mem-YYYYMMDD-HHMMSS-xxxxxxxx` (UTC, 8 random hex), as the files backend names them."""
    return datetime.now(UTC).strftime("mem-%Y%m%d-%H%M%S-") + secrets.token_hex(4)


def prepare_entry(
    content: str | bytes, *, type: str, tags: Sequence[str], directory: str | None
) -> tuple[EntryRecord, list[str]]:
    """Validate an entry as the files backend does; its record and its chunks' texts.

    Content over 4000 estimated tokens is cut into chunks (at line ends where possible);
    the chunks joined are the exact text.
    """
    from memory.entries import (
        CHUNK_MAX_CHARS,
        FILE_MAX_TOKENS,
        SUMMARY_MAX_TOKENS,
        _as_text,
        check_type,
        normalize_directory,
        split_chunks,
    )
    from memory.summarize import extractive_summary
    from memory.tokens import estimate_tokens

    check_type(type)
    text, data = _as_text(content)
    if isinstance(tags, str):
        tags = [tags]
    if any("\x00" in t for t in tags):
        raise InvalidInputError(f"tag with a NUL character in {list(tags)!r}; use plain text tags")
    tokens = estimate_tokens(text)
    pieces = split_chunks(text, CHUNK_MAX_CHARS) if tokens > FILE_MAX_TOKENS else [text]
    record = EntryRecord(
        id=new_entry_id(),
        type=type,
        tokens=tokens,
        bytes=len(data),
        chunks=len(pieces),
        summary=extractive_summary(text, SUMMARY_MAX_TOKENS).replace("\x00", ""),
        tags=tuple(sorted({t.strip() for t in tags if t and t.strip()})),
        directory=normalize_directory(directory) if directory is not None else None,
        created_at=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
    )
    return record, pieces


def json_text(data: dict[str, Any]) -> str:
    """`data` as canonical JSON; `InvalidInputError` if it holds something JSON cannot."""
    import json

    try:
        return json.dumps(data, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"record data is not JSON ({exc}); store plain values") from None


def check_chunk(entry_id: str, chunk: int | None, chunks: int) -> None:
    """`chunk` is 0-based; an entry kept in one piece has chunk 0 only."""
    count = max(chunks, 1)
    if chunk is not None and not 0 <= chunk < count:
        raise ChunkOutOfRangeError(
            f"chunk {chunk} is out of range for {entry_id!r}: it has {count} chunk(s) "
            f"(valid: 0..{count - 1})"
        )


def unknown_entry(entry_id: str) -> Exception:
    from memory.errors import UnknownEntryError

    return UnknownEntryError(f"no entry {entry_id!r}: see `memory list` for ids")


class BaseBackend(abc.ABC):
    """The storage contract. Subclasses implement the abstract primitives."""

    #: `files`, `memory` or `postgres`.
    kind: str = ""

    def setup(self) -> None:
        """Create or migrate the backend's tables (idempotent, safe from several processes)."""
        return None  # noqa: B027 - a backend without tables has nothing to set up

    def close(self) -> None:
        """Release what the backend opened itself (not a connection it was given)."""
        return None  # noqa: B027

    def __enter__(self) -> BaseBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- documents -----------------------------------------------------------------
    @abc.abstractmethod
    def get_document(self, path: str) -> Document | None:
        """The document at `path`, or `None`."""

    @abc.abstractmethod
    def put_document(
        self, path: str, data: bytes, *, expected_version: int | None = None
    ) -> DocumentInfo:
        """Write `data` at `path` durably; `expected_version=0` means "must not exist".

        Raises:
            ConflictError: `expected_version` is given and is not the current version.
        """

    @abc.abstractmethod
    def delete_document(self, path: str, *, expected_version: int | None = None) -> bool:
        """Remove `path`; `False` if it did not exist."""

    @abc.abstractmethod
    def list_documents(self, prefix: str = "") -> list[DocumentInfo]:
        """Documents whose path starts with `prefix`, sorted by path."""

    # -- entries -------------------------------------------------------------------
    @abc.abstractmethod
    def log_entry(
        self,
        content: str | bytes,
        *,
        type: str = "output",
        tags: Sequence[str] = (),
        directory: str | None = None,
    ) -> EntryRecord:
        """Store `content` (non-empty UTF-8) and return its record."""

    @abc.abstractmethod
    def get_entry(self, entry_id: str) -> EntryRecord:
        """The entry's record; `UnknownEntryError` if there is none."""

    @abc.abstractmethod
    def fetch_entry(self, entry_id: str, *, chunk: int | None = None) -> str:
        """The exact content, or chunk `chunk` (0-based) of it."""

    @abc.abstractmethod
    def list_entries(
        self,
        *,
        type: str | None = None,
        tag: str | None = None,
        directory: str | None = None,
        limit: int | None = 20,
    ) -> list[EntryRecord]:
        """Entries matching every filter given, newest first."""

    # -- search index --------------------------------------------------------------
    @abc.abstractmethod
    def index_upsert(self, docs: Sequence[SearchDoc]) -> None:
        """Add or replace documents of the search index (all or none)."""

    @abc.abstractmethod
    def index_delete(self, doc_ids: Sequence[str]) -> int:
        """Remove documents from the index; returns how many existed."""

    @abc.abstractmethod
    def index_query(
        self, query: str, *, sources: Sequence[str] | None = None, limit: int = 10
    ) -> list[SearchHit]:
        """Documents matching any word of `query`, best first."""

    # -- tasks and registry --------------------------------------------------------
    @abc.abstractmethod
    def put_task(self, task: TaskRecord) -> TaskRecord:
        """Create or replace a task record (stamped with the time of the write)."""

    @abc.abstractmethod
    def get_task(self, task_id: str) -> TaskRecord | None: ...

    @abc.abstractmethod
    def list_tasks(self) -> list[TaskRecord]:
        """Every task, most recently updated first."""

    @abc.abstractmethod
    def put_subagent(self, record: SubagentRecord) -> SubagentRecord:
        """Create or replace one subagent's registry record."""

    @abc.abstractmethod
    def transition_subagent(
        self,
        task_id: str,
        agent_id: str,
        *,
        from_status: Sequence[str | None],
        to_status: str,
        data: dict[str, Any] | None = None,
    ) -> bool:
        """Atomically move a subagent from one of `from_status` to `to_status`.

        `None` in `from_status` means "not registered yet". Returns `False` (and changes
        nothing) when the current status is not one of them: someone else got there first.
        """

    @abc.abstractmethod
    def list_subagents(self, task_id: str) -> list[SubagentRecord]:
        """The task's subagents, sorted by agent id."""

    # -- per-task lock -------------------------------------------------------------
    @abc.abstractmethod
    def acquire_lock(self, task_id: str, owner: str, *, ttl: float = 60.0) -> bool:
        """Take (or renew, for the same owner) the task's lease; `False` if held by another."""

    @abc.abstractmethod
    def release_lock(self, task_id: str, owner: str) -> bool:
        """Drop the lease if `owner` holds it."""

    @abc.abstractmethod
    def get_lock(self, task_id: str) -> LockInfo | None:
        """The live lease on the task, or `None` (an expired lease counts as none)."""

    # -- convenience built on the primitives ---------------------------------------
    def read_text(self, path: str) -> str | None:
        doc = self.get_document(path)
        return None if doc is None else doc.text

    def write_text(self, path: str, text: str) -> DocumentInfo:
        return self.put_document(path, text.encode("utf-8"))

    def update_document(self, path: str, fn: Any, *, attempts: int = 50) -> DocumentInfo:
        """Read-modify-write `path` with `fn(old bytes or None) -> new bytes`, retrying."""
        for _ in range(attempts):
            doc = self.get_document(path)
            new = fn(None if doc is None else doc.data)
            try:
                return self.put_document(path, new, expected_version=doc.version if doc else 0)
            except ConflictError:
                time.sleep(0.005)
        raise ConflictError(f"{path!r} kept changing under {attempts} attempts; try again")

    def get_subagent(self, task_id: str, agent_id: str) -> SubagentRecord | None:
        for record in self.list_subagents(task_id):
            if record.agent_id == agent_id:
                return record
        return None

    def claim_subagent(self, task_id: str, agent_id: str, owner: str) -> bool:
        """Mark a pending (or unregistered) subagent running for `owner`; `False` if taken."""
        return self.transition_subagent(
            task_id,
            agent_id,
            from_status=(None, "pending"),
            to_status="running",
            data={"owner": owner},
        )

    @contextmanager
    def task_lock(self, task_id: str, owner: str, *, ttl: float = 60.0) -> Iterator[LockInfo]:
        """Hold the task's lock for the block; `LockHeldError` names the current holder."""
        if not self.acquire_lock(task_id, owner, ttl=ttl):
            held = self.get_lock(task_id)
            holder = held.owner if held else "another process"
            raise LockHeldError(
                f"task {task_id!r} is locked by {holder!r}; wait for it to finish or let "
                f"the lease expire ({ttl:.0f}s)"
            )
        try:
            yield LockInfo(task_id, owner, time.time() + ttl)
        finally:
            self.release_lock(task_id, owner)

    def export_documents(self) -> dict[str, bytes]:
        """Every document's bytes by path (what `memory export` writes out)."""
        out: dict[str, bytes] = {}
        for info in self.list_documents():
            doc = self.get_document(info.path)
            if doc is not None:
                out[info.path] = doc.data
        return out
