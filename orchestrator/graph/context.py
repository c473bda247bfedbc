"""`RunContext`: what the nodes need that is not state (store, model, workflow, callbacks).

LangGraph hands it to every node as `runtime.context` (the graph is built with
`context_schema=RunContext`), including the subagent nodes started by `Send`. Nothing in
here is checkpointed: on resume the API builds a new `RunContext` from the same options,
and the state carries everything that must survive.

Thread safety: subagents run in parallel threads; the memory store hands out one SQLite
connection per thread, tool lists are built once per run under a lock (tools are
stateless), and `emit` is serialised by the same lock.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.tools import BaseTool

from memory.facts.tools import memory_tools
from memory.store import MemoryStore
from orchestrator.agents.budget import BudgetMiddleware, TokenBudget
from orchestrator.agents.chat_models import ResolvedModel, effective_threshold
from orchestrator.agents.gauge import UsageRatio
from orchestrator.agents.remote import RemoteRuns
from orchestrator.artifacts.documents import Docs
from orchestrator.artifacts.finding import FindingRecord
from orchestrator.artifacts.findings import read_findings
from orchestrator.artifacts.registry import Keys, Status, registry_note, registry_records
from orchestrator.artifacts.usage import CallRecorder, UsageJournal, usage_path
from orchestrator.config.defaults import TOKEN_THRESHOLD, WARNING_RATIO
from orchestrator.config.settings import Settings
from orchestrator.config.skills import (
    Triggers,
    discover_skills,
    external_memory_triggers,
    skills_index,
)
from orchestrator.config.workflow import DEFAULT_TOOLS, WRITE_TOOLS, AgentSpec, Workflow
from orchestrator.errors import ArtifactError, WorkflowError
from orchestrator.events import Event, build_event
from orchestrator.graph.tracing import Tracing
from orchestrator.tools.assembly import run_files
from orchestrator.tools.call_keys import ToolCallKeys
from orchestrator.tools.skill_tool import skill_tool
from orchestrator.tools.toolbox import DEFAULT_TOOL_TIMEOUT, Toolbox
from orchestrator.tools.workdir import workdir_tools
from orchestrator.tools.workdir_write import WriteScope, write_tools

#: The lead's tools unless the workflow defines an agent named `lead`.
LEAD_TOOLS = ("list_files", "read_file", "grep_files", "recall_memory")


@dataclass
class RunContext:
    """The non-serialisable side of a run."""

    store: MemoryStore
    """The memory directory's store."""
    workflow: Workflow
    """Phases, agents and thresholds of the run."""
    model: BaseChatModel | None
    """The lead's chat model; None for a context that only writes files (handoff,
    manual checkpoint)."""
    model_name: str = "offline"
    offline: bool = True
    token_threshold: int = TOKEN_THRESHOLD
    warning_ratio: float = WARNING_RATIO
    max_parallel: int = 4
    max_subtasks: int | None = None
    """Upper bound on a wave's subtasks (None: the workflow's, else 4)."""
    max_waves: int = 50
    """Upper bound on a phase's waves (`Settings.max_waves`)."""
    skills_index: str = ""
    """Every skill as `- name: description` lines (the lead's index)."""
    skills: dict[str, str] = field(default_factory=dict)
    """Every skill's description by name (an agent sees those its spec names)."""
    thread_id: str = ""
    project_dir: str = "."
    on_event: Callable[[Event], None] | None = None
    agent_models: dict[str, BaseChatModel] = field(default_factory=dict)
    """Chat models for workflow agents that name their own model."""
    triggers: Triggers = field(default_factory=Triggers)
    """When checkpoints are written (the external-memory skill's `triggers`)."""
    toolbox: Toolbox = field(default_factory=Toolbox)
    """The user's tools (Python and MCP) the agents may name."""
    prompts: dict[str, str] = field(default_factory=dict)
    """Each workflow agent's own prompt text (`prompt` or `prompt_file`)."""
    tool_timeout: float = DEFAULT_TOOL_TIMEOUT
    """Seconds a call of one of the user's tools may take."""
    tool_result_tokens: int | None = None
    """Tool results above this many (provider) tokens go to a memory entry (None: 10% of
    the model's context window, else 8,000)."""
    usage: UsageRatio = field(default_factory=UsageRatio)
    """Provider-reported tokens per estimated token, seen so far in this run."""
    status_file: bool = False
    """Refresh the workdir's STATUS.md after each phase (`--status-file`, or the
    workflow's `status_file`); otherwise the run writes nothing in the workdir."""
    new_task: bool = False
    """The task started in this run (`Orchestrator.run`): nothing of it can be on disk
    from before, so a subagent does not look for an earlier attempt's findings. Any
    other run (resume, server) looks."""
    checkpointer: Any = None
    """The run's LangGraph checkpointer (set by `orchestrator.graph.build.run_graph`), which
    `advance` prunes at a phase transition (`orchestrator.graph.pruning`); None under LangGraph
    Server, whose checkpointer is its own."""
    budget: TokenBudget = field(default_factory=TokenBudget)
    """The task's token budget and its spend (`orchestrator.agents.budget`); `run_graph`
    starts the spend at what the task spent before this run."""
    journal: UsageJournal | None = None
    """The task's usage journal (`orchestrator.artifacts.usage`), opened by `run_graph`:
    every model call of its agents is recorded there; None under LangGraph Server."""
    remote: RemoteRuns = field(default_factory=RemoteRuns)
    """The remote agents' servers (`orchestrator.agents.remote.RemoteAgent`) and their runs
    in flight; reaching a server is bounded by the model timeout."""
    attempted: set[str] = field(default_factory=set)
    """The subtask keys whose agent this run started (a failure of any other key is one
    an earlier run left: `Orchestrator.resume` retries it)."""
    stop: threading.Event = field(default_factory=threading.Event, repr=False)
    """Set by Ctrl-C (`orchestrator.graph.build.run_graph`): agents in worker threads stop
    before their next model call, and subagents not started yet do not start."""
    tracing: Tracing | None = None
    """The run's OpenTelemetry spans (`orchestrator.graph.tracing`); None: not traced."""
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _cache: dict[Any, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def build(
        cls,
        settings: Settings,
        *,
        store: MemoryStore,
        workflow: Workflow,
        resolved: ResolvedModel | None,
        thread_id: str,
        project_dir: str,
        on_event: Callable[[Event], None] | None = None,
        toolbox: Toolbox | None = None,
        agent_models: dict[str, BaseChatModel] | None = None,
        record: dict[str, Any] | None = None,
        tracing: Tracing | None = None,
    ) -> RunContext:
        """The run context of a run of `workflow` with `settings` (`resolved` None: a
        context that only writes files, no model calls), the project's skills and the
        external-memory skill's triggers read from `project_dir`."""
        model = resolved.model if resolved else None
        skills = discover_skills(project_dir)
        _check_agent_skills(workflow, {s.name for s in skills})
        return cls(
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
            skills_index=skills_index(skills),
            skills={s.name: s.description for s in skills},
            triggers=external_memory_triggers(project_dir),
            thread_id=thread_id,
            project_dir=project_dir,
            on_event=on_event,
            agent_models=agent_models or {},
            max_subtasks=settings.max_subtasks,
            max_waves=settings.max_waves,
            status_file=settings.status_file,
            budget=TokenBudget(
                settings.budget_tokens, int((record or {}).get("spent_tokens") or 0)
            ),
            remote=RemoteRuns(settings.model_timeout),
            tracing=tracing,
        )

    def skills_for(self, agent: str, *, lead: bool = False) -> str:
        """The skills index `agent` sees: every skill for the lead, else the skills its
        spec names (none by default)."""
        if lead:
            return self.skills_index
        return "\n".join(f"- {n}: {self.skills[n]}" for n in self.skill_names(agent))

    def skill_names(self, agent: str) -> list[str]:
        """The skills a (non-lead) agent's spec names that exist, in its order."""
        spec = self.agent_spec(agent)
        return [n for n in (spec.skills if spec is not None else []) if n in self.skills]

    def calls(self, agent: str, key: str, phase: str) -> CallRecorder | None:
        """What agent `agent` (state key `key`) records its model calls with, in `phase`
        (None without a journal)."""
        return self.journal.recorder(agent, key, phase) if self.journal is not None else None

    def open_journal(self, task_id: str) -> UsageJournal:
        """Open the task's usage journal; the budget's figure is then the journal's (plus,
        for a task begun before journals, what its state says it spent before)."""
        if self.journal is None or self.journal.rel != usage_path(task_id):
            self.journal = UsageJournal(self.docs, task_id)
            if self.journal.existed:
                self.budget.spent = 0
            self.budget.journal = self.journal
        return self.journal

    def budget_middleware(self, who: str) -> list[Any]:
        """The middleware that keeps `who`'s model calls within the task's token budget
        (none without a budget)."""
        return [BudgetMiddleware(self.budget, who)] if self.budget.limit else []

    def trace_middleware(self, agent: str, key: str | None = None) -> list[Any]:
        """The middleware that traces `agent`'s model and tool calls (a subagent: of
        subtask `key`); none when the run is not traced."""
        return [self.tracing.middleware(agent, key)] if self.tracing is not None else []

    @property
    def docs(self) -> Docs:
        """The memory's documents (plans, findings, snapshots, checkpoints, registry)."""
        docs = self._cache.get("docs")
        if docs is None:
            docs = self._cache["docs"] = Docs(self.store.backend)
        return docs

    def emit(self, event: str, **fields: Any) -> None:
        """Send one progress event to the view; a broken view never raises into the graph.

        Raises:
            EventError: an unknown kind or fields that do not match its model
                (`orchestrator.events`), checked with or without a view.
        """
        built = build_event(event, **fields)
        if self.on_event is None:
            return
        with self._lock:
            try:
                self.on_event(built)
            except Exception:  # a broken view must not break the run
                pass

    def model_for(self, agent: str) -> BaseChatModel | None:
        """The agent's own model (named in the workflow), else the run's."""
        return self.agent_models.get(agent, self.model)

    def agent_spec(self, agent: str) -> AgentSpec | None:
        """The workflow's spec of `agent` (None for the lead, unless the workflow has one)."""
        return self.workflow.agents.get(agent)

    def _cached(self, key: Any, make: Callable[[], Any]) -> Any:
        """Tools and tool-bound models are stateless: build each once per run."""
        with self._lock:
            if key not in self._cache:
                self._cache[key] = make()
            return self._cache[key]

    def registry_record(self, task_id: str, key: str) -> dict[str, Any] | None:
        """`key`'s record in the task's artifact registry (`artifacts.registry`), or None.

        The registry is read once per run: a run holds the task's run lock, so only this
        process appends to it meanwhile, and the lines it appends are noted here too
        (`registry_noted`). Before, every subagent of a resume read the registry's new lines.
        """
        with self._lock:
            records = self._cache.get(("registry", task_id))
            if records is None:
                records = {k: dict(v) for k, v in registry_records(self.docs, task_id).items()}
                self._cache[("registry", task_id)] = records
            found = records.get(key)
            return dict(found) if found is not None else None

    def note(self, task_id: str, key: str, status: Status, /, **fields: Any) -> None:
        """Note `fields` in `key`'s registry record (`registry_note`), durably, and keep
        them for this run's lookups."""
        registry_note(self.docs, task_id, key, status, **fields)
        self.registry_noted(task_id, key, fields)

    def registry_noted(self, task_id: str, key: str, fields: dict[str, Any]) -> None:
        """Keep a line this run appended to the registry for its later lookups."""
        with self._lock:
            records = self._cache.get(("registry", task_id))
            if records is not None:
                records[key] = {**records.get(key, {}), "key": key, **fields}

    def finding(self, task_id: str, key: str, ref: Mapping[str, Any]) -> FindingRecord:
        """The whole finding of subtask `key` from its state reference (`FindingRef`):
        texts from the artifact registry, else from its findings file."""
        docs = self.docs

        def read_file(path: str) -> dict[str, Any] | None:
            try:
                return read_findings(docs.path(path), docs)
            except (ArtifactError, OSError):
                return None

        recorded = self.registry_record(task_id, Keys.findings(key))
        return FindingRecord.expand(key, ref, recorded, read_file)

    def remember_lead_context(self, state: dict[str, Any], tokens: int) -> None:
        """Keep the monitor's measure of the lead's context for the rest of this phase."""
        self._cache["lead context"] = (state["task_id"], state["phase_index"], tokens)

    def lead_context_measured(self, state: dict[str, Any]) -> int | None:
        """The monitor's measure of the lead's context in this phase (None: not in this
        process, e.g. a resume that starts after the monitor; then measure again)."""
        kept = self._cache.get("lead context")
        if kept is None or kept[:2] != (state["task_id"], state["phase_index"]):
            return None
        return kept[2]

    def workdir_tools(self, workdir: str) -> list[BaseTool]:
        secrets = self.workflow.secret_files
        return list(
            self._cached(("workdir", workdir), lambda: list(workdir_tools(Path(workdir), secrets)))
        )

    def memory_tools(self, task_id: str) -> list[BaseTool]:
        """`recall_memory` and the `memory_*` tools of `memory.facts.tools`."""
        return list(
            self._cached(
                ("memory", task_id), lambda: list(memory_tools(self.store, task_id=task_id))
            )
        )

    def write_tools(self, workdir: str, scope: WriteScope | None = None) -> list[BaseTool]:
        """`write_file` and `edit_file` over `workdir` for `scope` (the task, agent and
        subtask writing); nothing under the memory, nor what the run itself reads and
        executes (`tools.assembly.run_files`), is written."""
        root = getattr(self.store.backend, "root", None)
        protected = [Path(root)] if root is not None else []
        guarded = self._cached("run files", lambda: run_files(self.workflow, self.project_dir))
        return write_tools(
            workdir, self.store, protected, guarded=guarded, scope=scope,
            secret_files=self.workflow.secret_files,
        )  # fmt: skip

    def tool_names(self, agent: str, *, lead: bool) -> list[str]:
        """The tool names `agent` works with: its spec's (`mcp:SERVER` expanded), else the
        defaults (the lead: the read tools and `recall_memory`)."""
        spec = self.agent_spec(agent)
        if spec is None:
            return list(LEAD_TOOLS if lead else DEFAULT_TOOLS)
        return self.toolbox.expand(spec.tools, agent)

    def call_keys(self, agent: str, task_id: str, scope: str, *, lead: bool) -> list[Any]:
        """The idempotency keys of `agent`'s calls of the user's tools
        (`orchestrator.tools.call_keys`), in `scope`; nothing when it has none."""
        user = [n for n in self.tool_names(agent, lead=lead) if n in self.toolbox.tools]
        return [ToolCallKeys(self.docs, task_id, scope, user)] if user else []

    def tools_for(
        self, agent: str, task_id: str, workdir: str, *, lead: bool, key: str = ""
    ) -> list[BaseTool]:
        """The agent's tools, in the order its spec names them (see `tool_names`).

        tether's tools are built for the task's workdir and memory; the write tools only
        when the agent lists them (for subtask `key`); the user's tools come from the run's
        `toolbox`.
        """
        names = self.tool_names(agent, lead=lead)
        builtin = {t.name: t for t in self.workdir_tools(workdir)}
        if any(n in WRITE_TOOLS for n in names):
            scope = WriteScope(task_id, agent, key)
            builtin.update((t.name, t) for t in self.write_tools(workdir, scope))
        builtin.update((t.name, t) for t in self.memory_tools(task_id))
        tools = [builtin[n] if n in builtin else self.toolbox.tools[n] for n in names]
        skills = [] if lead else self.skill_names(agent)  # the lead has its index only
        if skills and "read_skill" not in names:  # an agent with skills reads them on demand
            tools.append(skill_tool(skills, self.project_dir))
        return tools


def _check_agent_skills(workflow: Workflow, known: set[str]) -> None:
    """Every skill an agent's spec names exists (one `WorkflowError` line otherwise)."""
    for name, spec in sorted(workflow.agents.items()):
        unknown = [s for s in spec.skills if s not in known]
        if unknown:
            raise WorkflowError(
                f"agent {name!r} names unknown skill {unknown[0]!r}; available: "
                f"{', '.join(sorted(known)) or 'none'}"
            )
