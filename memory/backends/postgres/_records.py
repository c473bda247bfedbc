"""Task records, the subagent registry and task leases on PostgreSQL.

A mixin of `PostgresBackend` (it brings `_tx` and `_retry`). A subagent's transitions and a
lease's takers serialise on an advisory lock keyed by its name (`_tx(lock=...)`), so
compare-and-set is exact even for a row that does not exist yet.
"""

from __future__ import annotations

import json
import time
from typing import Any

from memory.backends.postgres._documents import retried
from memory.backends.postgres._sql import (
    DELETE_LOCK_SQL,
    GET_AGENT_SQL,
    LIST_AGENTS_SQL,
    LIST_TASKS_SQL,
    MERGE_TASK_SQL,
    SELECT_AGENT_SQL,
    SELECT_LOCK_SQL,
    SELECT_TASK_SQL,
    UPSERT_AGENT_SQL,
    UPSERT_LOCK_SQL,
    UPSERT_TASK_SQL,
)
from memory.backends.postgres.connections import NOT_LANDED
from memory.contract.base import LockInfo, SubagentRecord, TaskRecord, check_id, json_text


class RecordsMixin:
    """Tasks, subagents and leases for `PostgresBackend`."""

    _tx: Any
    _retry: Any

    @retried
    def put_task(self, task: TaskRecord) -> TaskRecord:
        check_id(task.task_id, "task id")
        now, data = time.time(), json_text(task.data)
        with self._tx() as conn:
            conn.execute(UPSERT_TASK_SQL, (task.task_id, task.status, data, now))
        return TaskRecord(task.task_id, task.status, json.loads(data), now)

    @retried
    def get_task(self, task_id: str) -> TaskRecord | None:
        with self._tx() as conn:
            row = conn.execute(SELECT_TASK_SQL, (task_id,)).fetchone()
        return None if row is None else TaskRecord(*row)

    @retried
    def merge_task(
        self, task_id: str, data: dict[str, Any], *, status: str | None = None
    ) -> TaskRecord:
        check_id(task_id, "task id")
        params = {"task_id": task_id, "status": status, "data": json_text(data), "at": time.time()}
        with self._tx() as conn:
            row = conn.execute(MERGE_TASK_SQL, params).fetchone()
        return TaskRecord(task_id, *row)

    @retried
    def list_tasks(self) -> list[TaskRecord]:
        with self._tx() as conn:
            return [TaskRecord(*r) for r in conn.execute(LIST_TASKS_SQL)]

    @retried
    def put_subagent(self, record: SubagentRecord) -> SubagentRecord:
        check_id(record.task_id, "task id")
        check_id(record.agent_id, "agent id")
        now, data = time.time(), json_text(record.data)
        row = (record.task_id, record.agent_id, record.status, data, now)
        with self._tx(lock=f"agent:{record.task_id}:{record.agent_id}") as conn:
            conn.execute(UPSERT_AGENT_SQL, row)
        return SubagentRecord(*row[:3], json.loads(data), now)

    @retried
    def get_subagent(self, task_id: str, agent_id: str) -> SubagentRecord | None:
        with self._tx() as conn:
            row = conn.execute(GET_AGENT_SQL, (task_id, agent_id)).fetchone()
        return None if row is None else SubagentRecord(task_id, agent_id, *row)

    def transition_subagent(self, task_id, agent_id, *, from_status, to_status, data=None):
        check_id(task_id, "task id")
        check_id(agent_id, "agent id")
        wanted = json.loads(json_text(data or {}))

        def landed() -> Any:
            # the status alone does not tell: a merge may keep it as it was
            with self._tx() as conn:
                row = conn.execute(SELECT_AGENT_SQL, (task_id, agent_id)).fetchone()
            merged = row is not None and all(row[1].get(k) == v for k, v in wanted.items())
            return True if merged and row[0] == to_status else NOT_LANDED

        return self._retry(
            lambda: self._transition(task_id, agent_id, from_status, to_status, data), landed
        )

    def _transition(self, task_id, agent_id, from_status, to_status, data) -> bool:
        with self._tx(lock=f"agent:{task_id}:{agent_id}") as conn:
            row = conn.execute(SELECT_AGENT_SQL, (task_id, agent_id)).fetchone()
            if (row[0] if row else None) not in tuple(from_status):
                return False
            merged = dict(row[1]) if row else {}
            merged.update(data or {})
            conn.execute(
                UPSERT_AGENT_SQL, (task_id, agent_id, to_status, json_text(merged), time.time())
            )
        return True

    @retried
    def list_subagents(self, task_id: str) -> list[SubagentRecord]:
        with self._tx() as conn:
            return [SubagentRecord(*r) for r in conn.execute(LIST_AGENTS_SQL, (task_id,))]

    # -- lock ----------------------------------------------------------------------
    @retried
    def acquire_lock(self, task_id: str, owner: str, *, ttl: float = 60.0) -> bool:
        check_id(task_id, "task id")
        check_id(owner, "lock owner")
        with self._tx(lock="lock:" + task_id) as conn:
            now = time.time()
            row = conn.execute(SELECT_LOCK_SQL, (task_id,)).fetchone()
            if row and row[0] != owner and row[1] > now:
                return False
            conn.execute(UPSERT_LOCK_SQL, (task_id, owner, now + ttl))
        return True

    @retried
    def release_lock(self, task_id: str, owner: str) -> bool:
        with self._tx() as conn:
            return conn.execute(DELETE_LOCK_SQL, (task_id, owner)).rowcount > 0

    @retried
    def get_lock(self, task_id: str) -> LockInfo | None:
        with self._tx() as conn:
            row = conn.execute(SELECT_LOCK_SQL, (task_id,)).fetchone()
        if row is None or row[1] <= time.time():
            return None
        return LockInfo(task_id, row[0], row[1])
