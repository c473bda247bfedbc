"""The files + SQLite backend: the `.temp/memory` tree people read, and `memory.db` beside it.

Files are the truth; `memory.db` (SQLite, WAL, busy timeout) holds entry metadata, small
entries, tags and refs, document versions and a full-text index derived from the files.
Task records, the subagent registry and task leases are JSON files under `.tether/records/`
(`memory.contract.doc_records`). Deleting the index and running `memory reindex`
rebuilds it; a file edited by hand is searchable at the next query.

The pieces, each in its own module of this package:

* `_db`: the connection settings and the named, append-only migrations;
* `_documents`: documents as files, with versions (`backend_documents`);
* `_entries` (+ `_entry_sql`, `_journal`, `_entry_upkeep`): entries in their tiers, the
  SQL that reads them, their journal, and stats, prune and the orphan sweep;
* `_index` (+ `_index_scan`, `_index_plan`, `_index_schema`, `_watch`): the FTS5 index of
  every file and entry, synced by mtime/size (the scan, the rows read for each changed file,
  the tables, and the folder watch that lets a search skip the scan);
* `_planner` (+ `_intersect`, `_rerank`, `_text`, `_conversation`): the query planner and
  reranker behind `index_query` (`memory search`);
* `_records`: the migrations of the contract's tables in `memory.db` (records are files);
* `_repair`: a damaged `memory.db` moved aside and rebuilt where SQLite reports the damage,
  and a full disk as one line (every operation that touches the database is `healing`);
* `_host`: what the parts need from the backend, so they need not import it;
* `leftovers`: what interrupted writes leave (named by `memory stats`, swept by `prune`);
* `tree`: a memory tree as files, for `memory export` and `memory import`.

Nothing that resolves outside the root is indexed, listed or read (`memory.paths.Inside`).

Thread safety: one SQLite connection per thread; processes coordinate through SQLite locking
and the file locks of `memory.durable`.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import filelock

import memory.backends.files._db as _db
import memory.backends.files._repair as _repair
import memory.durable as durable
from memory.backends.files._documents import DocumentFiles, is_document_path, walk_documents
from memory.backends.files._entries import EntryStore
from memory.backends.files._entry_sql import MIGRATIONS as ENTRY_MIGRATIONS
from memory.backends.files._entry_upkeep import ORPHAN_GRACE_S
from memory.backends.files._index import Index
from memory.backends.files._index_schema import MIGRATIONS as INDEX_MIGRATIONS
from memory.backends.files._planner import Query
from memory.backends.files._records import MIGRATIONS as RECORD_MIGRATIONS
from memory.backends.files._text import (
    TEMP_SETUP,
    ascii_words,
    fill_tok,
    fts_totals,
    tokenize_query,
)
from memory.backends.files._watch import Watch
from memory.backends.savers import open_sqlite_saver, sqlite_holds_thread
from memory.clock import utc_now
from memory.contract.base import (
    BaseBackend,
    Entry,
    IndexReport,
    SearchDoc,
    SearchHit,
    check_id,
    check_limit,
    check_query,
    lock_timeout,
)
from memory.errors import MemoryDirError
from memory.paths import Layout

__all__ = [
    "MIGRATIONS",
    "ORPHAN_GRACE_S",
    "TEMP_SETUP",
    "EntryStore",
    "FilesBackend",
    "Index",
    "Query",
    "Watch",
    "ascii_words",
    "fill_tok",
    "fts_totals",
    "is_document_path",
    "tokenize_query",
    "walk_documents",
]

MIGRATIONS = [*ENTRY_MIGRATIONS, *INDEX_MIGRATIONS, *RECORD_MIGRATIONS]
LANGGRAPH_DB = Path(".langgraph") / "state.sqlite"


class FilesBackend(DocumentFiles, BaseBackend):
    """The default backend: a memory directory and its `memory.db`.

    Args:
        root: the memory directory; `None` means `$TETHER_MEMORY_DIR` or `./.temp/memory`.
        create: create the folders if missing (a root that is a file raises `MemoryDirError`).
    """

    kind = "files"

    def __init__(self, root: str | os.PathLike[str] | None = None, *, create: bool = True):
        self.layout = Layout.at(root)
        self._real_dirs = {}
        self._versions = {}
        self.read_only = _read_only(self.layout.root)
        if create and not self.read_only:
            self.layout.ensure()
        self._local = threading.local()
        self._all_conns: list[sqlite3.Connection] = []
        self._conns_lock = threading.Lock()
        self.entries = EntryStore(self)
        self.index = Index(self)
        self._saver: Any = None
        self._resync = False
        self.notices: list[str] = []
        """One line per repair a caller should report (a damaged LangGraph database)."""

    @classmethod
    @contextmanager
    def open(cls, root: str | os.PathLike[str] | None = None) -> Iterator[FilesBackend]:
        """A backend on the memory directory `root` (created if missing), closed after."""
        backend = cls(root)
        try:
            backend.setup()
            yield backend
        finally:
            backend.close()

    @property
    def root(self) -> Path:
        return self.layout.root

    @property
    def location(self) -> str:
        return str(self.root)

    def check_writable(self, action: str = "write") -> None:
        """`MemoryDirError` (one line) when the memory directory is read-only."""
        if self.read_only:
            raise MemoryDirError(
                f"memory directory {str(self.root)!r} is read-only; cannot {action} "
                "(make it writable, or pass --memory-dir to a directory you can write)"
            )

    # -- database ------------------------------------------------------------------
    def setup(self) -> None:
        self.connect()  # migrations run on connect

    def connect(self) -> sqlite3.Connection:
        """This thread's connection to `memory.db`, migrated on first use."""
        conn = getattr(self._local, "conn", None)
        if conn is None:
            # the file this thread opens: `repair` moves it aside only if it is still there
            self._local.db_id = _repair.identity(self.layout.db)
            if self.read_only:
                conn = _db.connect_read_only(self.layout.db)
            else:
                self.layout.ensure()
                conn = _db.connect(self.layout.db)
                try:
                    _db.migrate(conn, MIGRATIONS)
                except BaseException:
                    conn.close()
                    raise
            self._local.db_id = _repair.identity(self.layout.db)
            self._local.conn = conn
            with self._conns_lock:
                self._all_conns.append(conn)
        return conn

    def follow_db(self) -> None:
        """Reconnect when `memory.db` is no longer the file this thread opened (another
        process moved a damaged one aside, or a person deleted it): one `stat`."""
        if getattr(self._local, "conn", None) is None or self.read_only:
            return
        if _repair.identity(self.layout.db) != self._local.db_id:
            self._disconnect()

    def repair(self, exc: BaseException) -> None:
        """`memory.db` is damaged (`exc`): move it aside and start a new one (`_repair`)."""
        if self.read_only:
            raise _repair.read_only_damage(self.layout.db, exc)
        damaged = getattr(self._local, "db_id", None)
        self._disconnect()
        aside = _repair.move_aside(self.layout, damaged)
        self._resync = True  # a query retried on the new database must not find it empty
        if aside is not None:
            _repair.log.warning(
                f"memory.db was damaged ({_repair.describe(exc)}); moved it to {aside.name!r} "
                "and started a new one, rebuilt from the files and entries/journal.jsonl"
            )

    def _disconnect(self) -> None:
        """Close this thread's connection and forget what was read through it."""
        conn = getattr(self._local, "conn", None)
        self._local.conn = None
        if conn is not None:
            with self._conns_lock:
                if conn in self._all_conns:
                    self._all_conns.remove(conn)
            with contextlib.suppress(sqlite3.Error):
                conn.close()
        self._versions.clear()  # versions of a lost `memory.db` mean nothing in a new one
        self.entries.reset()  # the new database restores its entries from the journal

    @contextmanager
    def _write(self, *, durable_commit: bool = True) -> Iterator[sqlite3.Connection]:
        """One `BEGIN IMMEDIATE` transaction; `durable_commit=False` skips the WAL fsync."""
        conn = self.connect()
        if not durable_commit:
            conn.execute("PRAGMA synchronous = NORMAL")
        try:
            with _db.transaction(conn):
                yield conn
        finally:
            if not durable_commit:
                with contextlib.suppress(sqlite3.Error):  # never hides the error in flight
                    conn.execute("PRAGMA synchronous = FULL")

    def close(self) -> None:
        if self._saver is not None:
            self._saver.conn.close()
            self._saver = None
        with self._conns_lock:
            for conn in self._all_conns:
                conn.close()
            self._all_conns.clear()
        self._local = threading.local()

    @contextmanager
    def mutex(self, name: str, *, timeout: float = 60.0) -> Iterator[None]:
        """A file lock under `.locks/` (released by the OS if its holder dies)."""
        safe = name.replace("%", "%25").replace("/", "%2F")
        lock = durable.file_lock(self.layout.locks / safe, timeout=timeout)
        try:
            lock.acquire()
        except filelock.Timeout:
            raise lock_timeout(name, timeout) from None
        try:
            yield
        finally:
            lock.release()

    # -- entries -------------------------------------------------------------------
    def log_entry(
        self, content, *, type="output", tags=(), directory=None, checkpoint=None
    ) -> Entry:
        self.check_writable("log entries")
        return self.entries.log(
            content, tags=tags, type=type, directory=directory, checkpoint=checkpoint
        )

    def put_entry(self, entry: Entry, content: bytes) -> bool:
        self.check_writable("import entries")
        return self.entries.put(entry, content)

    def get_entry(self, entry_id: str) -> Entry:
        return self.entries.get(entry_id)

    def fetch_entry(self, entry_id: str, *, chunk: int | None = None) -> str:
        return self.entries.fetch(entry_id, chunk=chunk)

    def list_entries(
        self, *, type=None, tag=None, directory=None, checkpoint=None, limit=20
    ) -> list[Entry]:
        check_limit(limit)
        return self.entries.list(
            type=type, tag=tag, directory=directory, checkpoint=checkpoint, limit=limit
        )

    def delete_entries(self, entry_ids: Sequence[str]) -> list[Entry]:
        self.check_writable("prune entries")
        return self.entries.delete(entry_ids)

    def count_pruned(self) -> int:
        return self.entries.count_pruned()

    def entry_stats(self) -> dict[str, Any]:
        return self.entries.stats()

    # -- search index --------------------------------------------------------------
    def index_upsert(self, docs: Sequence[SearchDoc]) -> None:
        for doc in docs:
            check_id(doc.doc_id, "document id")
            check_id(doc.source, "source")
        self.index.upsert(list(docs))

    def index_delete(self, doc_ids: Sequence[str]) -> int:
        return self.index.delete(list(doc_ids))

    def index_query(self, query, *, sources=None, limit=10) -> list[SearchHit]:
        check_query(query, limit)
        wanted = None if sources is None else tuple(dict.fromkeys(sources))
        if wanted == ():
            return []
        if self._resync:
            self._resync = False
            self.index.sync()
        conn = self.connect()
        cache = getattr(self._local, "df_cache", None)
        if cache is None or getattr(self._local, "df_conn", None) is not conn:
            cache = self._local.df_cache = {}
            self._local.df_conn = conn
        return Query(conn, query, wanted, limit, df_cache=cache).run()

    def sync_index(self) -> IndexReport:
        return self.index.sync()

    def reindex(self) -> IndexReport:
        self.check_writable("rebuild the index")
        return self.index.rebuild()

    # -- LangGraph -----------------------------------------------------------------
    def checkpointer(self) -> Any:
        """A `SqliteSaver` on `<root>/.langgraph/state.sqlite` (WAL, `synchronous=FULL`).

        LangGraph's database is derived like `memory.db` (the JSON checkpoints rebuild a
        task without it): one SQLite reports damaged on opening is moved aside
        (`reset_checkpointer`) and a new one opened; `notices` says so.
        """
        if self._saver is None:
            db = self.root / LANGGRAPH_DB
            writable = os.access(db.parent if db.parent.exists() else self.root, os.W_OK)
            read_only = self.read_only or not writable
            try:
                self._saver = open_sqlite_saver(db, read_only=read_only)
            except sqlite3.DatabaseError as exc:
                if read_only or not _repair.is_damage(exc):
                    raise
                self.reset_checkpointer(exc)
                self._saver = open_sqlite_saver(db, read_only=False)
        return self._saver

    def reset_checkpointer(self, exc: BaseException) -> Path | None:
        """Move a damaged LangGraph database (with `-wal`, `-shm`) aside to
        `state.sqlite.damaged-{ts}` (never deleted) and forget its saver; the next
        `checkpointer()` opens a new one. Returns where it went (None: it was gone)."""
        if self._saver is not None:
            with contextlib.suppress(Exception):
                self._saver.conn.close()
            self._saver = None
        db = self.root / LANGGRAPH_DB
        if not db.exists():
            return None
        aside = db.with_name(f"{db.name}.damaged-{utc_now().strftime('%Y%m%dT%H%M%S%fZ')}")
        for suffix in _repair.DB_FILES:
            part = db.with_name(db.name + suffix)
            if part.exists():
                os.replace(part, aside.with_name(aside.name + suffix))
        self.notices.append(
            f"LangGraph's database {str(db)!r} was damaged ({_repair.describe(exc)}); moved "
            f"aside to {aside.name}; the task continues from its JSON checkpoints"
        )
        return aside

    def holds_thread(self, thread_id: str) -> bool:
        return sqlite_holds_thread(self.root / LANGGRAPH_DB, thread_id)


#: The operations that touch `memory.db`: each repairs a damaged one and runs again, and
#: turns a full disk into one line (`_repair.healing`).
HEALED = (
    "setup get_document stat_document put_document delete_document list_documents "
    "list_changes log_entry put_entry get_entry fetch_entry list_entries delete_entries "
    "count_pruned entry_stats index_upsert index_delete index_query sync_index reindex "
    "put_task get_task list_tasks put_subagent transition_subagent list_subagents "
    "acquire_lock release_lock get_lock"
).split()
for _name in HEALED:
    setattr(FilesBackend, _name, _repair.healing(getattr(FilesBackend, _name)))


def _read_only(root: Path) -> bool:
    """True when the directory (or its `memory.db`) exists and this process cannot write it."""
    db = root / "memory.db"
    if root.is_dir() and not os.access(root, os.W_OK):
        return True
    return db.exists() and not os.access(db, os.W_OK)
