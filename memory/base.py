"""The storage contract: what every tether memory backend provides.

A backend stores six kinds of thing, each as a typed record defined here:

* **documents** by relative POSIX path (`findings/t1/overview.md`), with a version that grows
  on every write and the mtime of the last write; a write or delete may name the version it
  expects (compare-and-set; `expected_version=0` means "must not exist yet"), so two writers
  never lose each other's update; `append_lines` adds whole lines to a log and returns the
  first new line's number (its permanent citation);
* **entries** (large outputs, `memory.entries.Entry`) with their chunks: `log_entry` stores
  new content, `put_entry` one logged elsewhere (an import), `fetch_entry` gives back the
  exact text or one chunk of it, `delete_entries` is what `prune` uses;
* a **search index**: `index_upsert`, `index_delete`, `index_query` (ranked, best first),
  which also holds the blocks of the backend's own documents and entries (see `sync_index`);
* **task records** (one JSON-able dict per task, last write wins);
* the **subagent registry** of a task, with `transition_subagent`, an atomic
  compare-and-set on the status so that a subagent is claimed by exactly one process;
* the **per-task lock**, a lease with an owner and an expiry.

The model is LangGraph's `BaseStore` / `BaseCheckpointSaver`: a small ABC whose abstract
methods are the primitive operations, convenience methods built on them here, `setup()`
idempotent (it applies named, append-only migrations recorded in a table).

Invariants every backend keeps (checked by `tests/memory/test_backend_conformance.py`):
a document read is always some complete version that was written (never a torn mix); a
version number is never reused for a path; `fetch_entry` is byte-exact; a failed call leaves
the stored data as it was; bad input raises a `memory.errors.MemoryUserError` whose message
names the offending value.
"""

from __future__ import annotations

import abc
import hashlib
import json
import secrets
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from memory.clock import utc_now
from memory.entries import Entry, prune_victims
from memory.entries import entry_stats as _entry_stats
from memory.errors import (
    ChunkOutOfRangeError,
    ConflictError,
    InvalidInputError,
    InvalidQueryError,
    LockHeldError,
    PathEscapeError,
    StorageError,
    UnknownEntryError,
)
from memory.summarize import Summarizer, extractive_summary

__all__ = [
    "BaseBackend",
    "ConflictError",
    "Document",
    "DocumentInfo",
    "Entry",
    "EntryRecord",
    "IndexReport",
    "LockHeldError",
    "LockInfo",
    "SearchDoc",
    "SearchHit",
    "StorageError",
    "SubagentRecord",
    "TaskRecord",
    "check_doc_path",
]

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


class BaseBackend(abc.ABC):
    """The storage contract. Subclasses implement the abstract primitives."""

    #: `files`, `memory` or `postgres`.
    kind: str = ""
    #: Whether nothing may be written (a read-only memory directory).
    read_only: bool = False
    #: The clock that stamps entries (ids, `created_at`) and that `prune` measures age by.
    clock: Callable[[], datetime] = staticmethod(utc_now)
    #: Makes each entry's summary (the model-free extractive one by default).
    summarizer: Summarizer = staticmethod(extractive_summary)

    @property
    def location(self) -> str:
        """Where this memory is, for people: a directory, or a URL without its password."""
        return self.kind

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
    def get_document(self, path: str, *, offset: int = 0) -> Document | None:
        """The document at `path` (its bytes from `offset` on), or `None`."""

    def read_document_bytes(self, path: str, *, offset: int = 0) -> bytes | None:
        """The document's bytes from `offset` on, or `None`: `get_document` without the
        version (the files backend then reads the file and nothing else; a reader
        following an appended log calls this once per new line)."""
        doc = self.get_document(path, offset=offset)
        return None if doc is None else doc.data

    def read_document_head(self, path: str, size: int) -> bytes | None:
        """At most the first `size` bytes of the document, or `None` (a reader that only
        needs a file's first lines: the files backend reads no more than that)."""
        data = self.read_document_bytes(path)
        return None if data is None else data[:size]

    @abc.abstractmethod
    def stat_document(self, path: str) -> DocumentInfo | None:
        """The document's metadata without its bytes (cheap), or `None`."""

    def document_exists(self, path: str) -> bool:
        """Whether document `path` exists: `stat_document` without the version (the files
        backend then looks at the file alone, not at its database row)."""
        return self.stat_document(path) is not None

    @abc.abstractmethod
    def put_document(
        self, path: str, data: bytes, *, expected_version: int | None = None
    ) -> DocumentInfo:
        """Write `data` at `path` durably; `expected_version=0` means "must not exist".

        Raises:
            ConflictError: `expected_version` is given and is not the current version.
        """

    @abc.abstractmethod
    def append_lines(self, path: str, lines: Sequence[bytes | str]) -> int:
        """Append whole lines durably and atomically; returns the first new line's number.

        Line numbers are 1-based and count every physical line, so a citation such as
        `messages.jsonl#L45` stays valid for good. A last line left torn by a crash is closed
        first (it keeps its number and stays one bad line). Concurrent appends never
        interleave. On the files backend an append is not recorded as a version of its own:
        the next reader sees one version above the last recorded write.
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
        tags: Iterable[str] = (),
        directory: str | None = None,
        checkpoint: str | None = None,
    ) -> Entry:
        """Store `content` (non-empty UTF-8) under a new id and return its record."""

    @abc.abstractmethod
    def put_entry(self, entry: Entry, content: bytes) -> bool:
        """Store an entry logged elsewhere with its id and metadata (an import).

        Returns `False`, storing nothing, when the id exists or was pruned here.
        """

    @abc.abstractmethod
    def get_entry(self, entry_id: str) -> Entry:
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
        checkpoint: str | None = None,
        limit: int | None = 20,
    ) -> list[Entry]:
        """Entries matching every filter given, newest first (`directory` includes below)."""

    @abc.abstractmethod
    def delete_entries(self, entry_ids: Sequence[str]) -> list[Entry]:
        """Remove entries for good (never to come back); returns those that existed."""

    @abc.abstractmethod
    def count_pruned(self) -> int:
        """How many entries `delete_entries` has removed so far."""

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
        """Documents matching words of `query`, best first."""

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

    # -- optional features -----------------------------------------------------------
    def sync_index(self) -> IndexReport:
        """Bring the index up to date with documents changed outside the backend.

        Backends whose documents change only through them index on every write, so there
        is nothing to do; the files backend notices hand edits here (cheaply, by mtime/size).
        """
        return IndexReport()

    def reindex(self) -> IndexReport:
        """Drop the search index and rebuild it from the documents and entries."""
        raise NotImplementedError(f"{type(self).__name__} cannot rebuild its index")

    def checkpointer(self) -> Any:
        """A LangGraph checkpointer keeping graph state beside this memory (owned here)."""
        raise NotImplementedError(f"{type(self).__name__} has no LangGraph checkpointer")

    def holds_thread(self, thread_id: str) -> bool:
        """Whether `checkpointer()` has saved graph state for `thread_id`, asked without
        loading LangGraph (`orchestrator status`); False when there is no such state."""
        return False

    # -- convenience built on the primitives ---------------------------------------
    def read_text(self, path: str) -> str | None:
        doc = self.get_document(path)
        return None if doc is None else doc.text

    def write_text(self, path: str, text: str) -> DocumentInfo:
        return self.put_document(path, text.encode("utf-8"))

    def create_document(self, path: str, data: bytes, *, durable: bool = True) -> bool:
        """Write `data` only if `path` does not exist yet; `False` if it did.

        `durable=False`: the caller keeps the content durable elsewhere and can write the
        document again, so a backend may skip what makes it survive a machine crash (the
        files backend skips its fsyncs; a database commits as always).
        """
        try:
            self.put_document(path, data, expected_version=0)
        except ConflictError:
            return False
        return True

    def append_jsonl(self, path: str, records: Sequence[Any]) -> int:
        """Append JSON records as whole lines; returns the first new line's number."""
        lines = []
        for record in records:
            line = json.dumps(record, ensure_ascii=False, separators=(",", ":"))
            lines.append(line.encode("utf-8"))
        return self.append_lines(path, lines)

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

    def list_changes(
        self, prefix: str, token: str | None = None
    ) -> tuple[list[DocumentInfo] | None, str]:
        """`(documents under prefix, token)`, or `(None, token)` if none changed since `token`.

        The token is opaque; pass back the last one to learn cheaply whether to look again.
        """
        listing = self.list_documents(prefix)
        digest = hashlib.blake2b(digest_size=16)
        for info in listing:
            digest.update(f"{info.path}\x00{info.version}\x00{info.size}\n".encode())
        new = digest.hexdigest()
        return (None if new == token else listing), new

    @contextmanager
    def mutex(self, name: str, *, timeout: float = 60.0) -> Iterator[None]:
        """Hold an exclusive section named `name` across processes for the block.

        Waits up to `timeout` seconds (then `LockHeldError`). Built on the lease lock here;
        backends with a lock released when its holder dies override it.
        """
        owner = f"mutex-{secrets.token_hex(8)}"
        wait_for_lock(lambda: self.acquire_lock(name, owner, ttl=max(timeout, 60.0)), name, timeout)
        try:
            yield
        finally:
            self.release_lock(name, owner)

    def refs(self, *, checkpoint: str | None = None, directory: str | None = None) -> list[Entry]:
        """Entries linked to a checkpoint and/or a directory, oldest first."""
        if checkpoint is None and directory is None:
            raise InvalidInputError("refs needs --checkpoint ID or --directory DIR")
        found = self.list_entries(checkpoint=checkpoint, directory=directory, limit=None)
        return list(reversed(found))

    def prune_entries(
        self,
        *,
        keep_days: int | None = None,
        keep_entries: int | None = None,
        dry_run: bool = False,
    ) -> list[Entry]:
        """Remove entries older than `keep_days` or beyond the newest `keep_entries`.

        Only entries go; nothing else is touched. Returns the removed entries (with
        `dry_run`, those that would be removed), oldest first.
        """
        victims = prune_victims(
            self.list_entries(limit=None),
            keep_days=keep_days,
            keep_entries=keep_entries,
            now=self.clock(),
        )
        if dry_run or not victims:
            return victims
        removed = {e.id for e in self.delete_entries([e.id for e in victims])}
        return [e for e in victims if e.id in removed]

    def entry_stats(self) -> dict[str, Any]:
        """Counts, tokens, bytes (content and stored) overall, by tier and by type."""
        return _entry_stats(self.list_entries(limit=None), pruned=self.count_pruned())

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
