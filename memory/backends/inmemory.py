"""The in-memory reference backend: the storage contract in plain dicts under one lock.

It is meant to be obviously correct, not fast: every operation takes `self._lock`, copies
what it stores and what it returns (records are frozen dataclasses, bytes are immutable), and
ranks search results with textbook BM25 over lower-cased words, weighed by the kind of record
(`memory.search.recall.SOURCE_WEIGHTS`). Nothing survives the process; use it in tests and as the
yardstick the other backends are compared with.
"""

from __future__ import annotations

import copy
import math
import re
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from memory.backends.blocks import document_docs, entry_docs, indexed_source, message_docs
from memory.contract.base import (
    BaseBackend,
    Document,
    DocumentInfo,
    IndexReport,
    SearchDoc,
    SearchHit,
    check_chunk,
    check_data,
    check_doc_path,
    check_id,
    check_limit,
    check_query,
    check_version,
    encode_lines,
    lines_before,
    lock_timeout,
    unknown_entry,
)
from memory.contract.entries import Entry, pieces, prepare_entry, under_directory
from memory.search.recall import source_weight

WORD = re.compile(r"\w+")
BM25_K1 = 1.2
BM25_B = 0.75


def words(text: str) -> list[str]:
    """Lower-cased words with a plural `s` dropped (`cookies` and `cookie` meet)."""
    out = []
    for word in WORD.findall(text.lower()):
        if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
            word = word[:-1]
        out.append(word)
    return out


class InMemoryBackend(BaseBackend):
    """Everything in dicts; `InMemoryBackend()` is ready to use (`setup()` does nothing).

    Documents and entries are indexed as they are written (blocks of `memory.backends.blocks`).
    """

    kind = "memory"

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._mutexes: dict[str, threading.Lock] = {}
        self._docs: dict[str, Document] = {}
        self._last_version: dict[str, int] = {}
        self._entries: dict[str, tuple[Entry, list[str]]] = {}
        self._dead: set[str] = set()
        self._seq = 0
        self._index: dict[str, SearchDoc] = {}
        self._saver: Any = None

    @property
    def location(self) -> str:
        return "memory://"

    # -- documents -----------------------------------------------------------------
    def get_document(self, path: str, *, offset: int = 0) -> Document | None:
        check_doc_path(path)
        with self._lock:
            doc = self._docs.get(path)
        return doc if doc is None or not offset else replace(doc, data=doc.data[offset:])

    def stat_document(self, path: str) -> DocumentInfo | None:
        doc = self.get_document(path)
        return None if doc is None else DocumentInfo(doc.path, doc.version, doc.mtime, doc.size)

    def _store(self, path: str, data: bytes) -> DocumentInfo:
        version = self._last_version.get(path, 0) + 1
        doc = Document(path, version, time.time(), len(data), data)
        self._docs[path] = doc
        self._last_version[path] = version
        return DocumentInfo(path, version, doc.mtime, doc.size)

    def put_document(
        self, path: str, data: bytes, *, expected_version: int | None = None
    ) -> DocumentInfo:
        check_doc_path(path)
        data = check_data(data)
        with self._lock:
            current = self._docs.get(path)
            check_version(path, current.version if current else 0, expected_version)
            self._reindex_document(path, data)
            return self._store(path, data)

    def append_lines(self, path: str, lines: Sequence[bytes | str]) -> int:
        check_doc_path(path)
        payload = encode_lines(lines)
        with self._lock:
            current = self._docs.get(path)
            old = current.data if current else b""
            first = lines_before(old) + 1
            if old and not old.endswith(b"\n"):
                payload = b"\n" + payload  # close a torn line: it keeps its number
            self._store(path, old + payload)
            if path.endswith(".jsonl"):  # a log: index only its new lines, if searched
                new = payload.lstrip(b"\n").split(b"\n")[:-1] if indexed_source(path) else []
                self._upsert(message_docs(path, list(enumerate(new, start=first))))
            else:
                self._reindex_document(path, old + payload)
            return first

    def delete_document(self, path: str, *, expected_version: int | None = None) -> bool:
        check_doc_path(path)
        with self._lock:
            current = self._docs.get(path)
            check_version(path, current.version if current else 0, expected_version)
            self._reindex_document(path, None)
            return self._docs.pop(path, None) is not None

    def _reindex_document(self, path: str, data: bytes | None) -> None:
        for doc_id in [d for d, doc in self._index.items() if doc.path == path]:
            del self._index[doc_id]
        if data is not None:
            self._upsert(document_docs(path, data))

    def list_documents(self, prefix: str = "") -> list[DocumentInfo]:
        with self._lock:
            return [
                DocumentInfo(d.path, d.version, d.mtime, d.size)
                for p, d in sorted(self._docs.items())
                if p.startswith(prefix)
            ]

    # -- entries -------------------------------------------------------------------
    def log_entry(
        self, content, *, type="output", tags=(), directory=None, checkpoint=None
    ) -> Entry:
        entry, text, data = prepare_entry(
            content, type=type, tags=tags, directory=directory, checkpoint=checkpoint,
            moment=self.clock(), summarizer=self.summarizer,
        )  # fmt: skip
        with self._lock:
            self._add_entry(entry, text, len(data))
        return copy.deepcopy(entry)

    def _add_entry(self, entry: Entry, text: str, size: int) -> None:
        self._seq += 1
        entry.seq, entry.stored_bytes, entry.path = self._seq, size, None
        parts = pieces(entry, text)
        self._entries[entry.id] = (entry, parts)
        self._upsert(entry_docs(entry, parts))

    def put_entry(self, entry: Entry, content: bytes) -> bool:
        text = content.decode("utf-8")
        with self._lock:
            if entry.id in self._entries or entry.id in self._dead:
                return False
            self._add_entry(copy.deepcopy(entry), text, len(content))
        return True

    def get_entry(self, entry_id: str) -> Entry:
        with self._lock:
            found = self._entries.get(entry_id)
        if found is None:
            raise unknown_entry(entry_id)
        return copy.deepcopy(found[0])

    def fetch_entry(self, entry_id: str, *, chunk: int | None = None) -> str:
        with self._lock:
            found = self._entries.get(entry_id)
        if found is None:
            raise unknown_entry(entry_id)
        entry, parts = found
        check_chunk(entry_id, chunk, entry.chunks)
        return "".join(parts) if chunk is None else parts[chunk]

    def list_entries(
        self, *, type=None, tag=None, directory=None, checkpoint=None, limit=20
    ) -> list[Entry]:
        check_limit(limit)
        with self._lock:
            rows = sorted((e for e, _ in self._entries.values()), key=lambda e: -e.seq)
        out = [
            copy.deepcopy(e)
            for e in rows
            if (type is None or e.type == type)
            and (tag is None or tag in e.tags)
            and (checkpoint is None or e.checkpoint == checkpoint)
            and (directory is None or under_directory(e.directory, directory))
        ]
        return out if limit is None else out[:limit]

    def delete_entries(self, entry_ids: Sequence[str]) -> list[Entry]:
        removed = []
        with self._lock:
            for entry_id in dict.fromkeys(entry_ids):
                found = self._entries.pop(entry_id, None)
                if found is not None:
                    self._dead.add(entry_id)
                    for doc in entry_docs(*found):
                        self._index.pop(doc.doc_id, None)
                    removed.append(found[0])
        return sorted(removed, key=lambda e: e.seq)

    def count_pruned(self) -> int:
        with self._lock:
            return len(self._dead)

    # -- search index --------------------------------------------------------------
    def index_upsert(self, docs: Sequence[SearchDoc]) -> None:
        for doc in docs:
            check_id(doc.doc_id, "document id")
            check_id(doc.source, "source")
        with self._lock:
            self._upsert(docs)

    def _upsert(self, docs: Sequence[SearchDoc]) -> None:
        for doc in docs:
            self._index[doc.doc_id] = copy.deepcopy(doc)

    def index_delete(self, doc_ids: Sequence[str]) -> int:
        with self._lock:
            return sum(self._index.pop(d, None) is not None for d in doc_ids)

    def index_query(self, query, *, sources=None, limit=10) -> list[SearchHit]:
        check_query(query, limit)
        terms = set(words(query))
        with self._lock:
            docs = [d for d in self._index.values() if sources is None or d.source in sources]
        tokenised = [(d, words(d.text)) for d in docs]
        if not tokenised:
            return []
        avg = sum(len(t) for _, t in tokenised) / len(tokenised) or 1.0
        df = {t: sum(t in set(toks) for _, toks in tokenised) for t in terms}
        hits = []
        for doc, toks in tokenised:
            score = 0.0
            for term in terms:
                tf = toks.count(term)
                if not tf:
                    continue
                idf = math.log(1 + (len(tokenised) - df[term] + 0.5) / (df[term] + 0.5))
                norm = tf + BM25_K1 * (1 - BM25_B + BM25_B * len(toks) / avg)
                score += idf * tf * (BM25_K1 + 1) / norm
            score *= source_weight(doc.source, doc.path)  # distilled records before raw output
            if score > 0:
                hits.append(SearchHit(doc.doc_id, doc.source, doc.path, score, doc.text))
        hits.sort(key=lambda h: (-h.score, h.doc_id))
        return hits[:limit]

    def reindex(self) -> IndexReport:
        with self._lock:
            self._index.clear()
            for path, doc in self._docs.items():
                self._upsert(document_docs(path, doc.data))
            for entry, parts in self._entries.values():
                self._upsert(entry_docs(entry, parts))
            return IndexReport(
                files_indexed=len(self._docs),
                entries_added=len(self._entries),
                rows_added=len(self._index),
                rows_total=len(self._index),
            )

    def checkpointer(self) -> Any:
        """LangGraph's `InMemorySaver` (graph state lives as long as this backend)."""
        if self._saver is None:
            from langgraph.checkpoint.memory import InMemorySaver  # only graph users pay for it

            self._saver = InMemorySaver()
        return self._saver

    def holds_thread(self, thread_id: str) -> bool:
        saver = self._saver
        return saver is not None and bool(saver.storage.get(thread_id, {}).get(""))

    # -- the mutex ----------------------------------------------------------------------
    @contextmanager
    def mutex(self, name: str, *, timeout: float = 60.0) -> Iterator[None]:
        """A thread lock per name: this memory lives in one process, so does its holder."""
        with self._lock:
            lock = self._mutexes.setdefault(name, threading.Lock())
        if not lock.acquire(timeout=timeout):
            raise lock_timeout(name, timeout)
        try:
            yield
        finally:
            lock.release()
