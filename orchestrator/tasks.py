"""The task registry and the run lock: which tasks a memory directory holds, who runs one.

Every task is recorded in `<memory root>/.tether/tasks.jsonl`: one whole JSON line when it
starts (objective, workdir, workflow, model, phases, thread, options), then one line per
change (`status`, a new LangGraph `thread_id` after a fallback resume, a model switch). A
task's record is its lines merged in order, so the file is append-only and a torn last
line loses one change, never the task. `resume`, `status` and `handoff` find "the most
recent task" here and rebuild the same run from the record.

One process at a time may run a task: `task_lock` holds an OS file lock on
`.tether/running/{task_id}` for the whole run (released by the OS when the process dies,
even by SIGKILL), and `task_running` asks whether a live process holds it.

Importing this module is cheap (no pydantic or LangGraph): `orchestrator status` uses it.
"""

from __future__ import annotations

import contextlib
import os
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from filelock import Timeout

from memory.durable import append_jsonl, file_lock, read_jsonl
from memory.names import slugify
from memory.paths import Layout, check_name
from orchestrator.brief import check_objective
from orchestrator.errors import OrchestratorUserError, UnknownTaskError, WorkflowError
from orchestrator.paths import new_suffix, run_lock_path, tasks_file

TaskRecord = dict[str, Any]
"""A task's merged record: `task_id`, `objective`, `workdir`, `thread_id`, ... (see above)."""


def new_task_id(objective: str) -> str:
    """An id from the objective's first words plus a random suffix, e.g. `survey-the-3f9a1c`."""
    return f"{slugify(objective, 40, fallback='task', words=4)}-{new_suffix()}"


def resume_command(task_id: str, memory_dir: str | os.PathLike[str] | None = None) -> str:
    """The shell command that resumes `task_id` from any directory."""
    command = f"orchestrator resume --task {shlex.quote(task_id)}"
    if memory_dir is not None:
        command += f" --memory-dir {shlex.quote(str(memory_dir))}"
    return command


def check_new_task(
    objective: str,
    task_id: str | None,
    start_phase: str | None,
    phases: list[str],
    workdir: str | os.PathLike[str] | None,
) -> tuple[str, str]:
    """Validate a new task's inputs, writing nothing: `(task_id, workdir)`.

    Raises:
        OrchestratorUserError: an empty or too long objective, an invalid task id, or a
            missing workdir.
        WorkflowError: `start_phase` is not one of `phases`.
    """
    # the workdir tools' module (9 ms): `orchestrator status` imports this one, not that
    from orchestrator.workdir import check_workdir

    check_objective(objective)
    if start_phase is not None and start_phase not in phases:
        raise WorkflowError(
            f"unknown phase {start_phase!r}; the workflow's phases are {', '.join(phases)}"
        )
    try:
        task_id = check_name(task_id, "task id") if task_id else new_task_id(objective)
    except ValueError as exc:
        raise OrchestratorUserError(str(exc)) from None
    return task_id, str(check_workdir(workdir or "."))


class TaskRegistry:
    """The tasks of one memory directory (`.tether/tasks.jsonl`)."""

    def __init__(self, layout: Layout):
        self.layout = layout
        self.path = tasks_file(layout)

    def records(self) -> dict[str, TaskRecord]:
        """Every task's merged record; `_order` is the line of its latest change."""
        tasks: dict[str, TaskRecord] = {}
        for line, rec in read_jsonl(self.path).records:
            if rec.get("task_id"):
                tasks[rec["task_id"]] = {**tasks.get(rec["task_id"], {}), **rec, "_order": line}
        return tasks

    def __contains__(self, task_id: str) -> bool:
        return task_id in self.records()

    def record(self, task_id: str | None = None) -> TaskRecord:
        """The record of `task_id`, or of the most recently changed task.

        Raises:
            UnknownTaskError: no such task (or no task at all) in the memory directory.
        """
        tasks = self.records()
        if task_id is None:
            if not tasks:
                raise UnknownTaskError(
                    f"no task in memory directory {str(self.layout.root)!r}; "
                    "start one with `orchestrator run OBJECTIVE`"
                )
            return max(tasks.values(), key=lambda r: r["_order"])
        if task_id not in tasks:
            known = sorted(tasks)[:5]
            raise UnknownTaskError(
                f"unknown task {task_id!r} in {str(self.layout.root)!r}; known: "
                f"{', '.join(known) if known else 'none'} (see `orchestrator status`)"
            )
        return tasks[task_id]

    def adopt(self, task_id: str | None, snapshot: dict[str, Any], *, workdir: str) -> TaskRecord:
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

    def note(self, task_id: str, **fields: Any) -> None:
        """Record a new task, or a change of an existing one (one durable line)."""
        append_jsonl(self.path, {"task_id": task_id, **fields})


@contextlib.contextmanager
def task_lock(layout: Layout, task_id: str, machines: Any = None) -> Iterator[None]:
    """Hold the task's run lock: one process at a time may run or resume a task.

    Args:
        machines: a checkpointer with its own `task_lock(task_id)` context manager (shared
            PostgreSQL state), held inside the local lock so other machines wait too.

    Raises:
        OrchestratorUserError: another process is running this task right now.
    """
    lock = file_lock(run_lock_path(layout, task_id), timeout=0)
    try:
        lock.acquire()
    except Timeout:
        raise OrchestratorUserError(
            f"task {task_id!r} is already running in another process; wait for it to "
            f"finish, or stop it and run `orchestrator resume --task {task_id}`"
        ) from None
    try:
        shared = getattr(machines, "task_lock", None)
        with shared(task_id) if shared else contextlib.nullcontext():
            yield
    finally:
        lock.release()


def task_running(layout: Layout, task_id: str) -> bool:
    """True while a live process holds the task's run lock.

    A memory directory this process cannot write has no lock to take; nothing can be
    running a task there, so the answer is False.
    """
    lock_file: Path = run_lock_path(layout, task_id)
    try:
        lock = file_lock(lock_file, timeout=0)
        lock.acquire()
    except Timeout:
        return True
    except OSError:
        return False
    lock.release()
    return False
