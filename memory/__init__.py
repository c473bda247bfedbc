"""tether's external memory: files people can read (or rows of a shared database), searchable.

Public API (kept small and pinned by `tests/test_public_api.py`)::

    from memory import MemoryStore
    store = MemoryStore(".temp/memory")                     # files + SQLite, the default
    store = MemoryStore.from_url("postgresql://host/db")    # or any storage backend
    entry = store.log(big_text, tags=["pytest"])
    hits = store.search("why did the auth tests fail?", scope="all", limit=5)
    tools = memory_tools(store, task_id="T1")   # LangChain tools for any LangGraph agent

Heavy modules (LangChain tools) are imported lazily so `memory` CLI start-up stays fast.
"""

from __future__ import annotations

import importlib
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
    from memory.contract.entries import Entry
    from memory.facts.tools import memory_tools
    from memory.search.recall import SearchResult
    from memory.task.archive import Archive
    from memory.task.working import WorkingMemory
    from memory.window.context import BuiltContext, ContextBudgets, ContextBuilder, build_context

_LAZY = {
    "Archive": "memory.task.archive",
    "BuiltContext": "memory.window.context",
    "ContextBudgets": "memory.window.context",
    "ContextBuilder": "memory.window.context",
    "Entry": "memory.contract.entries",
    "SearchResult": "memory.search.recall",
    "WorkingMemory": "memory.task.working",
    "build_context": "memory.window.context",
    "memory_tools": "memory.facts.tools",
}

__all__ = [
    "Archive",
    "BuiltContext",
    "ChunkOutOfRangeError",
    "ContextBudgets",
    "ContextBuilder",
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
    "WorkingMemory",
    "build_context",
    "memory_tools",
    "resolve_root",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'memory' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
