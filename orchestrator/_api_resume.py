"""`Orchestrator.resume`, and `open_task`: continuing a recorded task.

A mixin of `orchestrator.api.Orchestrator` (it uses the helpers of
`orchestrator._api_setup.SetupMixin` and `Orchestrator._drive`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from memory.store import MemoryStore
from orchestrator.agents.chat_models import ResolvedModel
from orchestrator.approvals import pending
from orchestrator.artifacts.checkpoint import load_checkpoint
from orchestrator.artifacts.names import new_suffix
from orchestrator.artifacts.snapshot import read_snapshot
from orchestrator.artifacts.tasks import TaskInfo, task_lock
from orchestrator.config.settings import check_workdir
from orchestrator.config.workflow import Workflow
from orchestrator.errors import OrchestratorUserError, UnknownTaskError
from orchestrator.graph.build import thread_state
from orchestrator.graph.context import RunContext
from orchestrator.graph.nodes.subagent import repair_findings, repaired_message
from orchestrator.recovery.rebuild import normalise
from orchestrator.recovery.resume import choose_recovery
from orchestrator.result import RunResult
from orchestrator.tools.toolbox import Toolbox


class ResumeMixin:
    """The verbs of `Orchestrator` that continue a recorded task."""

    # -- resuming --------------------------------------------------------------------
    def resume(
        self,
        task_id: str | None = None,
        from_checkpoint: str | None = None,
        from_snapshot: str | None = None,
    ) -> RunResult:
        """Continue a task: LangGraph state, else the latest valid checkpoint, else a snapshot.

        Raises:
            UnknownTaskError: no such task.
            RecoveryError: nothing valid to resume from.
            Interrupted: Ctrl-C or SIGTERM again (resume again).
        """
        self._check_writable("resume a task")
        if from_checkpoint and from_snapshot:
            raise OrchestratorUserError("give --from-checkpoint or --from-snapshot, not both")
        snap = None
        if from_snapshot:
            snap = read_snapshot(Path(from_snapshot), self.docs)
            task_id = task_id or snap.get("task_id")
        if from_checkpoint:
            cp_task = load_checkpoint(Path(from_checkpoint), self.docs).task_id
            if task_id and task_id != cp_task:
                raise OrchestratorUserError(
                    f"checkpoint {from_checkpoint!r} belongs to task {cp_task!r}, "
                    f"not {task_id!r}; drop --task or pass that task's checkpoint"
                )
            task_id = cp_task
        try:
            record = self.task_record(task_id)
        except UnknownTaskError:
            if snap is None:
                raise
            record = self.tasks.adopt(task_id, snap, workdir=str(Path(self.workdir or ".")))
        with self._continuing(record) as (store, workflow, resolved, toolbox):
            return self._resume(store, record, snap, from_checkpoint, workflow, resolved, toolbox)

    @contextlib.contextmanager
    def open_task(self, task_id: str | None = None) -> Iterator[RunContext]:
        """The run context of a recorded task (`new_task`, or the most recent one), with its
        tools, run lock and store held for the block: for running tether's graph yourself
        (`orchestrator.graph.build.compile_graph`); the LangGraph Server entry runs it as a
        subgraph. Findings files a crash left behind are recorded first (a `warning` event
        each), then a `model` event says which model runs.

        Raises:
            UnknownTaskError: no such task.
            OrchestratorUserError: the task's workdir, model or tools are unusable.
        """
        record = self.task_record(task_id)
        task_id = record["task_id"]
        with self._continuing(record) as (store, workflow, resolved, toolbox):
            for rel in repair_findings(self.docs, task_id, self.project_dir):
                self._emit("warning", message=repaired_message(rel))
            thread = record.get("thread_id") or task_id
            ctx = self._context(store, workflow, resolved, thread, record, toolbox)
            self._emit("model", name=resolved.name, offline=resolved.offline)
            yield ctx

    @contextlib.contextmanager
    def _continuing(self, record: TaskInfo) -> Iterator[tuple[Any, Workflow, Any, Toolbox]]:
        """What continuing a recorded task needs, checked before anything is written: its
        workflow, workdir, model and tools; then its run lock and the store, for the block."""
        workflow = self._task_workflow(record)
        if record.get("workdir"):
            check_workdir(record["workdir"])  # moved or deleted since the run started?
        resolved = self._resolve_model(workflow, record)
        self._agent_models(workflow)
        with (
            self._toolbox(workflow, record) as toolbox,
            task_lock(self.docs, record["task_id"]),
            self._store() as store,
        ):
            yield store, workflow, resolved, toolbox

    def _resume(
        self,
        store: MemoryStore,
        record: TaskInfo,
        snap: dict[str, Any] | None,
        from_checkpoint: str | None,
        workflow: Workflow,
        resolved: ResolvedModel,
        toolbox: Toolbox,
    ) -> RunResult:
        task_id = record["task_id"]
        thread = record.get("thread_id") or task_id
        repaired = repair_findings(self.docs, task_id, self.project_dir)
        saved = thread_state(self.docs, thread, self.checkpointer)
        waiting = pending(self.docs, task_id, saved.interrupts) if saved is not None else []
        if waiting and not (snap or from_checkpoint):
            # waiting for approval: continuing means answering (`approve`), not rerunning
            ctx = self._context(store, workflow, resolved, thread, record, toolbox)
            return self._still_waiting(ctx, saved, task_id)  # type: ignore[arg-type]
        plan = choose_recovery(
            self.docs,
            record,
            phases=list(workflow.phases),
            saved=saved,
            snapshot=snap,
            from_checkpoint=from_checkpoint,
        )
        if plan.state is not None:  # a rebuilt state runs on a thread of its own
            thread = f"{task_id}~{new_suffix()}"
            self.tasks.note(task_id, thread_id=thread)
        ctx = self._context(store, workflow, resolved, thread, record, toolbox)
        self._emit("model", name=resolved.name, offline=resolved.offline)
        for warning in plan.warnings:
            self._emit("warning", message=warning)
        for rel in repaired:
            self._emit("warning", message=repaired_message(rel))
        self._emit(
            "resume",
            task_id=task_id,
            source=plan.source,
            path=plan.path,
            memory_dir=self.docs.location,
            model=resolved.name,
            offline=resolved.offline,
        )
        state = normalise(plan.state) if plan.state is not None else None
        self._emit_finished(state if state is not None else saved.values if saved else {})
        return self._drive(ctx, state, task_id, source=plan.source, warnings=plan.warnings)
