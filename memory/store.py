"""`MemoryStore`: the one object through which code reads and writes tether's memory.

A store holds a storage backend (`store.backend`, see `memory.contract.base`): by default the files
backend on a memory directory (`MemoryStore(root)`), or any other one
(`MemoryStore(backend=...)`, `MemoryStore.from_url("postgresql://...")`). Its methods are the
same on every backend:

* large outputs: `log`, `fetch`, `get_entry`, `list_entries`, `refs`, `stats`, `prune`;
* ranked recall over everything: `search`, `sync_index`, `reindex` (`memory.search.recall`).

Components (working memory, archive, long-term memory, context builder, tools) take a store
and reach the backend through it, so they run unchanged on every backend. On the files
backend, `store.layout` still names the folders of the memory directory.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from memory.backends import backend_for
from memory.backends.files import FilesBackend
from memory.contract.base import BaseBackend, IndexReport
from memory.contract.capabilities import MemoryDirectory, Reindexable
from memory.contract.entries import Entry, check_type
from memory.errors import MemoryDirError
from memory.paths import Layout
from memory.search.recall import SearchResult, search


class MemoryStore:
    """tether's memory over one backend.

    Args:
        root: the memory directory of the files backend; `None` means `$TETHER_MEMORY_DIR`
            or `./.temp/memory`.
        create: create the folders if missing (a root that is a file raises `MemoryDirError`).
        backend: use this backend instead (the store closes it on `close()`).
    """

    def __init__(
        self,
        root: str | os.PathLike[str] | None = None,
        *,
        create: bool = True,
        backend: BaseBackend | None = None,
    ):
        self.backend: BaseBackend = (
            backend if backend is not None else FilesBackend(root, create=create)
        )

    @classmethod
    def from_url(
        cls, url: str | None = None, *, memory_dir: str | os.PathLike[str] | None = None,
        setup: bool = True,
    ) -> MemoryStore:  # fmt: skip
        """A store on the backend `url` names (`memory.backends.backend_for`)."""
        return cls(backend=backend_for(url, memory_dir=memory_dir, setup=setup))

    # -- where ---------------------------------------------------------------------------
    @property
    def _files(self) -> MemoryDirectory:
        if not isinstance(self.backend, MemoryDirectory):
            raise MemoryDirError(
                f"the memory at {self.backend.location!r} has no memory directory; "
                "this needs the files backend (--memory-dir)"
            )
        return self.backend

    @property
    def layout(self) -> Layout:
        """The folders of the memory directory (files backend only)."""
        return self._files.layout

    @property
    def root(self) -> Path:
        """The memory directory (files backend only)."""
        return self._files.root

    @property
    def location(self) -> str:
        """Where the memory is, for people: a directory, or a URL without its password."""
        return self.backend.location

    @property
    def read_only(self) -> bool:
        return self.backend.read_only

    def check_writable(self, action: str = "write") -> None:
        """`MemoryDirError` (one line) when the memory is read-only."""
        if isinstance(self.backend, MemoryDirectory):
            self.backend.check_writable(action)

    def path_of(self, doc: str) -> Path:
        """A document's path: the file on the files backend, else the document path itself."""
        if isinstance(self.backend, MemoryDirectory):
            return self.backend.root / doc
        return Path(doc)

    def make_folder(self, doc: str) -> None:
        """Create the folder `doc` names on a memory directory (people see it); else nothing."""
        if isinstance(self.backend, MemoryDirectory):
            (self.backend.root / doc).mkdir(parents=True, exist_ok=True)

    # -- files backend internals (tests and tools) -------------------------------------
    def connect(self) -> Any:
        """The files backend's connection to `memory.db` for this thread."""
        return self._files.connect()

    @property
    def entries(self) -> Any:
        """The files backend's entry store (tiers, journal, orphans)."""
        return self._files.entries

    @property
    def index(self) -> Any:
        """The files backend's full-text index (sync by mtime/size, rebuild)."""
        return self._files.index

    # -- lifecycle ---------------------------------------------------------------------
    def close(self) -> None:
        self.backend.close()

    def __enter__(self) -> MemoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- entries ------------------------------------------------------------------
    def log(
        self,
        content: str | bytes,
        *,
        tags: Iterable[str] = (),
        type: str = "output",
        checkpoint: str | None = None,
        directory: str | None = None,
    ) -> Entry:
        """Store `content` in the tier its size calls for; returns the new entry."""
        return self.backend.log_entry(
            content, tags=tags, type=type, checkpoint=checkpoint, directory=directory
        )

    def fetch(self, entry_id: str, *, chunk: int | None = None, summary_only: bool = False) -> str:
        """The entry's exact content, one chunk of it, or its summary."""
        if summary_only:
            return self.backend.get_entry(entry_id).summary
        return self.backend.fetch_entry(entry_id, chunk=chunk)

    def get_entry(self, entry_id: str) -> Entry:
        return self.backend.get_entry(entry_id)

    def list_entries(
        self,
        *,
        type: str | None = None,
        directory: str | None = None,
        tag: str | None = None,
        checkpoint: str | None = None,
        limit: int | None = 20,
    ) -> list[Entry]:
        if type is not None:
            check_type(type)
        return self.backend.list_entries(
            type=type, directory=directory, tag=tag, checkpoint=checkpoint, limit=limit
        )

    def refs(self, *, checkpoint: str | None = None, directory: str | None = None) -> list[Entry]:
        return self.backend.refs(checkpoint=checkpoint, directory=directory)

    def stats(self) -> dict[str, Any]:
        return self.backend.entry_stats()

    def prune(
        self,
        *,
        keep_days: int | None = None,
        keep_entries: int | None = None,
        dry_run: bool = False,
    ) -> list[Entry]:
        return self.backend.prune_entries(
            keep_days=keep_days, keep_entries=keep_entries, dry_run=dry_run
        )

    # -- recall ------------------------------------------------------------------------
    def search(
        self,
        query: str,
        *,
        scope: str | Sequence[str] = "all",
        limit: int = 5,
        widen: bool = True,
        past_echoes: bool = False,
    ) -> list[SearchResult]:
        """Ranked full-text recall over every view of the memory (`memory.search.recall.search`)."""
        return search(
            self.backend, query, scope=scope, limit=limit, widen=widen, past_echoes=past_echoes
        )

    def sync_index(self) -> IndexReport:
        """Bring the index up to date with the documents (cheap when nothing changed)."""
        return self.backend.sync_index()

    def reindex(self) -> IndexReport:
        """Drop the derived index and rebuild it from the documents and entries."""
        if not isinstance(self.backend, Reindexable):
            raise NotImplementedError(f"{type(self.backend).__name__} cannot rebuild its index")
        return self.backend.reindex()
