"""tether's graph for LangGraph Server (`langgraph.json` -> `make_graph`).

::

    START ─► start ─► tether ─► END
                        └─ runs `build_graph()` as a subgraph with a real `RunContext`

LangGraph Server hands a run three things: the input (JSON), the context (JSON) and the
config. tether's nodes need a `RunContext` holding live objects (the memory store, the
chat model, the workflow), which no JSON request can carry. So the served graph is a thin
outer graph whose context is plain options (`ServeOptions`) and whose two nodes build
everything else through the same constructors `Orchestrator.run` uses:

* `start` validates the input and options, picks the task id, records the task in the
  memory's task records (`orchestrator.artifacts.tasks`) and creates its working memory, then writes
  the initial `OrchestratorState` into the outer state (checkpointed by the server before
  `tether` starts, so a retried run keeps the same task id);
* `tether` gets the task's `RunContext` from `Orchestrator.open_task` (progress events go
  to the run's `custom` stream) and runs tether's own graph as a subgraph. The subgraph uses
  the server's checkpointer (in-memory under `langgraph dev`, Postgres on a deployment),
  so every super-step of the task is durable there; the files it writes are the same as
  under `orchestrator run`, and the JSON checkpoints make `orchestrator status` and
  `orchestrator resume` work on a served task too.

Where each option comes from, first match wins: the run's input (`objective`, `task_id`,
`start_phase`, `workdir`), the run's context (`ServeOptions`), the assistant's
`configurable`; these are the `Orchestrator` arguments, so the rest comes from
`orchestrator.config.settings` as for any run (`$TETHER_MEMORY_URL`, `$TETHER_MEMORY_DIR`,
`$TETHER_MODEL`, the workflow's, the offline model). With `memory_url` (a deployment's
PostgreSQL) the task's documents live there, beside the server's own graph state, and no
memory directory is written.

**`tether_subagent`** (`make_subagent_graph`) runs one tether subagent, so a workflow's
agent can be `remote: {url: ..., graph: tether_subagent}` and one task's subagents run on
the workers of a LangGraph Server deployment, all on the task's PostgreSQL memory. Its input
is the subagent's payload (`SubagentPayload`, as `Send` hands it to a local subagent) with
the task's model, project folder and the time the task was recorded (`ServedSubagentInput`);
its output is the finding's reference (`FindingRef`) and what the subagent spent. The server's
memory is `$TETHER_MEMORY_URL` (PostgreSQL): a payload whose task is not recorded there, at
that time, is refused with one line before anything starts; an input `{"probe": true}` runs
nothing and answers which memory that is (`memory`), which a lead asks before its task
starts (`orchestrator.graph.remote.check_served_memory`). The subagent is
`orchestrator.graph.nodes.subagent.run_subagent` in a context of the task's own
(`Orchestrator.subagent_context`: its workflow, every agent local), so its findings land in
the shared memory exactly once through the artifact registry, as a local subagent's do, also
when the server runs it again after a worker died; a subagent that fails ends the run with
its error.

Invariant: the outer state is `OrchestratorState` plus the input fields, all plain JSON.
"""

from __future__ import annotations

from typing import Any, Required

from langchain_core.runnables import RunnableConfig
from langgraph.config import get_stream_writer
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from typing_extensions import TypedDict  # pydantic (server schemas) needs it on 3.11

from memory.backends import backend_for, is_shared, shared_url_forms
from memory.backends.urls import ENV_URL, redact, resolve_url
from memory.contract.capabilities import KnowsIdentity
from memory.errors import NoTablesError
from orchestrator.api import Orchestrator
from orchestrator.config.workflow import TETHER_SUBAGENT_GRAPH
from orchestrator.errors import OrchestratorUserError, RemoteAgentError, UnknownTaskError
from orchestrator.events import build_event
from orchestrator.graph.build import DURABILITY, compile_graph
from orchestrator.graph.nodes.subagent import run_subagent
from orchestrator.state import OrchestratorState
from orchestrator.types import FindingRef, SubagentPayload

GRAPH_ID = "tether"

#: Options a run may set through its context (or the assistant's `configurable`).
OPTION_KEYS = (
    "memory_url",
    "memory_dir",
    "workdir",
    "workflow",
    "model",
    "token_threshold",
    "max_parallel",
    "max_subtasks",
    "max_waves",
    "project_dir",
)


class ServeInput(TypedDict, total=False):
    """What a client sends as the run's input."""

    objective: Required[str]
    """What the task should achieve."""
    task_id: str
    """Task id (default: made from the objective)."""
    start_phase: str
    """Workflow phase to start at (default: the first)."""
    workdir: str
    """The project the agents read (overrides the context's)."""


class ServeOptions(TypedDict, total=False):
    """The run's context: where memory lives and how agents run (all optional)."""

    memory_url: str
    """A shared memory's URL (PostgreSQL): the task's memory instead of a memory directory."""
    memory_dir: str
    workdir: str
    workflow: str
    model: str
    """`provider:model` or `offline`."""
    token_threshold: int
    max_parallel: int
    max_subtasks: int
    max_waves: int
    project_dir: str
    """Where the project's `templates/`, `skills/` and relative workflow paths are."""


class ServeState(OrchestratorState, total=False):
    """The outer graph's state: tether's state plus the input and the memory directory."""

    start_phase: str
    memory_dir: str


def run_options(state: dict[str, Any], context: Any, config: dict[str, Any]) -> dict[str, Any]:
    """The run's options: input, then context, then the assistant's `configurable`."""
    configurable = (config or {}).get("configurable") or {}
    options = {k: configurable[k] for k in OPTION_KEYS if configurable.get(k) is not None}
    if isinstance(context, dict):
        options.update({k: context[k] for k in OPTION_KEYS if context.get(k) is not None})
    if state.get("memory_dir") and "://" not in state["memory_dir"]:  # not a memory_url
        options["memory_dir"] = state["memory_dir"]
    if state.get("workdir"):
        options["workdir"] = state["workdir"]
    return options


def _orchestrator(options: dict[str, Any], on_event: Any = None) -> Orchestrator:
    """The run's orchestrator (close it: it may hold a PostgreSQL pool); the options are its
    arguments, over the environment and the workflow (`orchestrator.config.settings`)."""
    return Orchestrator(
        memory_url=options.get("memory_url"),
        memory_dir=options.get("memory_dir"),
        workdir=options.get("workdir") or ".",
        workflow=options.get("workflow"),
        model=options.get("model"),
        token_threshold=options.get("token_threshold"),
        max_parallel=options.get("max_parallel"),
        max_subtasks=options.get("max_subtasks"),
        max_waves=options.get("max_waves"),
        project_dir=options.get("project_dir"),
        on_event=on_event,
        trace=False,  # a served run has no opening and closing events to trace by
    )


def _writer() -> Any:
    """The run's `custom` stream writer (a no-op outside a streamed run)."""
    try:
        return get_stream_writer()
    except RuntimeError:
        return lambda _chunk: None


def start_node(
    state: ServeState, runtime: Runtime[ServeOptions], config: RunnableConfig
) -> dict[str, Any]:
    """Validate the input, record the task and return its initial state.

    A retried run (the server re-executes the graph after a worker died) finds the task
    already started in this thread's state and changes nothing.
    """
    if state.get("phases"):
        return {}
    options = run_options(state, runtime.context, config)
    with _orchestrator(options) as orch:
        start = orch.new_task(
            state.get("objective") or "",
            task_id=state.get("task_id"),
            start_phase=state.get("start_phase"),
            served=True,
        )
        return {**start, "memory_dir": orch.docs.location}


def tether_node(
    state: ServeState, runtime: Runtime[ServeOptions], config: RunnableConfig
) -> dict[str, Any]:
    """Run tether's graph for the task in `state`; returns its final state."""
    options = run_options(state, runtime.context, config)
    write = _writer()
    with _orchestrator(options, on_event=write) as orch:
        return _run(orch, state, write)


def _run(orch: Orchestrator, state: ServeState, write: Any) -> dict[str, Any]:
    inner_state = {k: v for k, v in state.items() if k in OrchestratorState.__annotations__}
    values: dict[str, Any] = dict(inner_state)
    with orch.open_task(state["task_id"]) as ctx:  # python_tools and MCP servers run
        graph = compile_graph()  # no checkpointer: the subgraph uses the server's
        sub_config = {"max_concurrency": ctx.max_parallel, "recursion_limit": 10_000}
        for chunk in graph.stream(
            inner_state, sub_config, context=ctx, durability=DURABILITY, stream_mode="values"
        ):
            values = dict(chunk)
    status = values.get("status")
    if status not in ("failed", "waiting"):  # those the graph records itself
        orch.tasks.note(state["task_id"], status=status, error=None, pending_approvals=[])
    write(
        build_event(
            "finish",
            task_id=values.get("task_id"),
            status=values.get("status"),
            memory_dir=orch.docs.location,
            findings=len(values.get("findings") or {}),
        )
    )
    return values


def build_serve_graph() -> Any:
    """The uncompiled outer graph (see the module docstring)."""
    graph = StateGraph(
        ServeState,
        context_schema=ServeOptions,
        input_schema=ServeInput,
        output_schema=OrchestratorState,
    )
    graph.add_node("start", start_node)
    graph.add_node("tether", tether_node)
    graph.add_edge(START, "start")
    graph.add_edge("start", "tether")
    graph.add_edge("tether", END)
    return graph


def make_graph() -> Any:
    """The graph factory named in `langgraph.json` (the server adds its checkpointer)."""
    graph = build_serve_graph().compile()
    graph.name = GRAPH_ID
    return graph


# -- tether_subagent: one subagent of a task on the servers' PostgreSQL memory ------------
class ServedSubagentInput(SubagentPayload, total=False):
    """A `tether_subagent` run's input: the subagent's payload, and the task's model, project
    folder and when it was recorded (`Orchestrator`'s task record, checked here)."""

    model: str | None
    project_dir: str | None
    task_created: str
    probe: bool
    """Only say which memory the server has (`memory`), run nothing: a lead asks it before
    its task starts (`orchestrator.graph.remote.check_served_memory`)."""


class ServedSubagentOutput(TypedDict, total=False):
    """What a `tether_subagent` run answers: the finding's reference and the spend."""

    key: str
    finding: FindingRef
    tokens: int
    """Prompt plus completion tokens the subagent spent."""
    usage: dict[str, int]
    """Its model calls and prompt tokens."""
    memory: str
    """The server's memory (`PostgresBackend.identity`), answered to a `probe`."""


class ServedSubagentState(ServedSubagentInput, ServedSubagentOutput, total=False):
    """The subagent graph's state: its input and its output."""


def _check_task(orch: Orchestrator, state: ServedSubagentState, url: str) -> None:
    """The payload's task must be this memory's task, recorded at the time it says."""
    task_id = state.get("task_id") or ""
    try:
        record = orch.task_record(task_id)
    except UnknownTaskError:
        record = None
    if record is None or str(record.get("created") or "") != str(state.get("task_created")):
        raise OrchestratorUserError(
            f"task {task_id!r} is not a task of this server's memory {redact(url)!r}; run the "
            f"task on the PostgreSQL memory the server's {ENV_URL} names"
        )


def served_subagent_node(state: ServedSubagentState) -> dict[str, Any]:
    """Run the payload's subagent against the server's memory; returns its finding's
    reference (the finding itself is in the memory).

    Raises:
        OrchestratorUserError: the server has no PostgreSQL memory, or not the task's.
        RemoteAgentError: the subagent failed (its error, one line).
    """
    url = resolve_url(None)
    if not is_shared(url):
        raise OrchestratorUserError(
            f"{TETHER_SUBAGENT_GRAPH} needs the tasks' shared memory: start the server "
            f"with {ENV_URL}={shared_url_forms()}"
        )
    if state.get("probe"):  # creates nothing: a memory without tether's tables is another
        try:
            with backend_for(url, setup=False) as backend:
                known = isinstance(backend, KnowsIdentity)
                return {"memory": backend.identity() if known else ""}
        except NoTablesError:
            return {"memory": f"{redact(url)}: no tether tables"}
    payload = SubagentPayload(**{k: state[k] for k in SubagentPayload.__annotations__})  # type: ignore[typeddict-item]
    with Orchestrator(
        memory_url=url,
        model=state.get("model") or None,
        workdir=payload["workdir"],
        project_dir=state.get("project_dir") or None,
        trace=False,
    ) as orch:
        _check_task(orch, state, url)
        with orch.subagent_context(payload["task_id"]) as ctx:
            out = run_subagent(ctx, payload)
    key = payload["key"]
    failed = (out.get("failed") or {}).get(key)
    if isinstance(failed, dict):
        raise RemoteAgentError(str(failed.get("error") or "the subagent failed"))
    agent_key = f"{payload['subtask']['agent']}:{key}"
    return {
        "key": key,
        "finding": out["findings"][key],
        "tokens": int((out.get("tokens") or {}).get(agent_key) or 0),
        "usage": dict((out.get("usage") or {}).get(agent_key) or {}),
    }


def make_subagent_graph() -> Any:
    """The `tether_subagent` graph factory named in `langgraph.json`."""
    graph = StateGraph(
        ServedSubagentState, input_schema=ServedSubagentInput, output_schema=ServedSubagentOutput
    )
    graph.add_node("subagent", served_subagent_node)
    graph.add_edge(START, "subagent")
    graph.add_edge("subagent", END)
    compiled = graph.compile()
    compiled.name = TETHER_SUBAGENT_GRAPH
    return compiled
