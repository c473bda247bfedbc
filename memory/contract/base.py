"""The storage contract: what every tether memory backend provides.

A backend implements 14 primitives, on three kinds of thing, each a typed record defined
in `memory.contract.records`:

* **documents** by relative POSIX path (`findings/t1/overview.md`), with a version that grows
  on every write and the mtime of the last write; a write or delete may name the version it
  expects (compare-and-set; `expected_version=0` means "must not exist yet"), so two writers
  never lose each other's update; `append_lines` adds whole lines to a log and returns the
  first new line's number (its permanent citation);
* **entries** (large outputs, `memory.contract.entries.Entry`) with their chunks: `log_entry` stores
  new content, `fetch_entry` gives back the exact text or one chunk of it,
  `delete_entries` is what `prune` uses;
* a **search index**: `index_upsert`, `index_query` (ranked, best first), which also holds
  the blocks of the backend's own documents and entries (see `sync_index`).

Built on the documents, every backend also has what the orchestrator keeps of a run
(`memory.contract.doc_records`, a backend with tables of its own overrides it): **task records**
(one JSON-able dict per task), the **subagent registry** of a task with
`transition_subagent`, an atomic compare-and-set on the status so that a subagent is claimed
by exactly one process, and **per-task leases** (an owner and an expiry), which the default
`mutex` is built on. Conveniences (`memory.contract.conveniences`) are built on the primitives, and
optional capabilities (rebuilding the index, importing entries, a LangGraph checkpointer)
are small protocols of their own (`memory.contract.capabilities`).

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
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime

from memory.clock import utc_now
from memory.contract.conveniences import BackendConveniences
from memory.contract.doc_records import DocumentRecords
from memory.contract.entries import Entry
from memory.contract.records import (
    Document,
    DocumentInfo,
    EntryRecord,
    IndexReport,
    LockInfo,
    SearchDoc,
    SearchHit,
    SubagentRecord,
    TaskRecord,
    check_chunk,
    check_data,
    check_doc_path,
    check_id,
    check_limit,
    check_query,
    check_version,
    encode_lines,
    json_text,
    lines_before,
    lock_timeout,
    unknown_entry,
    wait_for_lock,
)
from memory.errors import (
    ConflictError,
    LockHeldError,
    StorageError,
)
from memory.text.summarize import Summarizer, extractive_summary

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
    "check_chunk",
    "check_data",
    "check_doc_path",
    "check_id",
    "check_limit",
    "check_query",
    "check_version",
    "encode_lines",
    "json_text",
    "lines_before",
    "lock_timeout",
    "unknown_entry",
    "wait_for_lock",
]


class BaseBackend(DocumentRecords, BackendConveniences, abc.ABC):
    """The storage contract. Subclasses implement the abstract primitives."""

    #: `files`, `memory` or `postgres`.
    kind: str = ""
    #: Whether processes on other machines reach this same memory through its URL (a
    #: capability, asked with `memory.contract.capabilities.shared_between_machines`).
    shared: bool = False
    #: What a URL naming this backend looks like, for messages (`postgresql://...`).
    url_form: str = ""
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
    def index_query(
        self, query: str, *, sources: Sequence[str] | None = None, limit: int = 10
    ) -> list[SearchHit]:
        """Documents matching words of `query`, best first."""

    # -- optional features -----------------------------------------------------------
    def sync_index(self) -> IndexReport:
        """Bring the index up to date with documents changed outside the backend.

        Backends whose documents change only through them index on every write, so there
        is nothing to do; the files backend notices hand edits here (cheaply, by mtime/size).
        """
        return IndexReport()
