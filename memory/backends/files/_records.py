"""Task records, the subagent registry and task leases as rows of `memory.db`.

Every write runs in one `BEGIN IMMEDIATE` transaction, so a compare-and-set on a subagent's
status or a lease is exact across threads and processes.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from memory.base import (
    LockInfo,
    SubagentRecord,
    TaskRecord,
    check_id,
    json_text,
)

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
#: The contract's search index is the tuned index of `_index`: the second one goes.
M202_DROP_BACKEND_SEARCH = """
DROP TABLE IF EXISTS backend_search;
DROP TABLE IF EXISTS backend_search_ids;
"""
#: A document's version is recognised by its file's `inode:mtime_ns:size` (no hashing).
M203_DOCUMENT_STAMPS = "ALTER TABLE backend_documents ADD COLUMN stamp TEXT"
MIGRATIONS = [
    ("m201_backend_contract", M201_BACKEND_CONTRACT),
    ("m202_drop_backend_search", M202_DROP_BACKEND_SEARCH),
    ("m203_document_stamps", M203_DOCUMENT_STAMPS),
]

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


class RecordTables:
    """Tasks, registry and leases over `connect()` and a `_write()` transaction."""

    connect: Callable[[], sqlite3.Connection]
    _write: Callable[..., AbstractContextManager[sqlite3.Connection]]

    def put_task(self, task: TaskRecord) -> TaskRecord:
        check_id(task.task_id, "task id")
        now = time.time()
        with self._write() as conn:
            conn.execute(UPSERT_TASK_SQL, (task.task_id, task.status, json_text(task.data), now))
        return TaskRecord(task.task_id, task.status, json.loads(json_text(task.data)), now)

    def get_task(self, task_id: str) -> TaskRecord | None:
        row = self.connect().execute(SELECT_TASK_SQL, (task_id,)).fetchone()
        return None if row is None else TaskRecord(row[0], row[1], json.loads(row[2]), row[3])

    def list_tasks(self) -> list[TaskRecord]:
        rows = self.connect().execute(LIST_TASKS_SQL).fetchall()
        return [TaskRecord(r[0], r[1], json.loads(r[2]), r[3]) for r in rows]

    def put_subagent(self, record: SubagentRecord) -> SubagentRecord:
        check_id(record.task_id, "task id")
        check_id(record.agent_id, "agent id")
        now = time.time()
        row = (record.task_id, record.agent_id, record.status, json_text(record.data), now)
        with self._write() as conn:
            conn.execute(UPSERT_AGENT_SQL, row)
        return SubagentRecord(*row[:3], json.loads(row[3]), now)

    def transition_subagent(
        self,
        task_id: str,
        agent_id: str,
        *,
        from_status: Any,
        to_status: str,
        data: dict[str, Any] | None = None,
    ) -> bool:
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
        rows = self.connect().execute(LIST_AGENTS_SQL, (task_id,)).fetchall()
        return [SubagentRecord(r[0], r[1], r[2], json.loads(r[3]), r[4]) for r in rows]

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
        row = self.connect().execute(SELECT_LOCK_SQL, (task_id,)).fetchone()
        if row is None or row[1] <= time.time():
            return None
        return LockInfo(task_id, row[0], row[1])


__all__ = ["MIGRATIONS", "RecordTables"]
