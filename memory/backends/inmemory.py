"""The in-memory reference backend: the storage contract in plain dicts under one lock.

It is meant to be obviously correct, not fast: every operation takes `self._lock`, copies
what it stores and what it returns (records are frozen dataclasses, bytes are immutable), and
ranks search results with textbook BM25 over lower-cased words. Nothing survives the process;
use it in tests and as the yardstick the other backends are compared with.
"""

from __future__ import annotations

import copy
import json
import math
import re
import threading
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from memory.base import (
    BaseBackend,
    ConflictError,
    Document,
    DocumentInfo,
    EntryRecord,
    LockInfo,
    SearchDoc,
    SearchHit,
    SubagentRecord,
    TaskRecord,
    check_chunk,
    check_doc_path,
    check_id,
    json_text,
    prepare_entry,
    unknown_entry,
)
from memory.errors import InvalidInputError, InvalidQueryError

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


def check_query(query: str, limit: int) -> list[str]:
    if not isinstance(query, str) or not query.strip():
        raise InvalidQueryError("empty query: give words to search for")
    if not isinstance(limit, int) or limit < 1:
        raise InvalidQueryError(f"invalid limit {limit!r}: use a positive number")
    return words(query)


class InMemoryBackend(BaseBackend):
    """Everything in dicts; `InMemoryBackend()` is ready to use (`setup()` does nothing)."""

    kind = "memory"

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._docs: dict[str, Document] = {}
        self._last_version: dict[str, int] = {}
        self._entries: dict[str, tuple[int, EntryRecord, list[str]]] = {}
        self._seq = 0
        self._index: dict[str, SearchDoc] = {}
        self._tasks: dict[str, TaskRecord] = {}
        self._agents: dict[tuple[str, str], SubagentRecord] = {}
        self._locks: dict[str, LockInfo] = {}

    # -- documents -----------------------------------------------------------------
    def get_document(self, path: str) -> Document | None:
        check_doc_path(path)
        with self._lock:
            return self._docs.get(path)

    def put_document(
        self, path: str, data: bytes, *, expected_version: int | None = None
    ) -> DocumentInfo:
        check_doc_path(path)
        if not isinstance(data, bytes | bytearray):
            raise InvalidInputError(f"document data must be bytes, not {type(data).__name__!r}")
        with self._lock:
            current = self._docs.get(path)
            self._check_version(path, current, expected_version)
            version = self._last_version.get(path, 0) + 1
            doc = Document(path, version, time.time(), len(data), bytes(data))
            self._docs[path] = doc
            self._last_version[path] = version
            return DocumentInfo(path, version, doc.mtime, doc.size)

    def delete_document(self, path: str, *, expected_version: int | None = None) -> bool:
        check_doc_path(path)
        with self._lock:
            current = self._docs.get(path)
            self._check_version(path, current, expected_version)
            return self._docs.pop(path, None) is not None

    @staticmethod
    def _check_version(path: str, current: Document | None, expected: int | None) -> None:
        have = current.version if current else 0
        if expected is not None and expected != have:
            raise ConflictError(
                f"{path!r} is at version {have}, not {expected}; read it again and retry"
            )

    def list_documents(self, prefix: str = "") -> list[DocumentInfo]:
        with self._lock:
            return [
                DocumentInfo(d.path, d.version, d.mtime, d.size)
                for p, d in sorted(self._docs.items())
                if p.startswith(prefix)
            ]

    # -- entries -------------------------------------------------------------------
    def log_entry(self, content, *, type="output", tags=(), directory=None) -> EntryRecord:
        record, pieces = prepare_entry(content, type=type, tags=tags, directory=directory)
        with self._lock:
            self._seq += 1
            self._entries[record.id] = (self._seq, record, pieces)
        return record

    def get_entry(self, entry_id: str) -> EntryRecord:
        with self._lock:
            found = self._entries.get(entry_id)
        if found is None:
            raise unknown_entry(entry_id)
        return found[1]

    def fetch_entry(self, entry_id: str, *, chunk: int | None = None) -> str:
        with self._lock:
            found = self._entries.get(entry_id)
        if found is None:
            raise unknown_entry(entry_id)
        _, record, pieces = found
        check_chunk(entry_id, chunk, record.chunks)
        return "".join(pieces) if chunk is None else pieces[chunk]

    def list_entries(self, *, type=None, tag=None, directory=None, limit=20) -> list[EntryRecord]:
        if limit is not None and limit < 0:
            raise InvalidInputError(f"invalid limit {limit!r}: use 0 or a positive number")
        with self._lock:
            rows = sorted(self._entries.values(), key=lambda r: -r[0])
        out = [
            rec
            for _, rec, _ in rows
            if (type is None or rec.type == type)
            and (tag is None or tag in rec.tags)
            and (directory is None or _under(rec.directory, directory))
        ]
        return out if limit is None else out[:limit]

    # -- search index --------------------------------------------------------------
    def index_upsert(self, docs: Sequence[SearchDoc]) -> None:
        for doc in docs:
            check_id(doc.doc_id, "document id")
            check_id(doc.source, "source")
        with self._lock:
            for doc in docs:
                self._index[doc.doc_id] = copy.deepcopy(doc)

    def index_delete(self, doc_ids: Sequence[str]) -> int:
        with self._lock:
            return sum(self._index.pop(d, None) is not None for d in doc_ids)

    def index_query(self, query, *, sources=None, limit=10) -> list[SearchHit]:
        terms = set(check_query(query, limit))
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
            if score > 0:
                hits.append(SearchHit(doc.doc_id, doc.source, doc.path, score, doc.text))
        hits.sort(key=lambda h: (-h.score, h.doc_id))
        return hits[:limit]

    # -- tasks and registry --------------------------------------------------------
    def put_task(self, task: TaskRecord) -> TaskRecord:
        check_id(task.task_id, "task id")
        stored = replace(task, data=json.loads(json_text(task.data)), updated_at=time.time())
        with self._lock:
            self._tasks[task.task_id] = stored
        return stored

    def get_task(self, task_id: str) -> TaskRecord | None:
        with self._lock:
            found = self._tasks.get(task_id)
        return None if found is None else replace(found, data=copy.deepcopy(found.data))

    def list_tasks(self) -> list[TaskRecord]:
        with self._lock:
            tasks = list(self._tasks.values())
        return sorted(tasks, key=lambda t: (-t.updated_at, t.task_id))

    def put_subagent(self, record: SubagentRecord) -> SubagentRecord:
        check_id(record.task_id, "task id")
        check_id(record.agent_id, "agent id")
        stored = replace(record, data=json.loads(json_text(record.data)), updated_at=time.time())
        with self._lock:
            self._agents[(record.task_id, record.agent_id)] = stored
        return stored

    def transition_subagent(self, task_id, agent_id, *, from_status, to_status, data=None):
        check_id(task_id, "task id")
        check_id(agent_id, "agent id")
        with self._lock:
            current = self._agents.get((task_id, agent_id))
            if (current.status if current else None) not in tuple(from_status):
                return False
            merged: dict[str, Any] = dict(current.data) if current else {}
            merged.update(json.loads(json_text(data or {})))
            self._agents[(task_id, agent_id)] = SubagentRecord(
                task_id, agent_id, to_status, merged, time.time()
            )
            return True

    def list_subagents(self, task_id: str) -> list[SubagentRecord]:
        with self._lock:
            found = [r for (t, _), r in self._agents.items() if t == task_id]
        return sorted(found, key=lambda r: r.agent_id)

    # -- lock ----------------------------------------------------------------------
    def acquire_lock(self, task_id: str, owner: str, *, ttl: float = 60.0) -> bool:
        check_id(task_id, "task id")
        check_id(owner, "lock owner")
        now = time.time()
        with self._lock:
            held = self._locks.get(task_id)
            if held and held.owner != owner and held.expires_at > now:
                return False
            self._locks[task_id] = LockInfo(task_id, owner, now + ttl)
            return True

    def release_lock(self, task_id: str, owner: str) -> bool:
        with self._lock:
            held = self._locks.get(task_id)
            if held is None or held.owner != owner:
                return False
            del self._locks[task_id]
            return True

    def get_lock(self, task_id: str) -> LockInfo | None:
        with self._lock:
            held = self._locks.get(task_id)
        return held if held and held.expires_at > time.time() else None


def _under(directory: str | None, wanted: str) -> bool:
    from memory.entries import normalize_directory

    if directory is None:
        return False
    norm = normalize_directory(wanted)
    return directory == norm or directory.startswith(norm.rstrip("/") + "/")
