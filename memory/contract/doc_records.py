"""Task records, the subagent registry and task leases kept as JSON documents: the
contract's default implementation of them, built on the document primitives alone.

A backend that implements documents (with compare-and-set versions) gets these for free:
`.tether/records/tasks/{task}.json`, `.tether/records/subagents/{task}/{agent}.json` and
`.tether/records/locks/{task}.json`, each one readable JSON object (ids quoted into one file
name). A status change, a merge into a record and a lease are a compare-and-set on the
document's version, so exactly one of several processes wins. The folder is hidden, so
recall and the search index ignore it. A backend with tables of its own (PostgreSQL)
overrides every method here.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import quote

from memory.contract.records import (
    Document,
    DocumentInfo,
    LockInfo,
    SubagentRecord,
    TaskRecord,
    check_id,
    json_text,
)
from memory.errors import ConflictError, StorageError

RECORDS = ".tether/records"
TASKS = f"{RECORDS}/tasks"
SUBAGENTS = f"{RECORDS}/subagents"
LOCKS = f"{RECORDS}/locks"
CAS_ATTEMPTS = 200
NO_WRITE: Any = object()
"""What a change function returns to leave the record as it is."""
MAX_NAME = 236
"""Characters of a quoted id kept whole in a file name: with `.json` and the atomic write's
temporary name (`.{name}.json.tmp-12345678`), the 255 bytes file systems allow."""


class DocumentRecords:
    """The contract's records as JSON documents (see the module docstring)."""

    get_document: Callable[..., Document | None]
    put_document: Callable[..., DocumentInfo]
    delete_document: Callable[..., bool]
    list_documents: Callable[..., list[DocumentInfo]]

    # -- documents of records --------------------------------------------------------
    def _record_read(self, path: str) -> tuple[dict[str, Any] | None, int]:
        doc = self.get_document(path)
        if doc is None:
            return None, 0
        record = _parse(path, doc.data)
        if record is None:
            raise StorageError(
                f"record {path!r} is not a JSON record (edited by hand?); fix or move it"
            )
        return record, doc.version

    @staticmethod
    def _record_bytes(record: dict[str, Any]) -> bytes:
        return (json.dumps(record, ensure_ascii=False, sort_keys=True, indent=1) + "\n").encode()

    def _record_swap(self, path: str, change: Callable[[dict[str, Any] | None], Any]) -> Any:
        """Compare-and-set: `change(record)` returns `(new record or None to delete, result)`
        or `(NO_WRITE, result)`; run again when another writer got there first."""
        for _ in range(CAS_ATTEMPTS):
            record, version = self._record_read(path)
            new, result = change(record)
            try:
                if new is NO_WRITE:
                    return result
                if new is None:
                    self.delete_document(path, expected_version=version)
                else:
                    self.put_document(path, self._record_bytes(new), expected_version=version)
                return result
            except ConflictError:
                continue
        raise ConflictError(f"{path!r} kept changing under {CAS_ATTEMPTS} attempts; retry")

    def _record_list(self, prefix: str) -> list[dict[str, Any]]:
        out = []
        for info in self.list_documents(prefix):
            if info.path.endswith(".json") and "/" not in info.path[len(prefix) :]:
                doc = self.get_document(info.path)
                record = None if doc is None else _parse(info.path, doc.data)
                if record is not None:  # a file that is no record (a hand edit) is left out
                    out.append(record)
        return out

    # -- tasks -----------------------------------------------------------------------
    def put_task(self, task: TaskRecord) -> TaskRecord:
        """Create or replace a task record (stamped with the time of the write)."""
        check_id(task.task_id, "task id")
        now, data = time.time(), json.loads(json_text(task.data))
        record = {"task_id": task.task_id, "status": task.status, "data": data, "updated_at": now}
        self.put_document(task_path(task.task_id), self._record_bytes(record))
        return TaskRecord(task.task_id, task.status, data, now)

    def merge_task(
        self, task_id: str, data: dict[str, Any], *, status: str | None = None
    ) -> TaskRecord:
        """Merge `data` into the task's record (creating it), and set `status` if given:
        atomic against other writers of the same task."""
        check_id(task_id, "task id")
        changes = json.loads(json_text(data))

        def change(record: dict[str, Any] | None) -> tuple[Any, TaskRecord]:
            merged = {**(record["data"] if record else {}), **changes}
            new_status = status if status is not None else (record or {}).get("status", "")
            now = time.time()
            new = {"task_id": task_id, "status": new_status, "data": merged, "updated_at": now}
            return new, TaskRecord(task_id, new_status, merged, now)

        return self._record_swap(task_path(task_id), change)

    def get_task(self, task_id: str) -> TaskRecord | None:
        """The task's record, or `None`."""
        record, _ = self._record_read(task_path(check_id(task_id, "task id")))
        return None if record is None else _task(record)

    def list_tasks(self) -> list[TaskRecord]:
        """Every task, most recently updated first."""
        tasks = [_task(r) for r in self._record_list(TASKS + "/")]
        return sorted(tasks, key=lambda t: (-t.updated_at, t.task_id))

    # -- the subagent registry -------------------------------------------------------
    def put_subagent(self, record: SubagentRecord) -> SubagentRecord:
        """Create or replace one subagent's registry record."""
        check_id(record.task_id, "task id")
        check_id(record.agent_id, "agent id")
        now, data = time.time(), json.loads(json_text(record.data))
        self.put_document(
            agent_path(record.task_id, record.agent_id),
            self._record_bytes({"task_id": record.task_id, "agent_id": record.agent_id,
                         "status": record.status, "data": data, "updated_at": now}),
        )  # fmt: skip
        return SubagentRecord(record.task_id, record.agent_id, record.status, data, now)

    def get_subagent(self, task_id: str, agent_id: str) -> SubagentRecord | None:
        """One subagent's record (one document read), or `None`."""
        check_id(task_id, "task id")
        record, _ = self._record_read(agent_path(task_id, check_id(agent_id, "agent id")))
        return None if record is None else _agent(record)

    def transition_subagent(
        self,
        task_id: str,
        agent_id: str,
        *,
        from_status: Sequence[str | None],
        to_status: str,
        data: dict[str, Any] | None = None,
    ) -> bool:
        """Atomically move a subagent from one of `from_status` to `to_status`, merging
        `data` into its record; `False` (nothing changed) when its status is another."""
        check_id(task_id, "task id")
        check_id(agent_id, "agent id")
        allowed = tuple(from_status)
        changes = json.loads(json_text(data or {}))

        def change(record: dict[str, Any] | None) -> tuple[Any, bool]:
            if (record["status"] if record else None) not in allowed:
                return NO_WRITE, False
            merged = {**(record["data"] if record else {}), **changes}
            return {"task_id": task_id, "agent_id": agent_id, "status": to_status,
                    "data": merged, "updated_at": time.time()}, True  # fmt: skip

        return self._record_swap(agent_path(task_id, agent_id), change)

    def list_subagents(self, task_id: str) -> list[SubagentRecord]:
        """The task's subagents, sorted by agent id."""
        prefix = f"{SUBAGENTS}/{record_name(check_id(task_id, 'task id'))}/"
        agents = [_agent(r) for r in self._record_list(prefix)]
        return sorted(agents, key=lambda a: a.agent_id)

    # -- leases ----------------------------------------------------------------------
    def acquire_lock(self, task_id: str, owner: str, *, ttl: float = 60.0) -> bool:
        """Take (or renew, for the same owner) the task's lease; `False` if held by another."""
        check_id(task_id, "task id")
        check_id(owner, "lock owner")

        def change(record: dict[str, Any] | None) -> tuple[Any, bool]:
            now = time.time()
            if record and record["owner"] != owner and record["expires_at"] > now:
                return NO_WRITE, False
            return {"task_id": task_id, "owner": owner, "expires_at": now + ttl}, True

        return self._record_swap(lock_path(task_id), change)

    def release_lock(self, task_id: str, owner: str) -> bool:
        """Drop the lease if `owner` holds it."""

        def change(record: dict[str, Any] | None) -> tuple[Any, bool]:
            if record is None or record["owner"] != owner:
                return NO_WRITE, False
            return None, True

        return self._record_swap(lock_path(check_id(task_id, "task id")), change)

    def get_lock(self, task_id: str) -> LockInfo | None:
        """The live lease on the task, or `None` (an expired lease counts as none)."""
        record, _ = self._record_read(lock_path(check_id(task_id, "task id")))
        if record is None or record["expires_at"] <= time.time():
            return None
        return LockInfo(task_id, record["owner"], record["expires_at"])


def record_documents(backend: Any) -> dict[str, bytes]:
    """Every task and subagent record of `backend` as the documents this module keeps
    them in (what `memory export` writes, whichever backend holds them)."""
    out: dict[str, bytes] = {}
    for task in backend.list_tasks():
        out[task_path(task.task_id)] = DocumentRecords._record_bytes(task.__dict__)
        for agent in backend.list_subagents(task.task_id):
            path = agent_path(agent.task_id, agent.agent_id)
            out[path] = DocumentRecords._record_bytes(agent.__dict__)
    return out


def is_record_document(path: str) -> bool:
    """Whether `path` names a task or subagent record (not a lease: those expire)."""
    return path.startswith((TASKS + "/", SUBAGENTS + "/")) and path.endswith(".json")


def load_records(backend: Any, documents: dict[str, bytes]) -> int:
    """Store the task and subagent records among `documents` (`record_documents`'s form)
    in `backend`, the least recently updated first, so the newest task stays the newest.
    Returns how many were stored; a document that is not a record is left out."""
    records = []
    for path, data in documents.items():
        try:
            record = json.loads(data)
            records.append((float(record["updated_at"]), path, record))
        except (ValueError, KeyError, TypeError):
            continue
    stored = 0
    for _, path, record in sorted(records, key=lambda r: r[0]):
        if path.startswith(TASKS + "/"):
            backend.put_task(TaskRecord(record["task_id"], record["status"], record["data"]))
        else:
            agent = SubagentRecord(
                record["task_id"], record["agent_id"], record["status"], record["data"]
            )
            backend.put_subagent(agent)
        stored += 1
    return stored


def record_name(value: str) -> str:
    """An id as one file name: `/`, `%` and control characters quoted, never `.` or `..`; a
    long one (quoted non-ASCII grows 9-fold) is cut and made unique by a hash of the id."""
    name = quote(value, safe=" -_.,+=@~")
    if len(name) > MAX_NAME:
        digest = hashlib.sha256(value.encode("utf-8")).hexdigest()[:16]
        name = f"{name[: MAX_NAME - 17]}~{digest}"
    return name + "~" if name in {".", ".."} else name


def task_path(task_id: str) -> str:
    return f"{TASKS}/{record_name(task_id)}.json"


def agent_path(task_id: str, agent_id: str) -> str:
    return f"{SUBAGENTS}/{record_name(task_id)}/{record_name(agent_id)}.json"


def lock_path(task_id: str) -> str:
    return f"{LOCKS}/{record_name(task_id)}.json"


def _parse(path: str, data: bytes) -> dict[str, Any] | None:
    """The record document `path`'s object, or None when it is not one of its kind."""
    try:
        record = json.loads(data)
    except (UnicodeDecodeError, ValueError):
        return None
    if path.startswith(LOCKS + "/"):
        fields: tuple[str, ...] = ("task_id", "owner", "expires_at")
    else:
        fields = ("task_id", "status", "data", "updated_at")
        fields += ("agent_id",) if path.startswith(SUBAGENTS + "/") else ()
    if not isinstance(record, dict) or not all(k in record for k in fields):
        return None
    return record if isinstance(record.get("data", {}), dict) else None


def _task(record: dict[str, Any]) -> TaskRecord:
    return TaskRecord(record["task_id"], record["status"], record["data"], record["updated_at"])


def _agent(record: dict[str, Any]) -> SubagentRecord:
    return SubagentRecord(
        record["task_id"], record["agent_id"], record["status"], record["data"],
        record["updated_at"],
    )  # fmt: skip
