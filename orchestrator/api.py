"""The Python API: `Orchestrator` runs, resumes, hands off and reports on tasks.

::

    from orchestrator import Orchestrator

    orch = Orchestrator(workdir=".", on_event=print)
    result = orch.run("Survey this repository")
    orch.resume(result.task_id)          # after a crash or Ctrl-C
    snap = orch.handoff(result.task_id)  # a snapshot a fresh agent can continue from

Design: options are validated before anything is written (workflow file, workdir, model,
phase), so a bad call leaves the memory directory untouched. `Orchestrator` is the driver:
it records the task (`orchestrator.tasks`), resolves the model (`orchestrator.models`),
builds the run context and streams the graph (`orchestrator.graph`); a resume continues
from the source `orchestrator.recovery` chooses; `status` reads tether's own files
(`orchestrator.status`). Progress is reported as event dicts to `on_event` (see
`orchestrator.view`); library code never prints.

Invariant: `run` and `resume` either finish the task or leave it resumable: every
super-step is durable (LangGraph `durability="sync"`), and the JSON checkpoints, plan and
findings files are enough to continue without LangGraph's database.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.types import Command

from memory.backends.files._repair import describe as describe_damage
from memory.backends.files._repair import is_damage
from memory.paths import ENV_VAR as MEMORY_ENV
from memory.paths import Layout
from memory.store import MemoryStore
from memory.working import WorkingMemory
from orchestrator._api_approve import ApprovalMixin
from orchestrator._api_handoff import HandoffMixin
from orchestrator.approvals import pending
from orchestrator.artifacts.snapshot import read_snapshot
from orchestrator.assembly import agent_specs, open_toolbox, run_workflow, task_workflow
from orchestrator.brief import brief_objective, brief_title, store_brief
from orchestrator.checkpoints import load_checkpoint
from orchestrator.docs import Docs
from orchestrator.errors import (
    OrchestratorRuntimeError,
    OrchestratorUserError,
    UnknownTaskError,
)
from orchestrator.faults import fault
from orchestrator.graph import run_graph, saved_state
from orchestrator.models import ResolvedModel, agent_models, effective_threshold, resolve_run_model
from orchestrator.nodes._runtime import RunContext
from orchestrator.nodes.subagent import repair_findings, repaired_message
from orchestrator.paths import new_suffix, utc
from orchestrator.rebuild import normalise
from orchestrator.recovery import choose_recovery
from orchestrator.result import RunResult
from orchestrator.skills import discover_skills, external_memory_triggers, skills_index
from orchestrator.state import OrchestratorState, current_phase, initial_state
from orchestrator.tasks import TaskRecord, TaskRegistry, check_new_task, resume_command, task_lock
from orchestrator.toolbox import DEFAULT_TOOL_TIMEOUT, Toolbox
from orchestrator.workdir import check_workdir
from orchestrator.workflow import AgentSpec, Workflow

Event = dict[str, Any]


class Orchestrator(ApprovalMixin, HandoffMixin):
    """Runs tether tasks against one memory: a memory directory, or a shared backend.

    Args:
        memory_dir: the memory directory (default `$TETHER_MEMORY_DIR` or `.temp/memory`).
        memory_url: `postgresql://...` to keep the memory and graph state in PostgreSQL
            instead (processes on several machines share its tasks); `memory_dir` is
            then unused. Close the orchestrator (`close()`, or `with`) when done.
        workdir: the project the agents read (read-only file tools).
        workflow: a workflow YAML file (phases, agents, thresholds), or None.
        model: `provider:model` or `offline`, or a LangChain chat model object; None:
            `$TETHER_MODEL`, the workflow's, the provider whose key is set, else the
            offline model.
        token_threshold: lead-context tokens that trigger a snapshot (default: workflow,
            then the external-memory skill's 150,000).
        max_parallel: subagents running at once (default: workflow's).
        on_event: called with one dict per progress event.
        project_dir: where a project's `templates/` and `skills/` are (default: cwd).
        max_subtasks: most subtasks the lead may plan per phase (default 4).
        model_timeout: seconds per model request (default: `$TETHER_MODEL_TIMEOUT`, the
            workflow's `model_timeout`, else 120).
        checkpointer: a LangGraph checkpointer for graph state (e.g. `PostgresSaver`); the
            caller keeps and closes it. Default: the backend's own (`SqliteSaver` in
            `<memory>/.langgraph/`, `PostgresSaver` beside a PostgreSQL memory).
        tools: the user's tools: LangChain tools (`BaseTool`, `@tool`) or typed functions
            with a docstring; agents list them by name. A task that uses them can only be
            continued (`resume`, `approve`) by a process that passes them again, unless
            the workflow names them in `python_tools`.
        agents: agent specs (`AgentSpec` or dicts of its fields: description, prompt or
            prompt_file, tools, model, max_steps, interrupt_on) replacing the workflow's;
            recorded with the task, so `resume` and `approve` use them too.
        status_file: refresh tether's block in the workdir's `STATUS.md` after each
            phase (also when the workflow's `status_file` is true; default: never write
            in the workdir).
    """

    def __init__(
        self,
        memory_dir: str | os.PathLike[str] | None = None,
        workdir: str | os.PathLike[str] | None = ".",
        workflow: str | os.PathLike[str] | None = None,
        model: Any = None,
        token_threshold: int | None = None,
        max_parallel: int | None = None,
        on_event: Callable[[Event], None] | None = None,
        project_dir: str | os.PathLike[str] | None = None,
        max_subtasks: int | None = None,
        model_timeout: float | None = None,
        checkpointer: BaseCheckpointSaver | None = None,
        memory_url: str | None = None,
        tools: Sequence[Any] = (),
        agents: Mapping[str, AgentSpec | Mapping[str, Any]] | None = None,
        status_file: bool = False,
    ):
        self.layout = Layout.at(memory_dir)
        self.status_file = status_file
        self.memory_url = memory_url
        self.model_timeout = model_timeout
        self.checkpointer = checkpointer
        self.workdir = workdir
        self.workflow_path = str(workflow) if workflow else None
        self.model_spec = model
        self.token_threshold = token_threshold
        self.max_parallel = max_parallel
        self.max_subtasks = max_subtasks
        self.on_event = on_event
        self.tools = list(tools)
        self.agents = agent_specs(agents) if agents is not None else None
        self.project_dir = str(Path(project_dir or Path.cwd()).absolute())
        if token_threshold is not None and token_threshold <= 0:
            raise OrchestratorUserError(
                f"token threshold {token_threshold!r} must be a positive number of tokens"
            )
        if max_parallel is not None and max_parallel <= 0:
            raise OrchestratorUserError(f"max parallel {max_parallel!r} must be at least 1")
        self.workflow = self._load_workflow(self.workflow_path)
        if memory_dir is None and not os.environ.get(MEMORY_ENV):
            # the workflow's `memory_dir` applies only when neither flag nor env chose one
            chosen = self.workflow.resolved_memory_dir()
            if chosen is not None:
                self.layout = Layout.at(chosen)
        #: The shared backend's store (PostgreSQL), open for the orchestrator's lifetime.
        self._shared: MemoryStore | None = None
        self._owned: Any = None
        if memory_url:
            self._shared = MemoryStore.from_url(memory_url)
            self.docs = Docs(self._shared.backend)
        else:
            from memory.backends.files import FilesBackend

            self._owned = FilesBackend(self.layout.root, create=False)
            self.docs = Docs(self._owned)
        self.tasks = TaskRegistry(self.docs)
        self._agent_model_cache: dict[int, dict[str, Any]] = {}

    # -- options ---------------------------------------------------------------------
    def _load_workflow(
        self, path: str | None, agents: dict[str, AgentSpec] | None = None
    ) -> Workflow:
        return run_workflow(path, self.project_dir, agents if agents is not None else self.agents)

    def _task_workflow(self, record: TaskRecord) -> Workflow:
        """The workflow a task runs with (see `orchestrator.assembly.task_workflow`)."""
        if self.workflow_path:
            return self.workflow
        return task_workflow(record, self.project_dir, self.agents) or self.workflow

    def _toolbox(self, workflow: Workflow, record: TaskRecord | None = None) -> Any:
        """The run's user tools, checked (`orchestrator.assembly.open_toolbox`)."""
        return open_toolbox(workflow, self.tools, self.project_dir, record)

    def _emit(self, event: str, **fields: Any) -> None:
        if self.on_event is not None:
            self.on_event({"event": event, **fields})

    def _limits(self, workflow: Workflow, record: TaskRecord | None) -> tuple[int, float, int]:
        """`(token threshold, warning ratio, max parallel)`: option, record, workflow."""
        record = record or {}
        limits = workflow.thresholds
        threshold = self.token_threshold or record.get("token_threshold") or limits.token_threshold
        parallel = self.max_parallel or record.get("max_parallel") or limits.max_parallel
        return int(threshold), float(limits.warning_ratio), int(parallel)

    def _context(
        self,
        store: MemoryStore,
        workflow: Workflow,
        resolved: ResolvedModel | None,
        thread_id: str,
        record: TaskRecord | None = None,
        toolbox: Toolbox | None = None,
    ) -> RunContext:
        """The run context of the graph (`resolved` None: files only, no model calls)."""
        threshold, ratio, parallel = self._limits(workflow, record)
        model = resolved.model if resolved else None
        return RunContext(
            toolbox=toolbox or Toolbox(),
            prompts=workflow.prompts(),
            tool_timeout=workflow.tool_timeout or DEFAULT_TOOL_TIMEOUT,
            tool_result_tokens=workflow.thresholds.tool_result_tokens,
            store=store,
            workflow=workflow,
            model=model,
            model_name=resolved.name if resolved else "",
            offline=bool(resolved and resolved.offline),
            token_threshold=effective_threshold(threshold, model),
            warning_ratio=ratio,
            max_parallel=parallel,
            skills_index=skills_index(discover_skills(self.project_dir)),
            triggers=external_memory_triggers(self.project_dir),
            thread_id=thread_id,
            project_dir=self.project_dir,
            on_event=self.on_event,
            agent_models=self._agent_models(workflow) if resolved is not None else {},
            max_subtasks=self.max_subtasks or (record or {}).get("max_subtasks"),
            status_file=self.status_file or workflow.status_file,
        )

    def _agent_models(self, workflow: Workflow) -> dict[str, Any]:
        """Chat models of workflow agents that name their own (resolved once per run)."""
        if id(workflow) not in self._agent_model_cache:
            self._agent_model_cache[id(workflow)] = agent_models(workflow)
        return self._agent_model_cache[id(workflow)]

    def _resolve_model(self, workflow: Workflow, record: TaskRecord | None = None) -> ResolvedModel:
        recorded = (record or {}).get("model")
        resolved = resolve_run_model(
            self.model_spec, workflow, timeout=self.model_timeout, recorded=recorded
        )
        by_name = isinstance(self.model_spec, str | None)
        if record is not None and by_name and resolved.name != recorded:
            # the task sticks to its model; an explicit --model switch is recorded
            self.tasks.note(record["task_id"], model=resolved.name, model_before=recorded)
        return resolved

    def close(self) -> None:
        """Close the backend the orchestrator opened (its database connections)."""
        if self._shared is not None:
            self._shared.close()
        if self._owned is not None:
            self._owned.close()

    def __enter__(self) -> Orchestrator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextlib.contextmanager
    def _store(self) -> Iterator[MemoryStore]:
        """The store a run writes through for the block (a shared one stays open)."""
        if self._shared is not None:
            yield self._shared
            return
        with MemoryStore(self.layout.root) as store:  # closes its checkpointer too
            yield store

    def _check_writable(self, action: str) -> None:
        """One-line `MemoryDirError` when the memory directory is read-only (before any write)."""
        if self._shared is None:
            MemoryStore(self.layout.root, create=False).check_writable(action)

    def task_record(self, task_id: str | None = None) -> dict[str, Any]:
        """The recorded options of `task_id`, or of the most recent task.

        Raises:
            UnknownTaskError: no such task (or no task at all) in the memory directory.
        """
        return self.tasks.record(task_id)

    # -- running ---------------------------------------------------------------------
    def run(
        self,
        objective: str | None = None,
        task_id: str | None = None,
        start_phase: str | None = None,
        *,
        brief: str | None = None,
    ) -> RunResult:
        """Run a new task to the end of its last phase.

        Args:
            objective: what the task should achieve (at most `MAX_OBJECTIVE_CHARS`).
            brief: a long brief instead (see `orchestrator.brief`): stored once as
                `working/{task_id}/brief.md`; the objective becomes its title and a reference.

        Raises:
            OrchestratorUserError: bad objective, brief, task id, phase, workdir or model.
            Interrupted: Ctrl-C or SIGTERM (the task can be resumed).
        """
        self._check_writable("run a task")
        if brief is not None:
            objective = objective or brief_title(brief)
        phases = list(self.workflow.phases)
        task_id, workdir = check_new_task(
            objective or "", task_id, start_phase, phases, self.workdir
        )
        if brief is not None:
            objective = brief_objective(brief, task_id)
        resolved = self._resolve_model(self.workflow)
        self._agent_models(self.workflow)  # an uninstalled provider fails before any write
        with (
            self._toolbox(self.workflow) as toolbox,
            task_lock(self.docs, task_id),
            self._store() as store,
        ):
            if task_id in self.tasks:
                raise OrchestratorUserError(
                    f"task {task_id!r} already exists; continue it with "
                    f"`orchestrator resume --task {task_id}` or pick another --task"
                )
            if brief is not None:
                store_brief(self.docs, task_id, brief)
            state = initial_state(
                task_id=task_id,
                objective=objective or "",
                workdir=workdir,
                phases=phases,
                phase_index=phases.index(start_phase) if start_phase else 0,
            )
            return self._start(store, state, resolved, toolbox)

    def _start(
        self,
        store: MemoryStore,
        state: OrchestratorState,
        resolved: ResolvedModel,
        toolbox: Toolbox,
    ) -> RunResult:
        task_id, objective = state["task_id"], state["objective"]
        threshold, _ratio, parallel = self._limits(self.workflow, None)
        self.tasks.note(
            task_id,
            objective=objective,
            workdir=state["workdir"],
            phases=state["phases"],
            start_phase=current_phase(state),
            workflow=self.workflow_path,
            model=resolved.name if isinstance(self.model_spec, str | None) else None,
            model_source=resolved.source,
            token_threshold=self.token_threshold,
            max_parallel=self.max_parallel,
            max_subtasks=self.max_subtasks,
            thread_id=task_id,
            project_dir=self.project_dir,
            created=utc().isoformat(),
            in_process_tools=toolbox.in_process,
            agents=(
                {k: v.model_dump(exclude_defaults=True) for k, v in self.agents.items()}
                if self.agents is not None
                else None
            ),
        )
        WorkingMemory(store, task_id).ensure(objective=objective)
        ctx = self._context(store, self.workflow, resolved, task_id, toolbox=toolbox)
        ctx.new_task = True
        self._emit("model", name=resolved.name, offline=resolved.offline)
        self._emit(
            "start",
            task_id=task_id,
            objective=objective,
            phases=state["phases"],
            memory_dir=self.docs.location,
            workdir=state["workdir"],
            model=resolved.name,
            offline=resolved.offline,
            token_threshold=threshold,
            max_parallel=parallel,
        )
        return self._drive(ctx, state, task_id, source="run")

    def _drive(
        self,
        ctx: RunContext,
        state: OrchestratorState | Command | None,
        task_id: str,
        *,
        source: str,
        warnings: list[str] | None = None,
    ) -> RunResult:
        """Stream the graph from `state` (None: continue the thread's saved state) to its
        end."""
        fault("run_before_graph")
        backend = ctx.store.backend
        saver = self.checkpointer or backend.checkpointer()
        self._emit_notices(backend)
        try:
            values = run_graph(ctx, state, task_id, saver)
        except sqlite3.DatabaseError as exc:
            # LangGraph's database went bad under the run: move it aside, so that the next
            # `resume` continues from the JSON checkpoints, and say so in one line
            if self.checkpointer is not None or not hasattr(backend, "reset_checkpointer"):
                raise
            if not is_damage(exc):
                raise
            aside = backend.reset_checkpointer(exc)
            backend.notices.clear()
            raise OrchestratorRuntimeError(
                f"LangGraph's database was damaged during the run ({describe_damage(exc)}); "
                f"moved aside to {aside}; continue with `{resume_command(task_id, self.docs)}` "
                "(from the JSON checkpoints)"
            ) from None
        result = RunResult.from_state(values, ctx, source=source, warnings=warnings or [])
        if result.status not in ("failed", "waiting"):
            self.tasks.note(task_id, status=result.status, error=None, pending_approvals=[])
        self._emit(
            "finish",
            task_id=result.task_id,
            status=result.status,
            plan=result.plan,
            memory_dir=result.memory_dir,
            findings=len(result.findings),
            snapshots=result.snapshots,
            checkpoints=len(result.checkpoints),
            usage=result.usage,
            pending_approvals=result.pending_approvals,
            skipped=result.skipped_phases,
            reason=result.done_reason,
        )
        return result

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
    def _continuing(self, record: TaskRecord) -> Iterator[tuple[Any, Workflow, Any, Toolbox]]:
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
        record: TaskRecord,
        snap: dict[str, Any] | None,
        from_checkpoint: str | None,
        workflow: Workflow,
        resolved: ResolvedModel,
        toolbox: Toolbox,
    ) -> RunResult:
        task_id = record["task_id"]
        thread = record.get("thread_id") or task_id
        repaired = repair_findings(self.docs, task_id, self.project_dir)
        saved = saved_state(self.docs, thread, self.checkpointer)
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

    def _emit_notices(self, backend: Any) -> None:
        """The backend's repairs (a damaged LangGraph database moved aside) as warnings."""
        notices = getattr(backend, "notices", None)
        while notices:
            self._emit("warning", message=notices.pop(0))

    def _emit_finished(self, values: dict[str, Any]) -> None:
        """`done` events for the current phase's subagents that finished before the
        interruption and that the graph will not enter again (their result is in the
        state), so a view counts the whole fan-out."""
        if values.get("status") == "done":
            return  # nothing runs: the closing report says it all
        try:
            phase = current_phase(values)  # type: ignore[arg-type]
        except (KeyError, IndexError, TypeError):
            return
        for key, rec in sorted((values.get("findings") or {}).items()):
            if rec.get("phase") == phase and rec.get("path"):
                self._emit(
                    "agent",
                    key=key,
                    agent=rec.get("agent", "?"),
                    state="done",
                    reused=True,
                    tokens=rec.get("tokens", 0),
                    path=str(self.docs.path(rec["path"])),
                )
