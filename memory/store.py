"""`MemoryStore`: the one object through which code reads and writes a memory directory.

A store is a root folder (see `memory.paths`) plus `memory.db` beside the files. Files are
the truth; the database holds entry metadata, small entries and a derived full-text index
that `reindex()` can rebuild from the files at any time.

The store is a thin facade: each concern lives in its own module and is reached through
a method here, so callers never import internals:

* large outputs: `log`, `fetch`, `get_entry`, `list_entries`, `refs`, `stats`,
  `prune` -> `memory.entries`
* ranked recall over everything: `search`, `sync_index`, `reindex` -> `memory.index`,
  `memory.recall`

Thread safety: one SQLite connection per thread (WAL + busy timeout); processes coordinate
through SQLite locking and the file locks of `memory.durable`.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memory import _db
from memory.errors import MemoryDirError
from memory.paths import Layout

if TYPE_CHECKING:
    from memory.entries import Entry, EntryStore
    from memory.index import Index, IndexReport
    from memory.recall import SearchResult


class MemoryStore:
    """A memory directory and its database.

    Args:
        root: the memory directory; `None` means `$TETHER_MEMORY_DIR` or `./.temp/memory`.
        create: create the folders if missing (a root that is a file raises `MemoryDirError`).
    """

    def __init__(self, root: str | os.PathLike[str] | None = None, *, create: bool = True):
        self.layout = Layout.at(root)
        self.read_only = _read_only(self.layout.root)
        if create and not self.read_only:
            self.layout.ensure()
        self._local = threading.local()
        self._all_conns: list[sqlite3.Connection] = []
        self._conns_lock = threading.Lock()
        self._entries: EntryStore | None = None
        self._index: Index | None = None

    @property
    def root(self) -> Path:
        return self.layout.root

    def check_writable(self, action: str = "write") -> None:
        """`MemoryDirError` (one line) when the memory directory is read-only."""
        if self.read_only:
            raise MemoryDirError(
                f"memory directory {str(self.root)!r} is read-only; cannot {action} "
                "(make it writable, or pass --memory-dir to a directory you can write)"
            )

    # -- database ----------------------------------------------------------------------
    def connect(self) -> sqlite3.Connection:
        """This thread's connection to `memory.db`, migrated on first use."""
        conn = getattr(self._local, "conn", None)
        if conn is None and self.read_only:
            conn = _db.connect_read_only(self.layout.db)
            self._local.conn = conn
            with self._conns_lock:
                self._all_conns.append(conn)
        if conn is None:
            self.layout.ensure()
            conn = _db.connect(self.layout.db)
            _db.migrate(conn)
            self._local.conn = conn
            with self._conns_lock:
                self._all_conns.append(conn)
        return conn

    def close(self) -> None:
        with self._conns_lock:
            for conn in self._all_conns:
                conn.close()
            self._all_conns.clear()
        self._local = threading.local()

    def __enter__(self) -> MemoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- components --------------------------------------------------------------------
    @property
    def entries(self) -> EntryStore:
        if self._entries is None:
            from memory.entries import EntryStore

            self._entries = EntryStore(self)
        return self._entries

    @property
    def index(self) -> Index:
        if self._index is None:
            from memory.index import Index

            self._index = Index(self)
        return self._index

    # -- entries ------------------------------------------------------------------
    def log(
        self,
        content: str,
        *,
        tags: Iterable[str] = (),
        type: str = "output",
        checkpoint: str | None = None,
        directory: str | None = None,
    ) -> Entry:
        """Store `content` in the tier its size calls for; returns the new entry."""
        return self.entries.log(
            content, tags=tags, type=type, checkpoint=checkpoint, directory=directory
        )

    def fetch(self, entry_id: str, *, chunk: int | None = None, summary_only: bool = False) -> str:
        """The entry's exact content, one chunk of it, or its summary."""
        return self.entries.fetch(entry_id, chunk=chunk, summary_only=summary_only)

    def get_entry(self, entry_id: str) -> Entry:
        return self.entries.get(entry_id)

    def list_entries(
        self,
        *,
        type: str | None = None,
        directory: str | None = None,
        tag: str | None = None,
        checkpoint: str | None = None,
        limit: int | None = 20,
    ) -> list[Entry]:
        return self.entries.list(
            type=type, directory=directory, tag=tag, checkpoint=checkpoint, limit=limit
        )

    def refs(self, *, checkpoint: str | None = None, directory: str | None = None) -> list[Entry]:
        return self.entries.refs(checkpoint=checkpoint, directory=directory)

    def stats(self) -> dict[str, Any]:
        return self.entries.stats()

    def prune(
        self,
        *,
        keep_days: int | None = None,
        keep_entries: int | None = None,
        dry_run: bool = False,
    ) -> list[Entry]:
        return self.entries.prune(keep_days=keep_days, keep_entries=keep_entries, dry_run=dry_run)

    # -- recall ------------------------------------------------------------------------
    def search(
        self, query: str, *, scope: str | Sequence[str] = "all", limit: int = 5
    ) -> list[SearchResult]:
        """Ranked full-text recall over every view of the memory directory."""
        from memory.recall import search

        return search(self, query, scope=scope, limit=limit)

    def sync_index(self) -> IndexReport:
        """Bring the index up to date with the files (cheap when nothing changed)."""
        return self.index.sync()

    def reindex(self) -> IndexReport:
        """Drop the derived index and rebuild it from the files and entries."""
        return self.index.rebuild()


def _read_only(root: Path) -> bool:
    """True when the directory (or its `memory.db`) exists and this process cannot write it."""
    db = root / "memory.db"
    if root.is_dir() and not os.access(root, os.W_OK):
        return True
    return db.exists() and not os.access(db, os.W_OK)
