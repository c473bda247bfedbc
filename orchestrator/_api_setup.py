"""`Orchestrator`'s set-up: its settings, workflow, model, tools, store and events.

A mixin of `orchestrator.api.Orchestrator` (it uses the attributes `__init__` sets:
`overrides`, `workflow`, `project_dir`, `docs`, `tasks`, ...). Every option a run uses comes
from `settings_for` (`orchestrator.config.settings`), never from an attribute read on its own.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any, Self

from memory.store import MemoryStore
from orchestrator.agents.chat_models import (
    ResolvedModel,
    agent_models,
    effective_threshold,
    run_model,
)
from orchestrator.artifacts.names import utc
from orchestrator.artifacts.tasks import TaskInfo
from orchestrator.config.settings import Settings
from orchestrator.config.skills import discover_skills, external_memory_triggers, skills_index
from orchestrator.config.workflow import AgentSpec, Workflow
from orchestrator.events import build_event
from orchestrator.graph.context import RunContext
from orchestrator.state import OrchestratorState, current_phase
from orchestrator.tools.assembly import open_toolbox, run_workflow, task_workflow
from orchestrator.tools.toolbox import DEFAULT_TOOL_TIMEOUT, Toolbox


class SetupMixin:
    """What every verb of `Orchestrator` builds a run from."""

    # -- options ---------------------------------------------------------------------
    def _load_workflow(
        self, path: str | None, agents: dict[str, AgentSpec] | None = None
    ) -> Workflow:
        return run_workflow(path, self.project_dir, agents if agents is not None else self.agents)

    def _task_workflow(self, record: TaskInfo) -> Workflow:
        """The workflow a task runs with (see `orchestrator.tools.assembly.task_workflow`)."""
        if self.workflow_path:
            return self.workflow
        return task_workflow(record, self.project_dir, self.agents) or self.workflow

    def _toolbox(self, workflow: Workflow, record: TaskInfo | None = None) -> Any:
        """The run's user tools, checked (`orchestrator.tools.assembly.open_toolbox`)."""
        return open_toolbox(workflow, self.tools, self.project_dir, record)

    def _emit(self, event: str, **fields: Any) -> None:
        built = build_event(event, **fields)  # checked with or without a callback
        if self.on_event is not None:
            self.on_event(built)

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

    def _context(
        self,
        store: MemoryStore,
        workflow: Workflow,
        resolved: ResolvedModel | None,
        thread_id: str,
        record: TaskInfo | None = None,
        toolbox: Toolbox | None = None,
    ) -> RunContext:
        """The run context of the graph (`resolved` None: files only, no model calls)."""
        settings = self.settings_for(workflow, record)
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
            token_threshold=effective_threshold(settings.token_threshold, model),
            warning_ratio=settings.warning_ratio,
            max_parallel=settings.max_parallel,
            skills_index=skills_index(discover_skills(self.project_dir)),
            triggers=external_memory_triggers(self.project_dir),
            thread_id=thread_id,
            project_dir=self.project_dir,
            on_event=self.on_event,
            agent_models=self._agent_models(workflow) if resolved is not None else {},
            max_subtasks=settings.max_subtasks,
            status_file=settings.status_file,
        )

    def _agent_models(self, workflow: Workflow) -> dict[str, Any]:
        """Chat models of workflow agents that name their own (resolved once per run)."""
        if id(workflow) not in self._agent_model_cache:
            self._agent_model_cache[id(workflow)] = agent_models(workflow)
        return self._agent_model_cache[id(workflow)]

    def _resolve_model(self, workflow: Workflow, record: TaskInfo | None = None) -> ResolvedModel:
        recorded = (record or {}).get("model")
        by_name = isinstance(self.model_spec, str | None)
        settings = self.settings_for(workflow, record)
        resolved = run_model(
            settings.model if by_name else self.model_spec,
            settings.sources["model"],
            settings.model_timeout,
        )
        if record is not None and by_name and resolved.name != recorded:
            # the task sticks to its model; an explicit --model switch is recorded
            self.tasks.note(record["task_id"], model=resolved.name, model_before=recorded)
        return resolved

    def close(self) -> None:
        """Close the backend the orchestrator opened (its database connections), not one it
        was given."""
        if self._shared is not None and not self._borrowed:
            self._shared.close()
        if self._owned is not None:
            self._owned.close()

    def __enter__(self) -> Self:
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

    def _record_new(
        self,
        state: OrchestratorState,
        resolved: ResolvedModel,
        in_process_tools: list[str],
        **extra: Any,
    ) -> None:
        """Record a new task with the options it runs with (a resume uses them again)."""
        self.tasks.note(
            state["task_id"],
            objective=state["objective"],
            workdir=state["workdir"],
            phases=state["phases"],
            start_phase=current_phase(state),
            workflow=self.workflow_path,
            model=resolved.name if isinstance(self.model_spec, str | None) else None,
            model_source=resolved.source,
            token_threshold=self.overrides.token_threshold,
            max_parallel=self.overrides.max_parallel,
            max_subtasks=self.overrides.max_subtasks,
            thread_id=state["task_id"],
            project_dir=self.project_dir,
            created=utc().isoformat(),
            in_process_tools=in_process_tools,
            agents=(
                {k: v.model_dump(exclude_defaults=True) for k, v in self.agents.items()}
                if self.agents is not None
                else None
            ),
            **extra,
        )
