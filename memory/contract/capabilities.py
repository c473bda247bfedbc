"""What a backend may do beyond the storage contract (`memory.contract.base`): each a small
protocol, checked with `isinstance(backend, Protocol)` by the code that needs it.

tether's three backends have all but the last three; a backend of yours needs none to store
a run's memory. Without `Reindexable`, `memory reindex` says the backend cannot rebuild its index;
without `HoldsGraphState`, the orchestrator needs a LangGraph checkpointer passed to it
(`Orchestrator(checkpointer=...)`); without `ImportsEntries`, entries cannot be imported
from a memory directory into it. `MemoryDirectory` is a memory kept as folders a person
reads (the files backend: its layout, its entry store and index, temp files a kill leaves);
`KnowsIdentity` names which memory it is, the same from every host (PostgreSQL: a
`tether_subagent` server answers it); `shared_between_machines` asks a backend, or its class
before anything is opened, whether other machines reach the same memory (`BaseBackend.shared`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from memory.contract.entries import Entry
from memory.contract.records import IndexReport

if TYPE_CHECKING:
    from pathlib import Path

    from memory.paths import Layout


@runtime_checkable
class Reindexable(Protocol):
    """A search index that can be rebuilt from the documents and entries, row by row."""

    def reindex(self) -> IndexReport:
        """Drop the search index and rebuild it from the documents and entries."""
        ...

    def index_delete(self, doc_ids: Sequence[str]) -> int:
        """Remove documents from the index; returns how many existed."""
        ...


@runtime_checkable
class HoldsGraphState(Protocol):
    """A LangGraph checkpointer kept beside the memory (`SqliteSaver`, `PostgresSaver`)."""

    def checkpointer(self) -> Any:
        """The checkpointer (owned by the backend: one per backend, closed with it)."""
        ...

    def holds_thread(self, thread_id: str) -> bool:
        """Whether graph state was saved for `thread_id`, asked without loading LangGraph."""
        ...


@runtime_checkable
class ImportsEntries(Protocol):
    """Entries logged elsewhere can be stored with their ids and metadata (an import)."""

    def put_entry(self, entry: Entry, content: bytes) -> bool:
        """Store an entry logged elsewhere; `False`, storing nothing, when the id exists or
        was pruned here."""
        ...


@runtime_checkable
class MemoryDirectory(Protocol):
    """A memory kept as a directory of files a person reads (`FilesBackend`)."""

    layout: Layout
    entries: Any
    """The entry store (tiers, journal, orphan folders, `iter_bytes`)."""
    index: Any
    """The full-text index (sync by mtime/size, rebuild)."""

    @property
    def root(self) -> Path:
        """The memory directory."""
        ...

    def connect(self) -> Any:
        """The connection to the directory's own database for this thread."""
        ...

    def check_writable(self, action: str = "write") -> None:
        """Raise one line when the directory is read-only."""
        ...


@runtime_checkable
class KnowsIdentity(Protocol):
    """A memory that can say which memory it is, the same from every host that reaches it."""

    def identity(self) -> str:
        """Which memory this is (for PostgreSQL: the database, the schema, when tether's
        tables were made)."""
        ...


def shared_between_machines(backend: object) -> bool:
    """Whether processes on other machines reach the same memory (`BaseBackend.shared`);
    `backend` is a backend or its class (`memory.backends.backend_class(url)`)."""
    return bool(getattr(backend, "shared", False))


__all__ = [
    "HoldsGraphState",
    "ImportsEntries",
    "KnowsIdentity",
    "MemoryDirectory",
    "Reindexable",
    "shared_between_machines",
]
