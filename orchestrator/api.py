"""The Python API: `Orchestrator` runs, resumes, hands off and reports on tasks.

::

    from orchestrator import Orchestrator

    orch = Orchestrator(workdir=".", on_event=print)
    result = orch.run("Survey this repository")
    orch.resume(result.task_id)          # after a crash or Ctrl-C
    snap = orch.handoff(result.task_id)  # a snapshot a fresh agent can continue from

Design: options are validated before anything is written (workflow file, workdir, model,
phase), so a bad call leaves the memory directory untouched. `Orchestrator` is the driver:
it records the task (`artifacts.tasks`), resolves the model (`agents.chat_models`),
builds the run context and streams the graph (`orchestrator.graph.build`); a resume continues
from the source `orchestrator.recovery.resume` chooses; `status` reads tether's own files
(`orchestrator.recovery.status`). Progress is reported as event dicts to `on_event` (their kinds and
fields: `orchestrator.events`; shown by `orchestrator.cli.view`); library code never prints.

Invariant: `run` and `resume` either finish the task or leave it resumable: every
super-step is durable (LangGraph `durability="sync"`), and the JSON checkpoints, plan and
findings files are enough to continue without LangGraph's database.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.types import Command

from memory.base import BaseBackend
from memory.capabilities import HoldsGraphState
from memory.errors import describe_sqlite_damage as describe_damage
from memory.errors import is_sqlite_damage as is_damage
from memory.paths import Layout
from memory.store import MemoryStore
from memory.working import WorkingMemory
from orchestrator._api_approve import ApprovalMixin
from orchestrator._api_handoff import HandoffMixin
from orchestrator._api_resume import ResumeMixin
from orchestrator._api_setup import SetupMixin
from orchestrator.agents.chat_models import ResolvedModel
from orchestrator.artifacts.brief import brief_objective, brief_title, store_brief
from orchestrator.artifacts.documents import Docs
from orchestrator.artifacts.tasks import TaskList, resume_command, task_lock
from orchestrator.config.settings import Overrides, check_new_task
from orchestrator.config.workflow import AgentSpec
from orchestrator.errors import (
    OrchestratorRuntimeError,
    OrchestratorUserError,
)
from orchestrator.events import Event
from orchestrator.faults import fault
from orchestrator.graph.build import run_graph
from orchestrator.graph.context import RunContext
from orchestrator.result import RunResult
from orchestrator.state import OrchestratorState, initial_state
from orchestrator.tools.assembly import agent_specs
from orchestrator.tools.toolbox import Toolbox


class Orchestrator(SetupMixin, ResumeMixin, ApprovalMixin, HandoffMixin):
    """Runs tether tasks against one memory: a memory directory, or a shared backend.

    The arguments are the top layer of every setting; the environment, the workflow, the
    external-memory skill and the defaults fill in the rest (`orchestrator.config.settings`,
    resolved as `settings`).

    Args:
        memory_dir: the memory directory (default `$TETHER_MEMORY_DIR` or `.temp/memory`).
        memory_url: `postgresql://...` to keep the memory and graph state in PostgreSQL
            instead (default `$TETHER_MEMORY_URL`; processes on several machines share its
            tasks); `memory_dir` is then unused. Close the orchestrator (`close()`, or
            `with`) when done.
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
        backend: a memory backend of your own (`memory.base.BaseBackend`: the contract's
            14 primitives suffice) instead of `memory_dir`/`memory_url`; the caller keeps
            and closes it. Without the `HoldsGraphState` capability
            (`memory.capabilities`), pass a `checkpointer` too.
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
        backend: BaseBackend | None = None,
    ):
        self.status_file = status_file
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
        #: The top layer of every setting (`orchestrator.config.settings`): the arguments given.
        self.overrides = Overrides(
            memory_dir=memory_dir,
            memory_url=memory_url,
            model=model if isinstance(model, str) else None,
            model_timeout=model_timeout,
            token_threshold=token_threshold,
            max_parallel=max_parallel,
            max_subtasks=max_subtasks,
            status_file=status_file,
        )
        self.workflow = self._load_workflow(self.workflow_path)
        #: The settings of a new task (a recorded task's: `settings_for`).
        self.settings = self.settings_for(self.workflow)
        self.layout = Layout.at(self.settings.memory_dir)
        self.memory_url = memory_url = self.settings.memory_url
        #: The shared backend's store (PostgreSQL), open for the orchestrator's lifetime.
        self._shared: MemoryStore | None = None
        self._owned: Any = None
        self._borrowed = backend is not None
        if backend is not None:
            self._shared = MemoryStore(backend=backend)
            self.docs = Docs(backend)
        elif memory_url:
            self._shared = MemoryStore.from_url(memory_url)
            self.docs = Docs(self._shared.backend)
        else:
            from memory.backends.files import FilesBackend

            self._owned = FilesBackend(self.layout.root, create=False)
            self.docs = Docs(self._owned)
        if checkpointer is None and not isinstance(self.docs.backend, HoldsGraphState):
            name = type(self.docs.backend).__name__
            raise OrchestratorUserError(
                f"{name} keeps no LangGraph state; pass a checkpointer too: "
                "Orchestrator(backend=..., checkpointer=...)"
            )
        self.tasks = TaskList(self.docs)
        self._agent_model_cache: dict[int, dict[str, Any]] = {}

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
            brief: a long brief instead (see `orchestrator.artifacts.brief`): stored once as
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

    def new_task(
        self,
        objective: str,
        task_id: str | None = None,
        start_phase: str | None = None,
        *,
        served: bool = False,
    ) -> OrchestratorState:
        """Check and record a new task and create its working memory, without running it.

        For running tether's graph yourself (`open_task` gives its run context); the
        LangGraph Server entry starts its tasks this way.

        Args:
            served: recorded with the task (the task runs on LangGraph Server).

        Returns:
            The task's initial graph state.

        Raises:
            OrchestratorUserError: bad objective, task id, phase, workdir or model, or a
                task id that exists already.
        """
        self._check_writable("start a task")
        phases = list(self.workflow.phases)
        task_id, workdir = check_new_task(objective, task_id, start_phase, phases, self.workdir)
        resolved = self._resolve_model(self.workflow)  # a bad model fails before any write
        state = initial_state(
            task_id=task_id,
            objective=objective,
            workdir=workdir,
            phases=phases,
            phase_index=phases.index(start_phase) if start_phase else 0,
        )
        with task_lock(self.docs, task_id):
            if task_id in self.tasks:
                raise OrchestratorUserError(
                    f"task {task_id!r} already exists in {self.docs.location!r}; pick another "
                    f"task id, or continue it with `orchestrator resume --task {task_id}`"
                )
            self._record_new(state, resolved, [], served=served)
        with self._store() as store:
            WorkingMemory(store, task_id).ensure(objective=objective)
        return state

    def _start(
        self,
        store: MemoryStore,
        state: OrchestratorState,
        resolved: ResolvedModel,
        toolbox: Toolbox,
    ) -> RunResult:
        task_id, objective = state["task_id"], state["objective"]
        settings = self.settings_for(self.workflow)
        self._record_new(state, resolved, toolbox.in_process)
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
            token_threshold=settings.token_threshold,
            max_parallel=settings.max_parallel,
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
