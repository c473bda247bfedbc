"""Task records, the subagent registry and task leases of the files backend: the
contract's JSON documents (`memory.doc_records`); the `memory.db` tables older versions
kept them in are read once to copy what they hold.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from typing import Any

from memory.doc_records import DocumentRecords, agent_path, task_path

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

LIST_TASKS_SQL = "SELECT task_id, status, data, updated_at FROM backend_tasks"


class RecordTables(DocumentRecords):
    """Tasks, the subagent registry and leases as JSON documents of the memory directory
    (`memory.doc_records`, the contract's default), plus the copy of older rows.

    `memory.db` is derived (a damaged one is moved aside and rebuilt from the files), so
    records that exist nowhere else live in files. Rows an older tether kept in `memory.db`
    are copied to files the first time records are used.
    """

    connect: Callable[[], sqlite3.Connection]
    create_document: Callable[..., bool]
    layout: Any
    read_only: bool
    _adopted: bool = False

    def _adopt_rows(self) -> None:
        """Copy records an older tether kept in `memory.db` to their files (once)."""
        if self._adopted:
            return
        if self.read_only or not self.layout.db.exists():
            return  # nothing to copy (and a reader creates no memory.db), or no way to
        self._adopted = True
        conn = self.connect()
        for task_id, status, data, at in conn.execute(LIST_TASKS_SQL).fetchall():
            record = {
                "task_id": task_id,
                "status": status,
                "data": json.loads(data),
                "updated_at": at,
            }
            self.create_document(task_path(task_id), self._record_bytes(record))
        for task_id, agent_id, status, data, at in conn.execute(ALL_AGENTS_SQL).fetchall():
            record = {"task_id": task_id, "agent_id": agent_id, "status": status,
                      "data": json.loads(data), "updated_at": at}  # fmt: skip
            self.create_document(agent_path(task_id, agent_id), self._record_bytes(record))


ALL_AGENTS_SQL = "SELECT task_id, agent_id, status, data, updated_at FROM backend_subagents"


__all__ = ["MIGRATIONS", "RecordTables"]
