"""A backend of somebody's that has the storage contract's 14 primitives and nothing else
(no capability of `memory.contract.capabilities`, no mutex or records of its own): it keeps what it
is given in an in-memory backend it does not expose."""

from __future__ import annotations

from memory.backends.inmemory import InMemoryBackend
from memory.contract.base import BaseBackend


class MinimalBackend(BaseBackend):
    kind = "minimal"

    def __init__(self) -> None:
        self._inner = InMemoryBackend()

    @property
    def location(self) -> str:
        return "minimal://"

    def get_document(self, path, *, offset=0):
        return self._inner.get_document(path, offset=offset)

    def stat_document(self, path):
        return self._inner.stat_document(path)

    def put_document(self, path, data, *, expected_version=None):
        return self._inner.put_document(path, data, expected_version=expected_version)

    def append_lines(self, path, lines):
        return self._inner.append_lines(path, lines)

    def delete_document(self, path, *, expected_version=None):
        return self._inner.delete_document(path, expected_version=expected_version)

    def list_documents(self, prefix=""):
        return self._inner.list_documents(prefix)

    def log_entry(self, content, **kwargs):
        return self._inner.log_entry(content, **kwargs)

    def get_entry(self, entry_id):
        return self._inner.get_entry(entry_id)

    def fetch_entry(self, entry_id, *, chunk=None):
        return self._inner.fetch_entry(entry_id, chunk=chunk)

    def list_entries(self, **filters):
        return self._inner.list_entries(**filters)

    def delete_entries(self, entry_ids):
        return self._inner.delete_entries(entry_ids)

    def count_pruned(self):
        return self._inner.count_pruned()

    def index_upsert(self, docs):
        self._inner.index_upsert(docs)

    def index_query(self, query, *, sources=None, limit=10):
        return self._inner.index_query(query, sources=sources, limit=limit)
