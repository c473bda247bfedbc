"""tether's external memory: files people can read, plus a derived SQLite index.

Public API (kept small and pinned by `tests/memory/test_public_api.py`)::

    from memory import MemoryStore
    store = MemoryStore(".temp/memory")
    entry = store.log(big_text, tags=["pytest"])
    hits = store.search("why did the auth tests fail?", scope="all", limit=5)

Heavy modules (LangChain tools) are imported lazily so `memory` CLI start-up stays fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from memory.errors import (
    ChunkOutOfRangeError,
    CorruptDataError,
    InvalidInputError,
    InvalidQueryError,
    MemoryDirError,
    MemoryRuntimeError,
    MemoryStoreError,
    MemoryUserError,
    PathEscapeError,
    UnknownEntryError,
)
from memory.paths import Layout, resolve_root
from memory.store import MemoryStore

if TYPE_CHECKING:
    from memory.entries import Entry
    from memory.recall import SearchResult

_LAZY = {
    "Entry": "memory.entries",
    "SearchResult": "memory.recall",
}

__all__ = [
    "ChunkOutOfRangeError",
    "CorruptDataError",
    "Entry",
    "InvalidInputError",
    "InvalidQueryError",
    "Layout",
    "MemoryDirError",
    "MemoryRuntimeError",
    "MemoryStore",
    "MemoryStoreError",
    "MemoryUserError",
    "PathEscapeError",
    "SearchResult",
    "UnknownEntryError",
    "resolve_root",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'memory' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
