"""The Python API: `Orchestrator` runs, resumes, hands off and reports on tasks.

::

    from orchestrator import Orchestrator

    orch = Orchestrator(workdir=".", on_event=print)
    result = orch.run("Survey this repository")
    orch.resume(result.task_id)          # after a crash or Ctrl-C
    snap = orch.handoff(result.task_id)  # a snapshot a fresh agent can continue from

Design: options are validated before anything is written (workflow file, workdir, model,
phase), so a bad call leaves the memory directory untouched. Each task is recorded in
`<memory root>/.tether/tasks.jsonl` (options and the current LangGraph thread), which is
how `resume`, `status` and `handoff` find "the most recent task" and rebuild the same
run context. Progress is reported as event dicts to `on_event` (see
`orchestrator.view`); library code never prints.

Invariant: `run` and `resume` either finish the task or leave it resumable: every
super-step is durable (LangGraph `durability="sync"`), and the JSON checkpoints, plan and
findings files are enough to continue without LangGraph's database.
"""

from __future__ import annotations

import os
import secrets
import sqlite3
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from memory.paths import ENV_VAR as MEMORY_ENV
from memory.paths import Layout
from orchestrator.brief import brief_objective, brief_title, store_brief
from orchestrator.errors import (
    Interrupted,
    OrchestratorUserError,
    RecoveryError,
    UnknownTaskError,
    WorkflowError,
)
from orchestrator.models import agent_models, effective_threshold, resolve_run_model
from orchestrator.paths import utc
from orchestrator.tasks import (
    TaskRegistry,
    check_new_task,
    resume_command,
    task_lock,
    task_running,
)

Event = dict[str, Any]


@dataclass
class RunResult:
    """What a run or resume produced (paths relative to `memory_dir`)."""

    task_id: str
    status: str
    memory_dir: str
    phases: list[str]
    phase: str
    plan: str | None
    findings: list[str]
    merged: dict[str, str]
    checkpoints: list[str]
    snapshots: list[str]
    failed: dict[str, Any]
    tokens: dict[str, int]
    lead_calls: list[dict[str, Any]]
    final_summary: str | None
    model: str
    offline: bool
    source: str = "run"
    """`run`, `langgraph`, `checkpoint` or `snapshot`: where the state came from."""
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class Orchestrator:
    """Runs tether tasks against one memory directory.

    Args:
        memory_dir: the memory directory (default `$TETHER_MEMORY_DIR` or `.temp/memory`).
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
            caller keeps and closes it. Default: `SqliteSaver` in `<memory>/.langgraph/`.
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
        checkpointer: Any = None,
    ):
        self.layout = Layout.at(memory_dir)
        self._agent_model_cache: dict[int, dict[str, Any]] = {}
        self.model_timeout = model_timeout
        self.checkpointer = checkpointer
        self.workdir = workdir
        self.workflow_path = str(workflow) if workflow else None
        self.model_spec = model
        self.token_threshold = token_threshold
        self.max_parallel = max_parallel
        self.max_subtasks = max_subtasks
        self.on_event = on_event
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
        self.tasks = TaskRegistry(self.layout)

    # -- options ---------------------------------------------------------------------
    def _load_workflow(self, path: str | None) -> Any:
        from orchestrator.workflow import load_workflow

        if path is not None and not Path(path).is_file():
            raise WorkflowError(f"workflow file {path!r} not found; pass an existing YAML file")
        return load_workflow(path, self.project_dir)

    def _emit(self, event: str, **fields: Any) -> None:
        if self.on_event is not None:
            self.on_event({"event": event, **fields})

    def _thresholds(self, workflow: Any, record: dict | None = None) -> tuple[int, float, int]:
        th = getattr(workflow, "thresholds", None)
        threshold = (
            self.token_threshold
            or (record or {}).get("token_threshold")
            or getattr(th, "token_threshold", None)
            or 150_000
        )
        ratio = float(getattr(th, "warning_ratio", None) or 0.8)
        parallel = (
            self.max_parallel
            or (record or {}).get("max_parallel")
            or getattr(th, "max_parallel", None)
            or 4
        )
        return int(threshold), ratio, int(parallel)

    def _context(
        self, store: Any, workflow: Any, resolved: Any, thread_id: str, record: dict | None = None
    ) -> Any:
        from orchestrator.nodes._runtime import RunContext
        from orchestrator.skills import discover_skills, skills_index

        threshold, ratio, parallel = self._thresholds(workflow, record)
        threshold = effective_threshold(threshold, resolved.model if resolved else None)
        agent_models = self._agent_models(workflow) if resolved is not None else {}
        return RunContext(
            store=store,
            workflow=workflow,
            model=resolved.model if resolved else None,
            model_name=resolved.name if resolved else "",
            offline=bool(resolved and resolved.offline),
            token_threshold=threshold,
            warning_ratio=ratio,
            max_parallel=parallel,
            skills_index=skills_index(discover_skills(self.project_dir)),
            thread_id=thread_id,
            project_dir=self.project_dir,
            on_event=self.on_event,
            agent_models=agent_models,
            max_subtasks=self.max_subtasks or (record or {}).get("max_subtasks"),
        )

    def _agent_models(self, workflow: Any) -> dict[str, Any]:
        """Chat models of workflow agents that name their own (resolved once per run)."""
        if id(workflow) not in self._agent_model_cache:
            self._agent_model_cache[id(workflow)] = agent_models(workflow)
        return self._agent_model_cache[id(workflow)]

    def _resolve_model(self, workflow: Any, record: dict | None = None) -> Any:
        recorded = (record or {}).get("model")
        resolved = resolve_run_model(
            self.model_spec, workflow, timeout=self.model_timeout, recorded=recorded
        )
        if record is not None and isinstance(self.model_spec, str | None):
            if resolved.name != recorded:
                # the task sticks to its model; an explicit --model switch is recorded
                self.tasks.note(record["task_id"], model=resolved.name, model_before=recorded)
        return resolved

    # -- task records ----------------------------------------------------------------
    def _check_writable(self, action: str) -> None:
        """One-line `MemoryDirError` when the memory directory is read-only (before any write)."""
        from memory.store import MemoryStore

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
            Interrupted: Ctrl-C (the task can be resumed).
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
        with task_lock(self.layout, task_id, self.checkpointer):
            if task_id in self.tasks:
                raise OrchestratorUserError(
                    f"task {task_id!r} already exists; continue it with "
                    f"`orchestrator resume --task {task_id}` or pick another --task"
                )
            if brief is not None:
                store_brief(self.layout, task_id, brief)
            return self._start(objective, task_id, phases, workdir, start_phase, resolved)

    def _start(
        self,
        objective: str,
        task_id: str,
        phases: list[str],
        workdir: str,
        start_phase: str | None,
        resolved: Any,
    ) -> RunResult:
        from memory.store import MemoryStore
        from orchestrator.state import initial_state

        store = MemoryStore(self.layout.root)
        threshold, _ratio, parallel = self._thresholds(self.workflow)
        self.tasks.note(
            task_id,
            objective=objective,
            workdir=workdir,
            workflow=self.workflow_path,
            model=resolved.name if isinstance(self.model_spec, str | None) else None,
            model_source=resolved.source,
            token_threshold=self.token_threshold,
            max_parallel=self.max_parallel,
            max_subtasks=self.max_subtasks,
            thread_id=task_id,
            project_dir=self.project_dir,
            created=utc().isoformat(),
        )
        try:
            from memory.working import WorkingMemory

            WorkingMemory(store, task_id).ensure(objective=objective)
        except ImportError:
            pass
        state = initial_state(
            task_id=task_id,
            objective=objective,
            workdir=workdir,
            phases=phases,
            phase_index=phases.index(start_phase) if start_phase else 0,
        )
        ctx = self._context(store, self.workflow, resolved, task_id)
        self._emit("model", name=resolved.name, offline=resolved.offline)
        self._emit(
            "start",
            task_id=task_id,
            objective=objective,
            phases=phases,
            memory_dir=str(self.layout.root),
            workdir=workdir,
            model=resolved.name,
            offline=resolved.offline,
            token_threshold=threshold,
            max_parallel=parallel,
        )
        return self._drive(store, ctx, state, task_id, source="run")

    def _drive(
        self,
        store: Any,
        ctx: Any,
        state: Any,
        task_id: str,
        *,
        source: str,
        warnings: list[str] | None = None,
    ) -> RunResult:
        from orchestrator.faults import fault
        from orchestrator.graph import DURABILITY, compile_graph, open_saver, run_config
        from orchestrator.nodes._core import write_checkpoint
        from orchestrator.paths import langgraph_db

        saver = self.checkpointer or open_saver(langgraph_db(self.layout))
        fault("run_before_graph")
        try:
            graph = compile_graph(saver)
            config = run_config(ctx.thread_id, ctx.max_parallel)
            try:
                for _ in graph.stream(
                    state, config, context=ctx, durability=DURABILITY, stream_mode="updates"
                ):
                    pass
            except KeyboardInterrupt:
                cp = None
                values = graph.get_state(config).values
                if values.get("task_id"):
                    rel = write_checkpoint(
                        ctx, values, trigger="interrupted", next_action="Resume the interrupted run"
                    )
                    cp = str(self.layout.root / rel)
                raise Interrupted(
                    task_id, cp, str(self.layout.root), resume_command(task_id, self.layout.root)
                ) from None
            except Exception as exc:  # an agent the task cannot go on without failed
                values = self._lead_failed(graph, config, ctx, task_id, exc)
            else:
                values = graph.get_state(config).values
        finally:
            if saver is not self.checkpointer:
                saver.conn.close()
            store.close()
        result = self._result(values, ctx, source=source, warnings=warnings or [])
        if result.status != "failed":
            self.tasks.note(task_id, status=result.status, error=None)
        self._emit(
            "finish",
            **{
                k: v
                for k, v in result.to_dict().items()
                if k in ("task_id", "status", "plan", "memory_dir")
            },
            findings=len(result.findings),
            snapshots=result.snapshots,
            checkpoints=len(result.checkpoints),
        )
        return result

    def _lead_failed(
        self, graph: Any, config: dict, ctx: Any, task_id: str, exc: Exception
    ) -> dict:
        """The state of a run stopped by a failure outside the subagents (the lead's model
        failed after its retries): recorded as `failed` in a checkpoint and the task record."""
        from orchestrator.errors import ModelCallError
        from orchestrator.nodes._core import write_checkpoint

        if not isinstance(exc, ModelCallError):
            raise exc
        error = str(exc)
        values = dict(graph.get_state(config).values)
        tokens = dict(values.get("tokens") or {})
        spent = int(getattr(exc, "tokens", 0) or 0)
        if spent:
            tokens["lead"] = tokens.get("lead", 0) + spent
        values.update(
            status="failed",
            failed={**(values.get("failed") or {}), "lead": {"agent": "lead", "error": error}},
            tokens=tokens,
        )
        if values.get("task_id"):
            write_checkpoint(
                ctx, values, trigger="failed", next_action=f"Resume the task ({error[:200]})"
            )
        self.tasks.note(task_id, status="failed", error=error[:500])
        ctx.emit("failed", task_id=task_id, failed=["lead"], error=error)
        return values

    def _result(self, values: dict, ctx: Any, *, source: str, warnings: list[str]) -> RunResult:
        from orchestrator.checkpoints import list_checkpoints

        task_id = values["task_id"]
        findings = values.get("findings") or {}
        plan = self.layout.plan(task_id)
        return RunResult(
            task_id=task_id,
            status=values.get("status", "running"),
            memory_dir=str(self.layout.root),
            phases=list(values["phases"]),
            phase=values["phases"][values["phase_index"]],
            plan=self.layout.relative(plan) if plan.exists() else None,
            findings=sorted(v["path"] for v in findings.values()),
            merged=dict(values.get("merged") or {}),
            checkpoints=[self.layout.relative(p) for p in list_checkpoints(self.layout, task_id)],
            snapshots=list(values.get("snapshots") or []),
            failed=dict(values.get("failed") or {}),
            tokens=dict(values.get("tokens") or {}),
            lead_calls=list(values.get("lead_calls") or []),
            final_summary=values.get("final_summary"),
            model=ctx.model_name,
            offline=ctx.offline,
            source=source,
            warnings=warnings,
        )

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
            Interrupted: Ctrl-C again (resume again).
        """
        self._check_writable("resume a task")

        if from_checkpoint and from_snapshot:
            raise OrchestratorUserError("give --from-checkpoint or --from-snapshot, not both")
        snap = None
        if from_snapshot:
            from orchestrator.artifacts import read_snapshot

            snap = read_snapshot(Path(from_snapshot))
            task_id = task_id or snap.get("task_id")
        if from_checkpoint:
            from orchestrator.checkpoints import load_checkpoint

            cp_task = load_checkpoint(Path(from_checkpoint)).task_id
            if task_id and task_id != cp_task:
                raise OrchestratorUserError(
                    f"checkpoint {from_checkpoint!r} belongs to task {cp_task!r}, "
                    f"not {task_id!r}; drop --task or pass that task's checkpoint"
                )
            task_id = cp_task
        record = self._known_or_snapshot(task_id, snap)
        with task_lock(self.layout, record["task_id"], self.checkpointer):
            return self._resume(record, snap, from_checkpoint)

    def _resume(self, record: dict, snap: dict | None, from_checkpoint: str | None) -> RunResult:
        from memory.store import MemoryStore
        from orchestrator import recovery

        task_id = record["task_id"]
        workflow = (
            self._load_workflow(record["workflow"])
            if record.get("workflow") and not self.workflow_path
            else self.workflow
        )
        if record.get("workdir"):
            from orchestrator.workdir import check_workdir

            check_workdir(record["workdir"])  # moved or deleted since the run started?
        resolved = self._resolve_model(workflow, record)
        self._agent_models(workflow)
        plan = self._recovery_plan(record, snap, from_checkpoint, workflow)
        store = MemoryStore(self.layout.root)
        thread = record.get("thread_id") or task_id
        if plan["state"] is not None:
            thread = f"{task_id}~{secrets.token_hex(3)}"
            self.tasks.note(task_id, thread_id=thread)
        ctx = self._context(store, workflow, resolved, thread, record)
        self._emit("model", name=resolved.name, offline=resolved.offline)
        for warning in plan["warnings"]:
            self._emit("warning", message=warning)
        self._emit(
            "resume",
            task_id=task_id,
            source=plan["source"],
            path=plan.get("path"),
            memory_dir=str(self.layout.root),
            model=resolved.name,
            offline=resolved.offline,
        )
        state = recovery.normalise(plan["state"]) if plan["state"] is not None else None
        return self._drive(
            store, ctx, state, task_id, source=plan["source"], warnings=plan["warnings"]
        )

    def _known_or_snapshot(self, task_id: str | None, snap: dict | None) -> dict[str, Any]:
        if snap is None:
            return self.task_record(task_id)
        try:
            return self.task_record(task_id)
        except UnknownTaskError:  # a snapshot from elsewhere starts the task here
            extra = snap.get("extra") or {}
            record = {
                "task_id": task_id,
                "objective": extra.get("objective"),
                "workdir": extra.get("workdir") or str(Path(self.workdir or ".")),
                "thread_id": task_id,
            }
            self.tasks.note(**record)
            return record

    def _langgraph_values(self, thread_id: str) -> tuple[dict, bool] | None:
        """`(values, finished)` of LangGraph's saved state for `thread_id`, if any."""
        from orchestrator.graph import compile_graph, open_saver
        from orchestrator.paths import langgraph_db

        db = langgraph_db(self.layout)
        if self.checkpointer is None and not db.exists():
            return None
        try:
            saver = self.checkpointer or open_saver(db, read_only=not os.access(db.parent, os.W_OK))
        except sqlite3.DatabaseError:
            return None  # the JSON checkpoints are read instead
        try:
            snapshot = compile_graph(saver).get_state({"configurable": {"thread_id": thread_id}})
        except Exception:  # a damaged database falls back to the JSON checkpoints
            return None
        finally:
            if saver is not self.checkpointer:
                saver.conn.close()
        if not snapshot.values:
            return None
        return dict(snapshot.values), not snapshot.next

    def _recovery_plan(
        self, record: dict, snap: dict | None, from_checkpoint: str | None, workflow: Any
    ) -> dict[str, Any]:
        from orchestrator import checkpoints, recovery

        task_id = record["task_id"]
        saved = self._langgraph_values(record.get("thread_id") or task_id)
        if snap is not None and saved is not None and saved[1] and not saved[0].get("failed"):
            return {  # a finished task: a snapshot would only plan its last phase again
                "source": "langgraph",
                "path": None,
                "warnings": [f"task {task_id!r} is already done; nothing to resume"],
                "state": None,
            }
        if snap is not None:
            missing = recovery.missing_findings(self.layout, snap)
            return {
                "source": "snapshot",
                "path": snap["path"],
                "warnings": [
                    f"findings {p!r} of subtask {k!r} named by the snapshot are not in "
                    f"{str(self.layout.root)!r}; the subtask runs again to restore them"
                    for k, p in missing.items()
                ],
                "state": recovery.state_from_snapshot(self.layout, snap),
            }
        if from_checkpoint:
            cp = checkpoints.load_checkpoint(Path(from_checkpoint))
            return {
                "source": "checkpoint",
                "path": str(from_checkpoint),
                "warnings": [],
                "state": recovery.state_from_checkpoint(self.layout, cp),
            }
        if saved is not None:
            values, finished = saved
            if finished and values.get("failed"):
                return {
                    "source": "langgraph",
                    "path": None,
                    "warnings": [],
                    "retry": True,
                    "state": recovery.retry_failed(values),
                }
            return {"source": "langgraph", "path": None, "warnings": [], "state": None}
        try:
            cp, path, warnings = checkpoints.latest_valid_checkpoint(self.layout, task_id)
        except RecoveryError as exc:
            snaps = recovery.task_snapshots(self.layout, task_id)
            if not snaps:
                plan = self._restart_plan(record, workflow)
                if checkpoints.list_checkpoints(self.layout):
                    plan["warnings"].insert(0, str(exc).split(";")[0])
                return plan
            from orchestrator.artifacts import read_snapshot

            snap = read_snapshot(snaps[0])
            return {
                "source": "snapshot",
                "path": str(snaps[0]),
                "warnings": [],
                "state": recovery.state_from_snapshot(self.layout, snap),
            }
        return {
            "source": "checkpoint",
            "path": str(path),
            "warnings": warnings,
            "state": recovery.state_from_checkpoint(self.layout, cp),
        }

    def _restart_plan(self, record: dict, workflow: Any) -> dict[str, Any]:
        """Killed before anything durable: start the recorded task again from the top."""
        from orchestrator.state import initial_state

        if not record.get("objective"):
            raise RecoveryError(
                f"task {record['task_id']!r} has no LangGraph state, checkpoint or snapshot "
                "to resume from; start it again with `orchestrator run`"
            )
        phases = list(workflow.phases)
        state = initial_state(
            task_id=record["task_id"],
            objective=record["objective"],
            workdir=record.get("workdir") or ".",
            phases=phases,
        )
        return {
            "source": "restart",
            "path": None,
            "state": state,
            "warnings": [
                "no usable LangGraph state, checkpoint or snapshot; the task starts again "
                "from its first phase, and subtasks whose findings files exist are not rerun"
            ],
        }

    # -- handoff and status ----------------------------------------------------------
    def current_state(self, task_id: str | None = None) -> tuple[dict[str, Any], str]:
        """The task's latest state and where it came from (`langgraph` or `checkpoint`)."""
        from orchestrator import checkpoints, recovery

        record = self.task_record(task_id)
        saved = self._langgraph_values(record.get("thread_id") or record["task_id"])
        if saved is not None:
            return saved[0], "langgraph"
        cp, _path, _warnings = checkpoints.latest_valid_checkpoint(self.layout, record["task_id"])
        return recovery.state_from_checkpoint(self.layout, cp), "checkpoint"

    def handoff(self, task_id: str | None = None) -> Path:
        """Write a context snapshot of the task's current state; returns its path."""
        from memory.store import MemoryStore
        from orchestrator.nodes._snapshot import write_lead_snapshot

        self._check_writable("write a handoff snapshot")
        state, _source = self.current_state(task_id)
        store = MemoryStore(self.layout.root)
        try:
            record = self.task_record(state["task_id"])
            ctx = self._context(store, self.workflow, None, "", record)
            return write_lead_snapshot(ctx, state, reason="manual")
        finally:
            store.close()

    def checkpoint_now(self, task_id: str | None = None, notes: str = "") -> Path:
        """Write a manual checkpoint of the task's current state; returns its path."""
        from memory.store import MemoryStore
        from orchestrator.nodes._core import write_checkpoint

        state, _source = self.current_state(task_id)
        store = MemoryStore(self.layout.root)
        try:
            ctx = self._context(store, self.workflow, None, "", self.task_record(state["task_id"]))
            rel = write_checkpoint(
                ctx,
                state,
                trigger="manual",
                next_action=(
                    "Task complete; nothing to do"
                    if state.get("status") == "done"
                    else f"Resume with `{resume_command(state['task_id'], self.layout.root)}`"
                ),
                extra={"notes": notes},
            )
            return self.layout.root / rel
        finally:
            store.close()

    def status(self, task_id: str | None = None) -> dict[str, Any]:
        """A JSON-able summary of the task: phase, subtasks, tokens, latest files."""
        from orchestrator.artifacts import list_snapshots
        from orchestrator.checkpoints import list_checkpoints
        from orchestrator.gauge import total_tokens
        from orchestrator.state import current_phase

        state, source = self.current_state(task_id)
        task = state["task_id"]
        findings, failed = state.get("findings") or {}, state.get("failed") or {}
        recorded = self.task_record(task)
        status = state.get("status", "running")
        if status == "running" and recorded.get("status") == "failed":
            status = "failed"
            failed = {**failed, "lead": {"error": recorded.get("error")}}
        if status == "running" and not task_running(self.layout, task):
            status = "interrupted"
        subtasks = {
            k: {
                "agent": v.get("agent"),
                "title": v.get("title"),
                "phase": v.get("phase"),
                "state": "done" if k in findings else "failed" if k in failed else "pending",
            }
            for k, v in sorted(
                (state.get("subtasks") or {}).items(), key=lambda kv: _phase_order(state, kv)
            )
        }
        cps = list_checkpoints(self.layout, task)
        snaps = [
            p
            for p in list_snapshots(self.layout)
            if self.layout.relative(p) in set(state.get("snapshots") or [])
        ]
        plan = self.layout.plan(task)
        return {
            "task_id": task,
            "objective": state["objective"],
            "status": status,
            "source": source,
            "errors": {k: v.get("error") for k, v in sorted(failed.items())},
            "resume": None if status == "done" else resume_command(task, self.layout.root),
            "phase": current_phase(state),
            "phase_number": state["phase_index"] + 1,  # 1-based, as shown to people
            "phases": list(state["phases"]),
            "subtasks": subtasks,
            "findings": len(findings),
            "failed": sorted(failed),
            "tokens": {
                "total": total_tokens(state.get("tokens")),
                **dict(state.get("tokens") or {}),
            },
            "plan": str(plan) if plan.exists() else None,
            "latest_checkpoint": str(cps[0]) if cps else None,
            "latest_snapshot": str(snaps[0]) if snaps else None,
            "memory_dir": str(self.layout.root),
        }


def _phase_order(state: dict, item: tuple[str, dict]) -> tuple[int, str]:
    """Sort key of a subtask: its phase's position in the workflow, then its key."""
    key, subtask = item
    phases = list(state.get("phases") or [])
    phase = subtask.get("phase") or key.split("/", 1)[0]
    return (phases.index(phase) if phase in phases else len(phases), key)
