"""What a backend may do beyond the storage contract (`memory.contract.base`): each a small
protocol, checked with `isinstance(backend, Protocol)` by the code that needs it.

tether's three backends have all of them; a backend of yours needs none to store a run's
memory. Without `Reindexable`, `memory reindex` says the backend cannot rebuild its index;
without `HoldsGraphState`, the orchestrator needs a LangGraph checkpointer passed to it
(`Orchestrator(checkpointer=...)`); without `ImportsEntries`, entries cannot be imported
from a memory directory into it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from memory.contract.entries import Entry
from memory.contract.records import IndexReport


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


__all__ = ["HoldsGraphState", "ImportsEntries", "Reindexable"]
