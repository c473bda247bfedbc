"""The Python API: `Orchestrator` runs, resumes, approves, hands off and reports on tasks.

::

    from orchestrator import Orchestrator

    orch = Orchestrator(workdir=".", on_event=print)
    result = orch.run("Survey this repository")
    orch.resume(result.task_id)          # after a crash or Ctrl-C
    snap = orch.handoff(result.task_id)  # a snapshot a fresh agent can continue from

Design: options are validated before anything is written (workflow file, workdir, model,
phase), so a bad call leaves the memory untouched. Each verb is a list of steps, each step
in the wing it belongs to: the settings (`config.settings`), the memory
(`artifacts.documents.MemoryHandle`), the task's record (`artifacts.tasks`), the model
(`agents.chat_models`), the tools (`tools.assembly`), the run context
(`graph.context.RunContext.build`), where a resume continues (`recovery.resume`), the
decisions on approvals (`approvals`), and the graph run itself (`graph.build.run_graph`).
Progress is reported as event dicts to `on_event` (their kinds and fields:
`orchestrator.events`; shown by `orchestrator.cli.view`); library code never prints.

Invariant: `run`, `resume` and `approve` either finish the task or leave it resumable:
every super-step is durable (LangGraph `durability="sync"`), and the JSON checkpoints,
plan and findings files are enough to continue without LangGraph's database.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.types import Command

from memory.backends import is_shared
from memory.contract.base import BaseBackend
from memory.contract.capabilities import HoldsGraphState, KnowsIdentity
from memory.paths import Layout
from memory.store import MemoryStore
from memory.task.working import WorkingMemory
from orchestrator.agents.budget import TokenBudget
from orchestrator.agents.chat_models import AgentModels, ResolvedModel, run_model
from orchestrator.approvals import answer, answerable, listed_only, pending, recorded_decisions
from orchestrator.artifacts.brief import brief_objective, brief_title, store_brief
from orchestrator.artifacts.checkpoint import latest_valid_checkpoint
from orchestrator.artifacts.documents import MemoryHandle
from orchestrator.artifacts.names import utc
from orchestrator.artifacts.recorded import repair_findings, repaired_message
from orchestrator.artifacts.tasks import TaskInfo, TaskList, resume_command, task_lock, thread_of
from orchestrator.config.settings import Overrides, Settings, check_new_task, check_workdir
from orchestrator.config.skills import external_memory_triggers
from orchestrator.config.workflow import AgentSpec, Workflow
from orchestrator.errors import (
    ApprovalError,
    Interrupted,
    OrchestratorUserError,
    Terminated,
    UnknownTaskError,
)
from orchestrator.events import Event, build_event
from orchestrator.faults import fault
from orchestrator.graph.build import ThreadState, run_graph, thread_state
from orchestrator.graph.context import RunContext
from orchestrator.graph.handoff import write_lead_snapshot
from orchestrator.graph.remote import check_served_memory
from orchestrator.graph.tracing import traced
from orchestrator.graph.writes import checkpoint_state
from orchestrator.recovery.rebuild import state_from_checkpoint, with_recorded_findings
from orchestrator.recovery.resume import approve_events, prepare_resume, resume_source, standing
from orchestrator.recovery.status import task_status
from orchestrator.result import RunResult
from orchestrator.state import OrchestratorState, current_phase, initial_state
from orchestrator.tools.assembly import (
    agent_specs,
    check_unchanged,
    open_toolbox,
    run_workflow,
    task_workflow,
    workflow_digests,
)
from orchestrator.tools.toolbox import Toolbox

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

    from orchestrator.types import JsonObject


@dataclass(frozen=True)
class Continuation:
    """What continuing a recorded task holds for a verb's block (`Orchestrator._continuing`):
    the task's record, its workflow, the settings resolved once for the verb, the model,
    the user's tools (their MCP servers running) and the store."""

    record: TaskInfo
    workflow: Workflow
    settings: Settings
    resolved: ResolvedModel
    toolbox: Toolbox
    store: MemoryStore

    @property
    def task_id(self) -> str:
        return self.record["task_id"]

    @property
    def thread(self) -> str:
        """LangGraph's thread of the task (`artifacts.tasks.thread_of`)."""
        return thread_of(self.record)


class Orchestrator:
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
        max_subtasks: most subtasks the lead may plan per wave (default 4).
        max_waves: most waves of one phase (default: workflow's, else 50); the lead plans
            another wave of a phase while its plan says `continue_phase`.
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
        backend: a memory backend of your own (`memory.contract.base.BaseBackend`: the contract's
            14 primitives suffice) instead of `memory_dir`/`memory_url`; the caller keeps
            and closes it. Without the `HoldsGraphState` capability
            (`memory.contract.capabilities`), pass a `checkpointer` too.
        budget_tokens: the task's token budget (prompt plus completion tokens of all its
            agents; default: the workflow's `budget_tokens`, else none). Once it is spent
            no model call starts and the task stops `stopped`; `resume` with a larger one
            goes on. Recorded with the task.
        trace: OpenTelemetry traces of the runs (`orchestrator.graph.tracing`): True, False,
            or a `TracerProvider`; None: on when `$OTEL_EXPORTER_OTLP_ENDPOINT` is set.
    """

    def __init__(
        self,
        memory_dir: str | os.PathLike[str] | None = None,
        workdir: str | os.PathLike[str] | None = ".",
        workflow: str | os.PathLike[str] | None = None,
        model: str | BaseChatModel | None = None,
        token_threshold: int | None = None,
        max_parallel: int | None = None,
        on_event: Callable[[Event], None] | None = None,
        project_dir: str | os.PathLike[str] | None = None,
        max_subtasks: int | None = None,
        max_waves: int | None = None,
        model_timeout: float | None = None,
        checkpointer: BaseCheckpointSaver | None = None,
        memory_url: str | None = None,
        tools: Sequence[Any] = (),
        agents: Mapping[str, AgentSpec | Mapping[str, Any]] | None = None,
        status_file: bool = False,
        backend: BaseBackend | None = None,
        budget_tokens: int | None = None,
        trace: Any = None,
    ):
        self.checkpointer = checkpointer
        self.workdir = workdir
        self.workflow_path = str(workflow) if workflow else None
        self.model_spec = model
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
            max_waves=max_waves,
            status_file=status_file,
            budget_tokens=budget_tokens,
        )
        self.workflow = run_workflow(self.workflow_path, self.project_dir, self.agents)
        #: The settings of a new task (a recorded task's: `settings_for`).
        self.settings = self.settings_for(self.workflow)
        self.layout = Layout.at(self.settings.memory_dir)
        self.memory_url = self.settings.memory_url
        self.memory = MemoryHandle(self.layout.root, url=self.memory_url, backend=backend)
        self.docs = self.memory.docs
        if checkpointer is None and not isinstance(self.docs.backend, HoldsGraphState):
            name = type(self.docs.backend).__name__
            raise OrchestratorUserError(
                f"{name} keeps no LangGraph state; pass a checkpointer too: "
                "Orchestrator(backend=..., checkpointer=...)"
            )
        self.tasks = TaskList(self.docs)
        self.tracing, self.on_event = traced(trace, self.tasks, on_event)  # tracing: or None
        #: Chat models of workflow agents that name their own, once per workflow content
        #: (by what they are built from, never by `id(workflow)`: a freed one's is reused).
        self._agent_models = AgentModels()

    # -- running a new task ----------------------------------------------------------
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
        self.memory.check_writable("run a task")
        if brief is not None:
            objective = objective or brief_title(brief)
        state = self._new_state(objective or "", task_id, start_phase)
        task_id = state["task_id"]
        if brief is not None:
            state["objective"] = brief_objective(brief, task_id)
        settings = self.settings_for(self.workflow)  # once for the verb
        resolved = self._resolve_model(self.workflow, settings)
        self._agent_models(self.workflow)  # an uninstalled provider fails before any write
        self._check_remote(self.workflow)  # unset ${VAR}s too, a server on another memory
        with contextlib.ExitStack() as held:
            try:  # starting the MCP servers may take long: a signal there leaves no task
                toolbox = held.enter_context(self._toolbox(self.workflow, task_id=task_id))
            except KeyboardInterrupt as exc:
                signum = signal.SIGTERM if isinstance(exc, Terminated) else signal.SIGINT
                raise Interrupted(task_id, None, self.docs.location, None, signum) from None
            held.enter_context(task_lock(self.docs, task_id))
            store = held.enter_context(self.memory.store())
            self._refuse_existing(task_id)
            if brief is not None:
                store_brief(self.docs, task_id, brief)
            self._record_new(state, resolved, toolbox.in_process)
            try:  # recorded: a signal before the graph runs leaves a task to resume
                WorkingMemory(store, task_id).ensure(objective=state["objective"])
                ctx = self._context(
                    store, self.workflow, settings, resolved=resolved, thread_id=task_id,
                    toolbox=toolbox,
                )  # fmt: skip
            except KeyboardInterrupt as exc:
                signum = signal.SIGTERM if isinstance(exc, Terminated) else signal.SIGINT
                resume = resume_command(task_id, self.docs)
                raise Interrupted(task_id, None, self.docs.location, resume, signum) from None
            ctx.new_task = True
            self._emit("model", name=resolved.name, offline=resolved.offline)
            self._emit(
                "start",
                task_id=task_id,
                objective=state["objective"],
                phases=state["phases"],
                memory_dir=self.docs.location,
                workdir=state["workdir"],
                model=resolved.name,
                offline=resolved.offline,
                token_threshold=settings.token_threshold,
                max_parallel=settings.max_parallel,
                **_budget(ctx),
            )
            self._emit_standing(ctx, state, phase=False)  # the gauge's real threshold
            return self._drive(ctx, state, task_id, source="run")

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
        self.memory.check_writable("start a task")
        state = self._new_state(objective, task_id, start_phase)
        settings = self.settings_for(self.workflow)
        resolved = self._resolve_model(self.workflow, settings)  # fails before any write
        self._check_remote(self.workflow)
        with task_lock(self.docs, state["task_id"]):
            self._refuse_existing(state["task_id"])
            self._record_new(state, resolved, [], served=served)
        with self.memory.store() as store:
            WorkingMemory(store, state["task_id"]).ensure(objective=objective)
        return state

    # -- continuing a recorded task --------------------------------------------------
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
        self.memory.check_writable("resume a task")
        task_id, snap = resume_source(self.docs, task_id, from_checkpoint, from_snapshot)
        try:
            record = self.task_record(task_id)
        except UnknownTaskError:
            if snap is None:
                raise
            record = self.tasks.adopt(task_id, snap, workdir=str(Path(self.workdir or ".")))
        with self._continuing(record) as go:
            return self._resume(go, snap=snap, from_checkpoint=from_checkpoint)

    def approve(
        self,
        task_id: str | None = None,
        approve: bool = True,
        message: str | None = None,
        request_id: str | None = None,
    ) -> RunResult:
        """Answer the requests a waiting task has (all, or the one `request_id` names) and
        continue it to its end (or its next wait); blocks like `resume`.

        Args:
            approve: True approves; False rejects, and the agent gets `message` as the
                refused tool's result (a rejected phase plan is planned again).
            request_id: a request id from `status` (a unique prefix is enough).

        Raises:
            UnknownTaskError: no such task.
            ApprovalError: the task waits for nothing, or no request matches.
            Interrupted: Ctrl-C or SIGTERM.
        """
        self.memory.check_writable("approve a request")
        if request_id is not None and not request_id.strip():
            raise ApprovalError("empty request id; give one from `orchestrator status` (--id)")
        record = self.task_record(task_id)
        task_id, thread = record["task_id"], thread_of(record)
        # known without the model: a task that waits for nothing says so before a key is asked
        saved = thread_state(self.docs, thread, self.checkpointer)
        lost = record.get("status") == "waiting" and saved is None
        if not lost and not answerable(self.docs, task_id, saved):
            raise ApprovalError(
                f"task {task_id!r} waits for no approval (status "
                f"{record.get('status') or 'unknown'}); see `orchestrator status`"
            )
        with self._continuing(record) as go:
            saved = thread_state(self.docs, thread, self.checkpointer)
            if saved is None:  # LangGraph's database is gone: on from the JSON checkpoint
                from orchestrator.recovery.resume import lost_decision_line

                self._emit("warning", message=lost_decision_line(record, approve))
                return self._resume(go)
            waiting = pending(self.docs, task_id, saved.interrupts)
            decided = recorded_decisions(self.docs, task_id, saved.interrupts)
            if request_id is None:  # what the last listing showed; newer ones wait on
                waiting, line = listed_only(self.tasks, record, waiting, bool(decided))
                if line:
                    self._emit("warning", message=line)
            if not waiting and not decided:  # answered meanwhile, by another process
                raise ApprovalError(f"task {task_id!r} waits for no approval any more")
            answers = (
                answer(self.docs, task_id, waiting, request_id, approve=approve, message=message)
                if waiting
                else {}
            )
            fault("approve_after_decision")
            ctx = self._continued(go, thread)
            opening = approve_events(self.docs, ctx, saved.values, list(answers), approve, message)
            for kind, fields in opening:  # task, phase, what finished, the answers
                self._emit(kind, **fields)
            self.tasks.note(task_id, status="running", pending_approvals=[])
            # decisions an earlier `approve` recorded but never got to LangGraph go too
            resume = {**decided, **answers}
            return self._drive(ctx, Command(resume=resume), task_id, source="approve")

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
        with self._continuing(record) as go:
            for rel in repair_findings(self.docs, task_id, self.project_dir):
                self._emit("warning", message=repaired_message(rel))
            ctx = self._continued(go, go.thread)
            self._emit("model", name=go.resolved.name, offline=go.resolved.offline)
            try:
                yield ctx
            finally:
                ctx.remote.close()

    @contextlib.contextmanager
    def subagent_context(self, task_id: str) -> Iterator[RunContext]:
        """The run context for one subagent of a task that another process runs (LangGraph
        Server's `tether_subagent`, `orchestrator.server`): the task's workflow with every
        agent local, its model and tools, the store; not the run lock, which the task's lead
        holds, and no budget of its own (the lead counts what the subagent spent).

        Raises:
            UnknownTaskError: no such task.
            OrchestratorUserError: the task's workdir, model or tools are unusable here.
        """
        record = self.task_record(task_id)
        with self._continuing(record, served=True) as go:
            ctx = self._continued(go, go.thread)
            ctx.budget = TokenBudget()
            yield ctx

    # -- reading a task and writing its files ----------------------------------------
    def current_state(self, task_id: str | None = None) -> tuple[JsonObject, str]:
        """The task's latest state and where it came from (`langgraph` or `checkpoint`)."""
        record = self.task_record(task_id)
        saved = thread_state(self.docs, thread_of(record), self.checkpointer)
        if saved is not None:  # a crash may have left findings it does not hold yet
            return with_recorded_findings(self.docs, dict(saved.values)), "langgraph"
        cp, _path, _warnings = latest_valid_checkpoint(self.docs, record["task_id"])
        return state_from_checkpoint(self.docs, cp.model_dump(mode="json")), "checkpoint"

    def handoff(self, task_id: str | None = None) -> Path:
        """Write a context snapshot of the task's current state; returns its path."""
        self.memory.check_writable("write a handoff snapshot")
        state, _source = self.current_state(task_id)
        with self.memory.store() as store:
            record = self.task_record(state["task_id"])
            settings = self.settings_for(self.workflow, record)
            ctx = self._context(store, self.workflow, settings, record=record)
            return write_lead_snapshot(ctx, state, reason="manual")

    def checkpoint_now(self, task_id: str | None = None, notes: str = "") -> Path:
        """Write a manual checkpoint of the task's current state; returns its path."""
        state, _source = self.current_state(task_id)
        task = state["task_id"]
        if state.get("status") == "done":
            next_action = "Task complete; nothing to do"
        else:
            next_action = f"Resume with `{resume_command(task, self.docs)}`"
        with self.memory.store() as store:
            record = self.task_record(task)
            settings = self.settings_for(self.workflow, record)
            ctx = self._context(store, self.workflow, settings, record=record)
            rel = checkpoint_state(
                ctx, state, trigger="manual", next_action=next_action, extra={"notes": notes}
            )
            return ctx.docs.path(rel)

    def status(self, task_id: str | None = None) -> JsonObject:
        """A JSON-able summary of the task: phase, subtasks, tokens, latest files
        (see `orchestrator.recovery.status.task_status`)."""
        return task_status(self.docs, task_id, checkpointer=self.checkpointer)

    def task_record(self, task_id: str | None = None) -> TaskInfo:
        """The recorded options of `task_id`, or of the most recent task.

        Raises:
            UnknownTaskError: no such task (or no task at all) in the memory.
        """
        return self.tasks.record(task_id)

    def settings_for(self, workflow: Workflow, record: TaskInfo | None = None) -> Settings:
        """The settings of a run of `workflow` (continuing `record`'s task, if given): this
        orchestrator's arguments over the task's, the environment's, the workflow's, the
        external-memory skill's and the defaults (`orchestrator.config.settings`).

        Raises:
            ModelConfigError: an invalid `$TETHER_MODEL_TIMEOUT`.
            SkillError: an invalid external-memory skill.
        """
        triggers = external_memory_triggers(self.project_dir)
        return Settings.resolve(self.overrides, workflow, triggers, record=record)

    def close(self) -> None:
        """Close the backend the orchestrator opened (its database connections), not one it
        was given."""
        self.memory.close()
        if self.tracing is not None:
            self.tracing.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the steps -------------------------------------------------------------------
    def _new_state(
        self, objective: str, task_id: str | None, start_phase: str | None
    ) -> OrchestratorState:
        """A new task's first state, its inputs checked (nothing is written)."""
        phases = list(self.workflow.phases)
        task_id, workdir = check_new_task(objective, task_id, start_phase, phases, self.workdir)
        return initial_state(
            task_id=task_id,
            objective=objective,
            workdir=workdir,
            phases=phases,
            phase_index=phases.index(start_phase) if start_phase else 0,
        )

    def _refuse_existing(self, task_id: str) -> None:
        if task_id in self.tasks:
            raise OrchestratorUserError(
                f"task {task_id!r} already exists in {self.docs.location!r}; pick another "
                f"task id, or continue it with `orchestrator resume --task {task_id}`"
            )

    def _record_new(
        self,
        state: OrchestratorState,
        resolved: ResolvedModel,
        in_process_tools: list[str],
        **extra: object,
    ) -> None:
        """Record a new task with the options it runs with (a resume uses them again)."""
        self.tasks.note(
            state["task_id"],
            objective=state["objective"],
            workdir=state["workdir"],
            phases=state["phases"],
            start_phase=current_phase(state),
            workflow=str(Path(self.workflow_path).absolute()) if self.workflow_path else None,
            model=resolved.name if isinstance(self.model_spec, str | None) else None,
            model_source=resolved.source,
            token_threshold=self.overrides.token_threshold,
            max_parallel=self.overrides.max_parallel,
            max_subtasks=self.overrides.max_subtasks,
            max_waves=self.overrides.max_waves,
            budget_tokens=self.overrides.budget_tokens,
            thread_id=state["task_id"],
            project_dir=self.project_dir,
            created=utc().isoformat(),
            in_process_tools=in_process_tools,
            workflow_digests=workflow_digests(self.workflow),
            agents=(
                {k: v.model_dump(exclude_defaults=True) for k, v in self.agents.items()}
                if self.agents is not None
                else None
            ),
            **extra,
        )

    @contextlib.contextmanager
    def _continuing(self, record: TaskInfo, *, served: bool = False) -> Iterator[Continuation]:
        """What continuing a recorded task needs, checked before anything is written: its
        workflow, settings (resolved once here), workdir, model and tools; then its run lock
        and the store, for the block (`served`: one subagent of a task another process runs:
        every agent local, no lock)."""
        workflow = self.workflow
        if not self.workflow_path:
            workflow = task_workflow(record, self.project_dir, self.agents) or self.workflow
        check_unchanged(record.get("workflow_digests"), workflow)  # nothing runs what changed
        if served:
            workflow = workflow.served()
        if record.get("workdir"):
            check_workdir(record["workdir"])  # moved or deleted since the run started?
        settings = self.settings_for(workflow, record)
        resolved = self._resolve_model(workflow, settings, record)
        self._agent_models(workflow)
        self._check_remote(workflow)
        if self.overrides.budget_tokens is not None:  # a new budget sticks to the task
            self.tasks.note(record["task_id"], budget_tokens=self.overrides.budget_tokens)
        with (
            self._toolbox(workflow, record) as toolbox,
            contextlib.nullcontext() if served else task_lock(self.docs, record["task_id"]),
            self.memory.store() as store,
        ):
            yield Continuation(record, workflow, settings, resolved, toolbox, store)

    def _resume(
        self,
        go: Continuation,
        *,
        snap: JsonObject | None = None,
        from_checkpoint: str | None = None,
        retry: bool = True,
    ) -> RunResult:
        """Continue the task from where `prepare_resume` finds it (`snap`: a snapshot to
        start from; `from_checkpoint`: a checkpoint the person named); with `retry`, once
        more when it ends failed by agents an earlier run failed (they are rerun now)."""
        task_id, resolved = go.task_id, go.resolved
        found = prepare_resume(
            self.docs,
            self.tasks,
            go.record,
            phases=list(go.workflow.phases),
            project_dir=self.project_dir,
            checkpointer=self.checkpointer,
            snapshot=snap,
            from_checkpoint=from_checkpoint,
        )
        ctx = self._continued(go, found.thread)
        if found.plan is None:  # waiting for approval: nothing runs
            return self._still_waiting(ctx, found.saved, task_id)  # type: ignore[arg-type]
        self._emit("model", name=resolved.name, offline=resolved.offline)
        for warning in found.plan.warnings:
            self._emit("warning", message=warning)
        for rel in found.repaired:
            self._emit("warning", message=repaired_message(rel))
        self._emit(
            "resume", task_id=task_id, source=found.plan.source, path=found.plan.path,
            memory_dir=self.docs.location, model=resolved.name, offline=resolved.offline,
            **_budget(ctx),
        )  # fmt: skip
        state = found.state
        values = state if state is not None else found.saved.values if found.saved else {}
        self._emit_standing(ctx, values)
        start: OrchestratorState | Command | None = state
        if state is None and found.decisions:  # decided, never reached LangGraph: apply
            start = Command(resume=found.decisions)
        result = self._drive(
            ctx, start, task_id, source=found.plan.source, warnings=found.plan.warnings
        )
        stale = sorted(k for k in result.failed if k != "lead" and k not in ctx.attempted)
        if not retry or result.status != "failed" or not stale or snap or from_checkpoint:
            return result
        # failures an earlier run left in the phase this one finished (killed after an
        # agent failed): retried now, not at a second resume
        self._emit("warning", message=f"retrying what failed before this run: {', '.join(stale)}")
        return self._resume(replace(go, record=self.task_record(task_id)), retry=False)

    def _still_waiting(self, ctx: RunContext, saved: ThreadState, task_id: str) -> RunResult:
        """The result of a task that waits for approval (nothing runs)."""
        waiting = [p.model_dump() for p in pending(self.docs, task_id, saved.interrupts)]
        values = {**saved.values, "status": "waiting", "pending_approvals": waiting}
        self._emit("waiting_approval", task_id=task_id, requests=waiting)
        return RunResult.from_state(values, ctx, source="langgraph", warnings=[])

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
        try:
            values = run_graph(ctx, state, task_id, self.checkpointer)
        finally:
            ctx.remote.close()  # the remote agents' HTTP clients (their runs go on)
        result = RunResult.from_state(values, ctx, source=source, warnings=warnings or [])
        if result.status not in ("failed", "waiting", "stopped"):
            self.tasks.note(task_id, status=result.status, error=None, pending_approvals=[])
        if ctx.budget.limit:
            self.tasks.note(task_id, spent_tokens=ctx.budget.spent)
        self._emit("finish", **result.finish_fields())
        return result

    def _continued(self, go: Continuation, thread_id: str) -> RunContext:
        """The run context of a continued task on LangGraph's thread `thread_id`."""
        return self._context(
            go.store, go.workflow, go.settings, resolved=go.resolved, thread_id=thread_id,
            record=go.record, toolbox=go.toolbox,
        )  # fmt: skip

    def _context(
        self,
        store: MemoryStore,
        workflow: Workflow,
        settings: Settings,
        *,
        resolved: ResolvedModel | None = None,
        thread_id: str = "",
        record: TaskInfo | None = None,
        toolbox: Toolbox | None = None,
    ) -> RunContext:
        """The run context of the graph with the verb's `settings` (`resolved` None: files
        only, no model calls)."""
        return RunContext.build(
            settings,
            store=store,
            workflow=workflow,
            resolved=resolved,
            thread_id=thread_id,
            project_dir=self.project_dir,
            on_event=self.on_event,
            tracing=self.tracing,
            toolbox=toolbox,
            agent_models=self._agent_models(workflow) if resolved is not None else {},
            record=record,
        )

    def _check_remote(self, workflow: Workflow) -> None:
        """The remote agents can run: their headers' variables are set, and a server that
        runs `tether_subagent` writes into this memory (`graph.remote.check_served_memory`)."""
        workflow.check_remote(is_shared(self.memory_url))
        backend = self.docs.backend
        identity = backend.identity if isinstance(backend, KnowsIdentity) else None
        check_served_memory(workflow, identity, self.settings.model_timeout)

    def _toolbox(
        self, workflow: Workflow, record: TaskInfo | None = None, task_id: str | None = None
    ) -> AbstractContextManager[Toolbox]:
        """The run's user tools, checked (`orchestrator.tools.assembly.open_toolbox`); the
        MCP servers' stderr goes to `working/{task_id}/mcp_servers.log` in the memory."""
        task_id = task_id or (record or {}).get("task_id")
        return open_toolbox(
            workflow,
            self.tools,
            self.project_dir,
            record,
            on_warning=lambda line: self._emit("warning", message=line),
            stderr_log=self.layout.task_dir(task_id) / "mcp_servers.log" if task_id else None,
        )

    def _resolve_model(
        self, workflow: Workflow, settings: Settings, record: TaskInfo | None = None
    ) -> ResolvedModel:
        """The run's model from the verb's `settings` (a recorded task's sticks to it)."""
        recorded = (record or {}).get("model")
        by_name = isinstance(self.model_spec, str | None)
        resolved = run_model(
            settings.model if by_name else self.model_spec,
            settings.sources["model"],
            settings.model_timeout,
            workflow_file=workflow.source,
        )
        if record is not None and by_name and resolved.name != recorded:
            # the task sticks to its model; an explicit --model switch is recorded
            self.tasks.note(record["task_id"], model=resolved.name, model_before=recorded)
        return resolved

    # -- events ----------------------------------------------------------------------
    def _emit(self, event: str, **fields: object) -> None:
        built = build_event(event, **fields)  # checked with or without a callback
        if self.on_event is not None:
            self.on_event(built)

    def _emit_standing(self, ctx: RunContext, values: Any, *, phase: bool = True) -> None:
        """Where the task stands before the graph runs (`recovery.resume.standing`)."""
        for kind, fields in standing(
            self.docs, values, threshold=ctx.token_threshold,
            warning_ratio=ctx.warning_ratio, phase=phase,
        ):  # fmt: skip
            self._emit(kind, **fields)


def _budget(ctx: RunContext) -> dict[str, int]:
    """The `budget_tokens` field of a `start` or `resume` event: the task's budget, if any."""
    return {"budget_tokens": ctx.budget.limit} if ctx.budget.limit else {}
