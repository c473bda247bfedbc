"""The task list and the run lock: which tasks a memory holds, who runs one.

Every task is a task record of the storage contract (`memory.contract.base`; on the files backend
the JSON file `.tether/records/tasks/{task}.json`, on PostgreSQL a row): its status, and its
data, written when it starts (objective, workdir, workflow, model, phases, thread, options)
and merged with each change (a new LangGraph `thread_id` after a fallback resume, a model
switch, pending approvals). A change is one atomic merge, so no writer loses another's.
`resume`, `status` and `handoff` find "the most recent task" here and rebuild the same run
from the record; `task_rows` lists every task as `orchestrator tasks` shows them.

One process at a time may run a task: `task_lock` holds the task's run lock for the whole
run (`Docs.run_lock`: an OS file lock on the files backend, a session advisory lock on
PostgreSQL, so on every machine sharing it; released when the process dies, even by
SIGKILL), and `task_running` asks whether a live process holds it.

Importing this module is cheap (no pydantic or LangGraph): `orchestrator status` uses it.
"""

from __future__ import annotations

import contextlib
import re
import shlex
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Required, TypedDict

from memory.contract.base import LockHeldError
from memory.text.names import slugify
from orchestrator.artifacts.documents import Docs
from orchestrator.artifacts.names import new_suffix
from orchestrator.errors import OrchestratorUserError, UnknownTaskError

if TYPE_CHECKING:
    import os

    from orchestrator.artifacts.documents import MemoryTarget
    from orchestrator.types import JsonObject


class TaskInfo(TypedDict, total=False):
    """A task's record as the orchestrator reads it: the contract's
    `memory.contract.base.TaskRecord` (`task_id`, `status`, and `data` holding the rest)
    flattened into one dict. A typed dict, not a pydantic model: `orchestrator status`
    imports this module and stays cheap."""

    task_id: Required[str]
    status: str  # running, waiting (for an approval), done, failed, ...; absent at first
    objective: str
    workdir: str
    phases: list[str]
    start_phase: str
    workflow: str | None  # the workflow file the task runs, when not the default
    model: str | None  # `provider:name`; None when a chat model object was passed
    model_source: str  # where the model came from (flag, environment, workflow, default)
    model_before: str | None  # the model before an explicit switch on resume
    token_threshold: int | None
    max_parallel: int | None
    max_subtasks: int | None
    max_waves: int | None
    thread_id: str  # LangGraph's thread (a new one after a fallback resume)
    project_dir: str | None
    created: str  # ISO time of the start
    in_process_tools: list[str]  # tools passed in Python: a resume needs them again
    workflow_digests: dict[str, str]  # SHA-256 of the workflow and prompt files at the start
    agents: dict[str, Any] | None  # agents defined in Python (`AgentSpec`), as data
    served: bool  # started by LangGraph Server
    error: str | None  # the failure that ended the last run
    pending_approvals: list[Any]  # what the task waits for
    trace_id: str  # the OpenTelemetry trace of the task's runs (`graph.tracing`), hex
    trace_span: str  # the task span of its first traced run: later runs' parent, hex
    _order: float  # grows with the record's latest change (the newest task is the max)


def thread_of(record: TaskInfo) -> str:
    """LangGraph's thread of a recorded task: its `thread_id` (a new one after a fallback
    resume), else the task's id (the first thread of every task)."""
    return record.get("thread_id") or record["task_id"]


#: A new task's id: it names folders and files and is pasted into shell commands, so only
#: ASCII letters, digits, '-', '_' and '.', and never a leading '-' (an option) or '.'.
TASK_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
TASK_ID_RULE = "use 1 to 128 letters, digits, '-', '_' or '.', starting with a letter or digit"


def check_task_id(task_id: str) -> str:
    """`task_id` if it is a valid id for a new task (`TASK_ID_RE`).

    Raises:
        OrchestratorUserError: anything else, with the rule the id breaks.
    """
    if not isinstance(task_id, str) or not TASK_ID_RE.fullmatch(task_id):
        raise OrchestratorUserError(f"invalid task id {task_id!r}: {TASK_ID_RULE}")
    return task_id


def new_task_id(objective: str) -> str:
    """An id from the objective's first words plus a random suffix, e.g. `survey-the-3f9a1c`."""
    return f"{slugify(objective, 40, fallback='task', words=4)}-{new_suffix()}"


def resume_command(task_id: str, memory: Docs | str | os.PathLike[str] | None = None) -> str:
    """The shell command that resumes `task_id` from any directory.

    Args:
        memory: the memory directory, or the task's `Docs` (a memory that is not a
            directory is named by its URL, without the password).
    """
    command = f"orchestrator resume --task {shlex.quote(task_id)}"
    if isinstance(memory, Docs):
        memory = memory.root if memory.root is not None else memory.location
    if isinstance(memory, str) and "://" in memory:  # a shared memory, by its URL
        return command + f" --memory-url {shlex.quote(memory)}"
    if memory is not None:
        command += f" --memory-dir {shlex.quote(str(memory))}"
    return command


def approve_command(task_id: str, memory: MemoryTarget = None, *, reject: bool = False) -> str:
    """The shell command that approves (or rejects) what `task_id` waits for."""
    command = resume_command(task_id, memory).replace("orchestrator resume", "orchestrator approve")
    if reject:
        command += ' --reject --message "why"'
    return command


class TaskList:
    """The tasks of one memory: the storage contract's task records (see the module
    docstring)."""

    def __init__(self, docs: Docs):
        self.docs = docs
        self.backend = self.docs.backend

    def records(self) -> dict[str, TaskInfo]:
        """Every task's record; `_order` grows with its latest change."""
        return {t.task_id: _as_record(t) for t in self.backend.list_tasks()}

    def _where(self) -> str:
        if self.docs.root is not None:
            return f"memory directory {str(self.docs.root)!r}"
        return f"memory {self.docs.location!r}"

    def __contains__(self, task_id: str) -> bool:
        return self._get(task_id) is not None

    def _get(self, task_id: str) -> TaskInfo | None:
        if not isinstance(task_id, str) or not TASK_ID_RE.fullmatch(task_id):
            return None  # `../../etc` names no task (and no file of the memory's)
        found = self.backend.get_task(task_id)
        return _as_record(found) if found is not None else None

    def record(self, task_id: str | None = None) -> TaskInfo:
        """The record of `task_id`, or of the most recently changed task.

        Raises:
            UnknownTaskError: no such task (or no task at all) in the memory directory.
        """
        if task_id is None:
            return self.newest_first()[0]
        found = self._get(task_id)
        if found is None:
            known = sorted(self.records())[:5]
            raise UnknownTaskError(
                f"unknown task {task_id!r} in {self.docs.location!r}; known: "
                f"{', '.join(known) if known else 'none'} (see `orchestrator status`)"
            )
        return found

    def newest_first(self) -> list[TaskInfo]:
        """Every task's record, the most recently changed first (ties: by id).

        Raises:
            UnknownTaskError: no task at all in the memory.
        """
        tasks = sorted(self.records().values(), key=lambda r: (-r["_order"], r["task_id"]))
        if not tasks:
            raise UnknownTaskError(
                f"no task in {self._where()}; start one with `orchestrator run OBJECTIVE`"
            )
        return tasks

    def adopt(self, task_id: str | None, snapshot: JsonObject, *, workdir: str) -> TaskInfo:
        """Record a task known here only from its snapshot (written in another memory
        directory): a resume from the snapshot starts it in this one.

        Args:
            snapshot: a `read_snapshot` result; its metadata gives objective and phases.
            workdir: where the task's agents read, when the snapshot does not say.
        """
        extra = snapshot.get("extra") or {}
        record = {
            "task_id": task_id,
            "objective": extra.get("objective"),
            "workdir": extra.get("workdir") or workdir,
            "phases": extra.get("phases"),
            "thread_id": task_id,
        }
        self.note(**record)
        return record

    def note(self, task_id: str, **fields: object) -> None:
        """Record a new task, or a change of an existing one (merged into its record, atomic
        against other writers)."""
        status = fields.pop("status", None)
        self.backend.merge_task(task_id, fields, status=status)


def task_rows(docs: Docs) -> list[JsonObject]:
    """Every task of the memory, the most recently changed first, as `orchestrator tasks`
    lists them: `task_id`, `status`, `phase`, `updated` (ISO time, UTC, of the record's
    latest change) and `objective`.

    Status and phase are those `orchestrator status` shows (`orchestrator.recovery.status`
    reads them the same way): from the task's record, its newest usable checkpoint and its
    run lock. The checkpoints are read in one pass, newest first, until every task's is
    found, so the listing costs one read per checkpoint at most, not one per task and
    checkpoint.

    Raises:
        UnknownTaskError: no task at all in the memory.
    """
    records = TaskList(docs).newest_first()
    newest = _newest_checkpoints(docs, {r["task_id"] for r in records})
    rows = []
    for record in records:
        task, data = record["task_id"], newest.get(record["task_id"])
        rows.append(
            {
                "task_id": task,
                "status": _standing(docs, record, data),
                "phase": _phase(record, data),
                "updated": datetime.fromtimestamp(record["_order"], UTC).strftime(
                    "%Y-%m-%dT%H:%M:%SZ"
                ),
                "objective": record.get("objective") or (data or {}).get("objective") or "",
            }
        )
    return rows


def damaged_records(docs: Docs) -> list[str]:
    """The task record documents that hold no task record (a hand edit, a file cut short),
    which `TaskList` cannot list: where a person finds each (its file), sorted. A backend
    keeping its records in tables of its own (PostgreSQL) has none."""
    from memory.contract.doc_records import TASKS, task_path  # the files' layout of task records

    prefix = TASKS + "/"
    good = {task_path(t.task_id) for t in docs.backend.list_tasks()}
    return [
        str(docs.path(info.path))
        for info in docs.backend.list_documents(prefix)
        if info.path.endswith(".json")
        and "/" not in info.path[len(prefix) :]
        and info.path not in good
    ]


def _newest_checkpoints(docs: Docs, tasks: set[str]) -> dict[str, JsonObject]:
    """Each task's newest usable checkpoint data (a task without one is left out)."""
    # checkpoints load pydantic: only here, so `status` and `--help` do not pay for it
    from orchestrator.artifacts.checkpoint import checkpoint_infos, task_of
    from orchestrator.artifacts.text import loads_strict

    found: dict[str, dict[str, Any]] = {}
    for info in checkpoint_infos(docs):
        if len(found) == len(tasks):
            break
        named = task_of(docs, info)
        if named is not None and (named not in tasks or named in found):
            continue
        try:
            data = loads_strict(docs.read_bytes(info.path) or b"")
        except (OSError, ValueError):
            continue  # torn or corrupt: an older one is read instead, as `status` does
        task = data.get("task_id") if isinstance(data, dict) else None
        if task in tasks and task not in found and usable_checkpoint(data):
            found[task] = data
    return found


def usable_checkpoint(data: JsonObject) -> bool:
    """Whether checkpoint data has, well-typed, every field `status` and a rebuilt state
    read (`recovery.status` uses the same test)."""
    phases = data.get("phases") or [data.get("phase")]
    index = data.get("phase_index", 0)
    subtasks = data.get("subtasks", [])
    return (
        isinstance(phases, list)
        and all(isinstance(p, str) for p in phases)
        and isinstance(index, int)
        and 0 <= index < len(phases)
        and isinstance(subtasks, list)
        and all(isinstance(s, dict) and "id" in s for s in subtasks)
        and isinstance(data.get("completed_findings", {}), dict)
        and isinstance(data.get("extra", {}), dict)
    )


def _standing(docs: Docs, record: TaskInfo, data: JsonObject | None) -> str:
    """The task's status as `status` says it: done, failed, waiting, stopped, running (a
    live process holds its run lock) or interrupted."""
    extra = (data or {}).get("extra") or {}
    recorded = record.get("status")
    status = "done" if extra.get("status") == "done" else "running"
    if status == "running" and extra.get("status") == "failed" and extra.get("trigger") != "failed":
        status = "failed"  # a phase ended with failed subagents
    if status == "running" and recorded == "failed":
        status = "failed"  # the lead's model failed
    waits = recorded == "waiting" and record.get("pending_approvals")
    if waits and status not in ("done", "failed"):
        status = "waiting"
    if status == "running" and recorded == "stopped":
        status = "stopped"
    if status == "running" and not task_running(docs, record["task_id"]):
        status = "interrupted"
    return status


def _phase(record: TaskInfo, data: JsonObject | None) -> str | None:
    """The phase the task is in (the next one once a phase is over), as `status` says it."""
    if data is not None:
        phases = data.get("phases") or [data.get("phase")]
        index = data.get("phase_index") or 0
        over = (data.get("extra") or {}).get("trigger") == "phase_transition"
        return phases[index + 1] if over and index + 1 < len(phases) else phases[index]
    phases = record.get("phases") or []
    start = record.get("start_phase")
    return start if start in phases else (phases[0] if phases else None)


def _as_record(task: Any) -> TaskInfo:
    """A contract `memory.contract.base.TaskRecord` as the orchestrator's dict (data, id, status,
    order)."""
    record = {**task.data, "task_id": task.task_id, "_order": task.updated_at}
    if task.status:
        record["status"] = task.status
    return record


@contextlib.contextmanager
def task_lock(docs: Docs, task_id: str) -> Iterator[None]:
    """Hold the task's run lock: one process at a time may run or resume a task.

    Raises:
        OrchestratorUserError: another process (on any machine sharing the memory) is
            running this task right now.
    """
    held = contextlib.ExitStack()
    try:
        held.enter_context(docs.run_lock(task_id))
    except LockHeldError:
        raise OrchestratorUserError(
            f"task {task_id!r} is already running in another process; wait for it to "
            f"finish, or stop it and run `orchestrator resume --task {task_id}`"
        ) from None
    with held:
        yield


def task_running(docs: Docs, task_id: str) -> bool:
    """True while a live process (on any machine sharing the memory) holds the run lock."""
    return docs.running(task_id)
