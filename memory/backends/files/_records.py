"""Task records, the subagent registry and task leases of the files backend, as JSON
documents (`RecordTables`); the `memory.db` tables older versions kept them in are read once
to copy what they hold.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from memory.base import (
    ConflictError,
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
    """Tasks, the subagent registry and leases as JSON documents of the memory directory.

    `memory.db` is derived (a damaged one is moved aside and rebuilt from the files), so
    records that exist nowhere else live in files: `.tether/records/tasks/{task}.json`,
    `.tether/records/subagents/{task}/{agent}.json` and `.tether/records/locks/{task}.json`
    (ids quoted into one file name). A status change or a lease is a compare-and-set on the
    document's version, so exactly one of several processes wins. Rows an older tether kept
    in `memory.db` are copied to files the first time records are used.
    """

    connect: Callable[[], sqlite3.Connection]
    get_document: Callable[..., Any]
    put_document: Callable[..., Any]
    create_document: Callable[..., bool]
    delete_document: Callable[..., bool]
    list_documents: Callable[..., Any]
    _adopted: bool = False

    # -- documents of records --------------------------------------------------------
    def _read(self, path: str) -> tuple[dict[str, Any] | None, int]:
        self._adopt_rows()
        doc = self.get_document(path)
        return (None, 0) if doc is None else (json.loads(doc.data), doc.version)

    @staticmethod
    def _bytes(record: dict[str, Any]) -> bytes:
        return (json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n").encode()

    def _swap(self, path: str, change: Callable[[dict[str, Any] | None], Any]) -> Any:
        """Compare-and-set: `change(record)` returns `(new record or None to delete, result)`
        or `(NO_WRITE, result)`; run again when another writer got there first."""
        for _ in range(CAS_ATTEMPTS):
            record, version = self._read(path)
            new, result = change(record)
            try:
                if new is NO_WRITE:
                    return result
                if new is None:
                    self.delete_document(path, expected_version=version)
                else:
                    self.put_document(path, self._bytes(new), expected_version=version)
                return result
            except ConflictError:
                continue
        raise ConflictError(f"{path!r} kept changing under {CAS_ATTEMPTS} attempts; retry")

    def _adopt_rows(self) -> None:
        """Copy records an older tether kept in `memory.db` to their files (once)."""
        if self._adopted:
            return
        self._adopted = True
        conn = self.connect()
        for task_id, status, data, at in conn.execute(LIST_TASKS_SQL).fetchall():
            record = {
                "task_id": task_id,
                "status": status,
                "data": json.loads(data),
                "updated_at": at,
            }
            self.create_document(_task_path(task_id), self._bytes(record))
        for task_id, agent_id, status, data, at in conn.execute(ALL_AGENTS_SQL).fetchall():
            record = {"task_id": task_id, "agent_id": agent_id, "status": status,
                      "data": json.loads(data), "updated_at": at}  # fmt: skip
            self.create_document(_agent_path(task_id, agent_id), self._bytes(record))

    # -- tasks -----------------------------------------------------------------------
    def put_task(self, task: TaskRecord) -> TaskRecord:
        check_id(task.task_id, "task id")
        now, data = time.time(), json.loads(json_text(task.data))
        self._adopt_rows()
        record = {"task_id": task.task_id, "status": task.status, "data": data, "updated_at": now}
        self.put_document(_task_path(task.task_id), self._bytes(record))
        return TaskRecord(task.task_id, task.status, data, now)

    def get_task(self, task_id: str) -> TaskRecord | None:
        record, _ = self._read(_task_path(check_id(task_id, "task id")))
        return None if record is None else _task(record)

    def list_tasks(self) -> list[TaskRecord]:
        self._adopt_rows()
        tasks = [_task(r) for r in self._records(TASKS + "/")]
        return sorted(tasks, key=lambda t: (-t.updated_at, t.task_id))

    def _records(self, prefix: str) -> list[dict[str, Any]]:
        out = []
        for info in self.list_documents(prefix):
            if info.path.endswith(".json") and "/" not in info.path[len(prefix) :]:
                doc = self.get_document(info.path)
                if doc is not None:
                    out.append(json.loads(doc.data))
        return out

    # -- the subagent registry -------------------------------------------------------
    def put_subagent(self, record: SubagentRecord) -> SubagentRecord:
        check_id(record.task_id, "task id")
        check_id(record.agent_id, "agent id")
        now, data = time.time(), json.loads(json_text(record.data))
        self._adopt_rows()
        self.put_document(
            _agent_path(record.task_id, record.agent_id),
            self._bytes({"task_id": record.task_id, "agent_id": record.agent_id,
                         "status": record.status, "data": data, "updated_at": now}),
        )  # fmt: skip
        return SubagentRecord(record.task_id, record.agent_id, record.status, data, now)

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
        allowed = tuple(from_status)

        def change(record: dict[str, Any] | None) -> tuple[Any, bool]:
            if (record["status"] if record else None) not in allowed:
                return NO_WRITE, False
            merged = dict(record["data"]) if record else {}
            merged.update(data or {})
            merged = json.loads(json_text(merged))
            return {"task_id": task_id, "agent_id": agent_id, "status": to_status,
                    "data": merged, "updated_at": time.time()}, True  # fmt: skip

        return self._swap(_agent_path(task_id, agent_id), change)

    def list_subagents(self, task_id: str) -> list[SubagentRecord]:
        self._adopt_rows()
        prefix = f"{SUBAGENTS}/{_name(check_id(task_id, 'task id'))}/"
        agents = [_agent(r) for r in self._records(prefix)]
        return sorted(agents, key=lambda a: a.agent_id)

    # -- leases ----------------------------------------------------------------------
    def acquire_lock(self, task_id: str, owner: str, *, ttl: float = 60.0) -> bool:
        check_id(task_id, "task id")
        check_id(owner, "lock owner")

        def change(record: dict[str, Any] | None) -> tuple[Any, bool]:
            now = time.time()
            if record and record["owner"] != owner and record["expires_at"] > now:
                return NO_WRITE, False
            return {"task_id": task_id, "owner": owner, "expires_at": now + ttl}, True

        return self._swap(_lock_path(task_id), change)

    def release_lock(self, task_id: str, owner: str) -> bool:
        def change(record: dict[str, Any] | None) -> tuple[Any, bool]:
            if record is None or record["owner"] != owner:
                return NO_WRITE, False
            return None, True

        return self._swap(_lock_path(check_id(task_id, "task id")), change)

    def get_lock(self, task_id: str) -> LockInfo | None:
        record, _ = self._read(_lock_path(check_id(task_id, "task id")))
        if record is None or record["expires_at"] <= time.time():
            return None
        return LockInfo(task_id, record["owner"], record["expires_at"])


RECORDS = ".tether/records"
TASKS = f"{RECORDS}/tasks"
SUBAGENTS = f"{RECORDS}/subagents"
LOCKS = f"{RECORDS}/locks"
CAS_ATTEMPTS = 200
NO_WRITE: Any = object()
ALL_AGENTS_SQL = "SELECT task_id, agent_id, status, data, updated_at FROM backend_subagents"


def _name(value: str) -> str:
    """An id as one file name (`/`, `%` and control characters quoted; never `.` or `..`)."""
    name = quote(value, safe=" -_.,+=@~")
    return name + "~" if name in {".", ".."} else name


def _task_path(task_id: str) -> str:
    return f"{TASKS}/{_name(task_id)}.json"


def _agent_path(task_id: str, agent_id: str) -> str:
    return f"{SUBAGENTS}/{_name(task_id)}/{_name(agent_id)}.json"


def _lock_path(task_id: str) -> str:
    return f"{LOCKS}/{_name(task_id)}.json"


def _task(record: dict[str, Any]) -> TaskRecord:
    return TaskRecord(record["task_id"], record["status"], record["data"], record["updated_at"])


def _agent(record: dict[str, Any]) -> SubagentRecord:
    return SubagentRecord(
        record["task_id"], record["agent_id"], record["status"], record["data"],
        record["updated_at"],
    )  # fmt: skip


__all__ = ["MIGRATIONS", "RecordTables"]
