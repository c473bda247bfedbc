"""The files + SQLite backend: today's `.temp/memory` tree behind the storage contract.

Documents are the plain files of the memory directory (written with `memory.durable`, so a
reader never sees a torn file); `memory.db` keeps, beside today's tables, one row per path
with its version, mtime and SHA-256 (`backend_documents`), the contract's search table
(FTS5, porter stemmer, BM25), task records, the subagent registry and task leases. Entries go
through `memory.entries.EntryStore` unchanged (inline rows, gzip files, chunk folders).

Writers serialise on SQLite's write lock (`BEGIN IMMEDIATE`): the version is checked, the
file replaced atomically, then the row committed. A crash between the two leaves a complete
new file whose hash no row records; readers then report the last committed version, and the
next compare-and-set write against that version succeeds. A file edited by hand (no row, or
a hash mismatch) is read as it is. Versions are never reused: a delete keeps the row.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from memory import durable
from memory.backends.inmemory import check_query, words
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
)
from memory.errors import InvalidInputError
from memory.store import MemoryStore

M201_BACKEND_CONTRACT = """
CREATE TABLE IF NOT EXISTS backend_documents (
    path TEXT PRIMARY KEY, version INTEGER NOT NULL, mtime REAL NOT NULL,
    size INTEGER NOT NULL, sha256 TEXT NOT NULL
);
CREATE VIRTUAL TABLE IF NOT EXISTS backend_search USING fts5(
    doc_id UNINDEXED, source UNINDEXED, path UNINDEXED, meta UNINDEXED, body,
    tokenize = 'porter unicode61'
);
CREATE TABLE IF NOT EXISTS backend_search_ids (doc_id TEXT PRIMARY KEY, fts_rowid INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS backend_tasks (
    task_id TEXT PRIMARY KEY, status TEXT NOT NULL, data TEXT NOT NULL, updated_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS backend_subagents (
    task_id TEXT NOT NULL, agent_id TEXT NOT NULL, status TEXT NOT NULL, data TEXT NOT NULL,
    updated_at REAL NOT NULL, PRIMARY KEY (task_id, agent_id)
);
CREATE TABLE IF NOT EXISTS backend_locks (
    task_id TEXT PRIMARY KEY, owner TEXT NOT NULL, expires_at REAL NOT NULL
);
"""
MIGRATIONS = [("m201_backend_contract", M201_BACKEND_CONTRACT)]

SELECT_DOC_SQL = "SELECT version, mtime, size, sha256 FROM backend_documents WHERE path = ?"
SELECT_DOCS_SQL = "SELECT path, version, sha256 FROM backend_documents"
UPSERT_DOC_SQL = """
INSERT INTO backend_documents(path, version, mtime, size, sha256) VALUES (?, ?, ?, ?, ?)
ON CONFLICT(path) DO UPDATE SET version = excluded.version, mtime = excluded.mtime,
    size = excluded.size, sha256 = excluded.sha256
"""
SEARCH_ROWID_SQL = "SELECT fts_rowid FROM backend_search_ids WHERE doc_id = ?"
DELETE_SEARCH_SQL = "DELETE FROM backend_search WHERE rowid = ?"
DELETE_SEARCH_ID_SQL = "DELETE FROM backend_search_ids WHERE doc_id = ?"
INSERT_SEARCH_ID_SQL = "INSERT INTO backend_search_ids(doc_id, fts_rowid) VALUES (?, ?)"
INSERT_SEARCH_SQL = (
    "INSERT INTO backend_search(doc_id, source, path, meta, body) VALUES (?,?,?,?,?)"
)
QUERY_SEARCH_SQL = """
SELECT doc_id, source, path, body, -bm25(backend_search) AS score FROM backend_search
WHERE backend_search MATCH ? {where} ORDER BY bm25(backend_search), doc_id LIMIT ?
"""
UPSERT_TASK_SQL = """
INSERT INTO backend_tasks(task_id, status, data, updated_at) VALUES (?, ?, ?, ?)
ON CONFLICT(task_id) DO UPDATE SET status = excluded.status, data = excluded.data,
    updated_at = excluded.updated_at
"""
SELECT_TASK_SQL = "SELECT task_id, status, data, updated_at FROM backend_tasks WHERE task_id = ?"
LIST_TASKS_SQL = (
    "SELECT task_id, status, data, updated_at FROM backend_tasks ORDER BY updated_at DESC, task_id"
)
UPSERT_AGENT_SQL = """
INSERT INTO backend_subagents(task_id, agent_id, status, data, updated_at) VALUES (?,?,?,?,?)
ON CONFLICT(task_id, agent_id) DO UPDATE SET status = excluded.status, data = excluded.data,
    updated_at = excluded.updated_at
"""
SELECT_AGENT_SQL = "SELECT status, data FROM backend_subagents WHERE task_id = ? AND agent_id = ?"
LIST_AGENTS_SQL = """
SELECT task_id, agent_id, status, data, updated_at FROM backend_subagents
WHERE task_id = ? ORDER BY agent_id
"""
SELECT_LOCK_SQL = "SELECT owner, expires_at FROM backend_locks WHERE task_id = ?"
UPSERT_LOCK_SQL = """
INSERT INTO backend_locks(task_id, owner, expires_at) VALUES (?, ?, ?)
ON CONFLICT(task_id) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at
"""
DELETE_LOCK_SQL = "DELETE FROM backend_locks WHERE task_id = ? AND owner = ?"

#: Top-level names of the memory directory that are not documents.
NOT_DOCUMENTS = ("memory.db", "memory.db-wal", "memory.db-shm", "entries")
#: The one hidden folder that holds documents (the orchestrator's task list and registry),
#: minus its live-process markers, which mean nothing elsewhere.
DOCUMENT_DOT_DIR = ".tether"
NOT_DOCUMENT_DIRS = (".tether/running",)


def is_document_path(rel: str) -> bool:
    """Whether a relative path of a memory tree is a document (not tether's own storage)."""
    parts = rel.split("/")
    if parts[0] in NOT_DOCUMENTS or any(rel.startswith(d + "/") for d in NOT_DOCUMENT_DIRS):
        return False
    hidden = [p for p in parts if p.startswith(".")]
    return not hidden or (parts[0] == DOCUMENT_DOT_DIR and len(hidden) == 1)


def walk_documents(root: Path) -> Iterator[tuple[str, str]]:
    """`(relative path, absolute path)` of every document file under `root`, sorted."""
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = Path(dirpath).relative_to(root).as_posix()
        prefix = "" if rel_dir == "." else rel_dir + "/"
        dirnames[:] = sorted(d for d in dirnames if is_document_path(prefix + d + "/x"))
        for name in filenames:
            if is_document_path(prefix + name):
                found.append((prefix + name, os.path.join(dirpath, name)))
    return iter(sorted(found))


READ_RETRIES = 50


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class FilesBackend(BaseBackend):
    """The default backend on a `MemoryStore` (a memory directory and its `memory.db`).

    Args:
        store: an open store; the backend does not close it.
    """

    kind = "files"

    def __init__(self, store: MemoryStore):
        self.store = store
        self.root = store.root

    @classmethod
    @contextmanager
    def open(cls, root: str | os.PathLike[str] | None = None) -> Iterator[FilesBackend]:
        """A backend on the memory directory `root` (created if missing), closed after."""
        with MemoryStore(root) as store:
            backend = cls(store)
            backend.setup()
            yield backend

    def setup(self) -> None:
        self.store.connect()  # migrations run on connect

    @property
    def _conn(self) -> sqlite3.Connection:
        return self.store.connect()

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    # -- documents -----------------------------------------------------------------
    def _file(self, path: str) -> Path:
        check_doc_path(path)
        if not is_document_path(path):
            raise InvalidInputError(
                f"document path {path!r} names tether's own storage; use another path"
            )
        return self.root / path

    def get_document(self, path: str) -> Document | None:
        file = self._file(path)
        for _ in range(READ_RETRIES):
            row = self._conn.execute(SELECT_DOC_SQL, (path,)).fetchone()
            try:
                data = file.read_bytes()
                mtime = file.stat().st_mtime
            except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
                return None
            if row is None:
                return Document(path, 1, mtime, len(data), data)
            if row["sha256"] == _sha(data):
                return Document(path, row["version"], row["mtime"], len(data), data)
            time.sleep(0.002)  # a writer is between its file and its row
        return Document(path, row["version"], mtime, len(data), data)

    def _current_version(self, conn: sqlite3.Connection, path: str, file: Path) -> tuple[int, int]:
        """(version readers see now, highest version ever given) for `path`."""
        row = conn.execute(SELECT_DOC_SQL, (path,)).fetchone()
        last = row["version"] if row else 0
        if not file.is_file():
            return 0, last
        return (last, last) if row else (1, 1)

    def put_document(
        self, path: str, data: bytes, *, expected_version: int | None = None
    ) -> DocumentInfo:
        file = self._file(path)
        if not isinstance(data, bytes | bytearray):
            raise InvalidInputError(f"document data must be bytes, not {type(data).__name__!r}")
        data = bytes(data)
        with self._write() as conn:
            have, last = self._current_version(conn, path, file)
            _check_version(path, have, expected_version)
            durable.atomic_write_bytes(file, data)
            info = DocumentInfo(path, last + 1, time.time(), len(data))
            conn.execute(UPSERT_DOC_SQL, (path, info.version, info.mtime, info.size, _sha(data)))
        return info

    def delete_document(self, path: str, *, expected_version: int | None = None) -> bool:
        file = self._file(path)
        with self._write() as conn:
            have, last = self._current_version(conn, path, file)
            _check_version(path, have, expected_version)
            if not have:
                return False
            conn.execute(UPSERT_DOC_SQL, (path, last, time.time(), 0, ""))
            file.unlink()
            durable.fsync_dir(file.parent)
        return True

    def list_documents(self, prefix: str = "") -> list[DocumentInfo]:
        rows = {r["path"]: r["version"] for r in self._conn.execute(SELECT_DOCS_SQL)}
        out = []
        for rel, full in walk_documents(self.root):
            if rel.startswith(prefix):
                st = os.stat(full)
                out.append(DocumentInfo(rel, rows.get(rel, 1), st.st_mtime, st.st_size))
        return out

    # -- entries -------------------------------------------------------------------
    def log_entry(self, content, *, type="output", tags=(), directory=None) -> EntryRecord:
        return _record(self.store.log(content, tags=tags, type=type, directory=directory))

    def get_entry(self, entry_id: str) -> EntryRecord:
        return _record(self.store.get_entry(entry_id))

    def fetch_entry(self, entry_id: str, *, chunk: int | None = None) -> str:
        check_chunk(entry_id, chunk, self.get_entry(entry_id).chunks)
        return self.store.fetch(entry_id, chunk=chunk)

    def list_entries(self, *, type=None, tag=None, directory=None, limit=20) -> list[EntryRecord]:
        found = self.store.list_entries(type=type, tag=tag, directory=directory, limit=limit)
        return [_record(e) for e in found]

    # -- search index --------------------------------------------------------------
    def index_upsert(self, docs: Sequence[SearchDoc]) -> None:
        for doc in docs:
            check_id(doc.doc_id, "document id")
            check_id(doc.source, "source")
        with self._write() as conn:
            for doc in docs:
                _delete_search(conn, doc.doc_id)
                meta = json.dumps(doc.meta, sort_keys=True)
                row = (doc.doc_id, doc.source, doc.path, meta, doc.text)
                rowid = conn.execute(INSERT_SEARCH_SQL, row).lastrowid
                conn.execute(INSERT_SEARCH_ID_SQL, (doc.doc_id, rowid))

    def index_delete(self, doc_ids: Sequence[str]) -> int:
        with self._write() as conn:
            return sum(_delete_search(conn, d) for d in doc_ids)

    def index_query(self, query, *, sources=None, limit=10) -> list[SearchHit]:
        terms = check_query(query, limit)
        if not terms:
            return []
        expr = " OR ".join('"' + t.replace('"', "") + '"' for t in dict.fromkeys(terms))
        params: list[Any] = [expr]
        where = ""
        if sources is not None:
            where = f"AND source IN ({','.join('?' * len(sources))})"
            params += list(sources)
        sql = QUERY_SEARCH_SQL.format(where=where)
        rows = self._conn.execute(sql, [*params, limit]).fetchall()
        return [SearchHit(r[0], r[1], r[2], float(r[4]), r[3]) for r in rows]

    # -- tasks and registry --------------------------------------------------------
    def put_task(self, task: TaskRecord) -> TaskRecord:
        check_id(task.task_id, "task id")
        now = time.time()
        with self._write() as conn:
            conn.execute(UPSERT_TASK_SQL, (task.task_id, task.status, json_text(task.data), now))
        return TaskRecord(task.task_id, task.status, json.loads(json_text(task.data)), now)

    def get_task(self, task_id: str) -> TaskRecord | None:
        row = self._conn.execute(SELECT_TASK_SQL, (task_id,)).fetchone()
        return None if row is None else TaskRecord(row[0], row[1], json.loads(row[2]), row[3])

    def list_tasks(self) -> list[TaskRecord]:
        rows = self._conn.execute(LIST_TASKS_SQL).fetchall()
        return [TaskRecord(r[0], r[1], json.loads(r[2]), r[3]) for r in rows]

    def put_subagent(self, record: SubagentRecord) -> SubagentRecord:
        check_id(record.task_id, "task id")
        check_id(record.agent_id, "agent id")
        now = time.time()
        row = (record.task_id, record.agent_id, record.status, json_text(record.data), now)
        with self._write() as conn:
            conn.execute(UPSERT_AGENT_SQL, row)
        return SubagentRecord(*row[:3], json.loads(row[3]), now)

    def transition_subagent(self, task_id, agent_id, *, from_status, to_status, data=None):
        check_id(task_id, "task id")
        check_id(agent_id, "agent id")
        with self._write() as conn:
            row = conn.execute(SELECT_AGENT_SQL, (task_id, agent_id)).fetchone()
            if (row[0] if row else None) not in tuple(from_status):
                return False
            merged = json.loads(row[1]) if row else {}
            merged.update(data or {})
            conn.execute(
                UPSERT_AGENT_SQL, (task_id, agent_id, to_status, json_text(merged), time.time())
            )
        return True

    def list_subagents(self, task_id: str) -> list[SubagentRecord]:
        rows = self._conn.execute(LIST_AGENTS_SQL, (task_id,)).fetchall()
        return [SubagentRecord(r[0], r[1], r[2], json.loads(r[3]), r[4]) for r in rows]

    # -- lock ----------------------------------------------------------------------
    def acquire_lock(self, task_id: str, owner: str, *, ttl: float = 60.0) -> bool:
        check_id(task_id, "task id")
        check_id(owner, "lock owner")
        with self._write() as conn:
            now = time.time()
            row = conn.execute(SELECT_LOCK_SQL, (task_id,)).fetchone()
            if row and row[0] != owner and row[1] > now:
                return False
            conn.execute(UPSERT_LOCK_SQL, (task_id, owner, now + ttl))
        return True

    def release_lock(self, task_id: str, owner: str) -> bool:
        with self._write() as conn:
            return conn.execute(DELETE_LOCK_SQL, (task_id, owner)).rowcount > 0

    def get_lock(self, task_id: str) -> LockInfo | None:
        row = self._conn.execute(SELECT_LOCK_SQL, (task_id,)).fetchone()
        if row is None or row[1] <= time.time():
            return None
        return LockInfo(task_id, row[0], row[1])


def _delete_search(conn: sqlite3.Connection, doc_id: str) -> bool:
    """Drop `doc_id` from the FTS table by rowid (FTS5 cannot look up an unindexed column)."""
    row = conn.execute(SEARCH_ROWID_SQL, (doc_id,)).fetchone()
    if row is None:
        return False
    conn.execute(DELETE_SEARCH_SQL, (row[0],))
    conn.execute(DELETE_SEARCH_ID_SQL, (doc_id,))
    return True


def _check_version(path: str, have: int, expected: int | None) -> None:
    if expected is not None and expected != have:
        raise ConflictError(
            f"{path!r} is at version {have}, not {expected}; read it again and retry"
        )


def _record(entry: Any) -> EntryRecord:
    return EntryRecord(
        id=entry.id,
        type=entry.type,
        tokens=entry.tokens,
        bytes=entry.bytes,
        chunks=max(entry.chunks, 1),
        summary=entry.summary,
        tags=tuple(entry.tags),
        directory=entry.directory,
        created_at=entry.created_at,
    )


__all__ = ["FilesBackend", "MIGRATIONS", "words"]
