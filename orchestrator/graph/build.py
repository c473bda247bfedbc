"""The orchestrator graph: assembly, compilation and running.

::

    START ─► plan ─► approve ─► spawn ─Send×N─► subagent ─► merge ─► monitor ─► advance
                        │                └──── (nothing pending) ────► merge       │
                        └─ (plan rejected) ─► plan   plan (next phase) | answer ─► END ◄┘

`build_graph()` returns the uncompiled `StateGraph` so LangGraph Server (or a test) can
compile it with its own checkpointer; `compile_graph()` compiles it with the checkpointer it
is given: the memory backend's own (`backend.checkpointer()`: `SqliteSaver` on
`<memory root>/.langgraph/state.sqlite`, a hidden folder the index ignores, or LangGraph's
`PostgresSaver` beside a PostgreSQL memory), or one the caller injects
(`Orchestrator(checkpointer=...)`). Runs use
`durability="sync"`: each super-step is on disk before the next starts,
and the writes of subagents that finished inside an interrupted super-step are kept as
pending writes, so they are not run again on resume.

Every node is also idempotent on its own (see `orchestrator.graph.nodes`), so a state rebuilt
from a JSON checkpoint can enter at `plan` and only do what is left.

At each phase transition and when the task ends, the thread's superseded checkpoints are
pruned (`orchestrator.graph.pruning`, LangGraph's `keep_latest` rule), so the graph state stays
bounded by one phase, not the whole run.

A run that stops at an `interrupt` (a tool call or a phase plan waiting for approval,
`orchestrator.approvals`) ends `waiting`: a `waiting` checkpoint names the requests, the
task record says `waiting`, and `run_graph` with a `Command(resume=...)` continues it.
"""

from __future__ import annotations

import contextlib
import functools
import signal
import sqlite3
import threading
from collections.abc import Iterator
from typing import Any, NamedTuple

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command

from memory.backends.urls import redact_text
from memory.contract.capabilities import HoldsGraphState
from memory.errors import describe_sqlite_damage, is_sqlite_damage
from orchestrator.agents.budget import BudgetReached
from orchestrator.approvals import pending
from orchestrator.artifacts.documents import Docs
from orchestrator.artifacts.tasks import TaskList, resume_command
from orchestrator.errors import Interrupted, ModelCallError, OrchestratorRuntimeError, Terminated
from orchestrator.faults import fault
from orchestrator.graph.context import RunContext
from orchestrator.graph.nodes.advance import advance_node, route_advance
from orchestrator.graph.nodes.answer import answer_node
from orchestrator.graph.nodes.approve import approve_node, route_approve
from orchestrator.graph.nodes.merge import merge_node
from orchestrator.graph.nodes.monitor import monitor_node
from orchestrator.graph.nodes.plan import plan_node
from orchestrator.graph.nodes.spawn import route_spawn, spawn_node
from orchestrator.graph.nodes.subagent import subagent_node
from orchestrator.graph.pruning import prune_thread
from orchestrator.graph.writes import checkpoint_state, checkpoint_update
from orchestrator.state import OrchestratorState

DURABILITY = "sync"


class ThreadState(NamedTuple):
    """LangGraph's saved state of a thread (tether's own checkpoint state is
    `artifacts.checkpoint_model.CheckpointState`)."""

    values: dict[str, Any]
    finished: bool
    """True when no node is left to run (the task ended `done` or `failed`)."""
    interrupts: tuple[Any, ...] = ()
    """LangGraph's pending interrupts (requests waiting for approval)."""


def build_graph() -> StateGraph:
    """The uncompiled `StateGraph` of a tether run."""
    graph = StateGraph(OrchestratorState, context_schema=RunContext)
    graph.add_node("plan", plan_node)
    graph.add_node("approve", approve_node)
    graph.add_node("spawn", spawn_node)
    graph.add_node("subagent", subagent_node)
    graph.add_node("merge", merge_node)
    graph.add_node("monitor", monitor_node)
    graph.add_node("advance", advance_node)
    graph.add_node("answer", answer_node)
    graph.add_edge(START, "plan")
    graph.add_edge("plan", "approve")
    graph.add_conditional_edges("approve", route_approve, ["spawn", "plan"])
    graph.add_conditional_edges("spawn", route_spawn, ["subagent", "merge"])
    graph.add_edge("subagent", "merge")
    graph.add_edge("merge", "monitor")
    graph.add_edge("monitor", "advance")
    graph.add_conditional_edges(
        "advance", route_advance, {"plan": "plan", "answer": "answer", "end": END}
    )
    graph.add_edge("answer", END)
    return graph


def compile_graph(checkpointer: BaseCheckpointSaver | None = None) -> Any:
    """`build_graph()` compiled with `checkpointer` (None: no persistence).

    The graph is compiled once per process and copied with each run's checkpointer
    (compiling takes about 4 ms, a copy 0.03 ms; a compiled graph holds no state of a
    run, which is how LangGraph Server shares one across threads).
    """
    return _compiled().copy(update={"checkpointer": checkpointer})


@functools.cache
def _compiled() -> Any:
    return build_graph().compile()


def thread_state(
    docs: Docs, thread_id: str, checkpointer: BaseCheckpointSaver | None = None
) -> ThreadState | None:
    """LangGraph's saved state of `thread_id` (in `checkpointer`, else the memory backend's
    own), or None when there is none or it cannot be read (a damaged database: the JSON
    checkpoints are read instead)."""
    backend = docs.backend
    try:
        if checkpointer is None:
            if not isinstance(backend, HoldsGraphState) or not backend.holds_thread(thread_id):
                return None
            checkpointer = backend.checkpointer()
        snapshot = compile_graph(checkpointer).get_state({"configurable": {"thread_id": thread_id}})
    except Exception:  # any failure to read the database means: use the JSON checkpoints
        return None
    if not snapshot.values:
        return None
    return ThreadState(dict(snapshot.values), not snapshot.next, tuple(snapshot.interrupts))


def run_graph(
    ctx: RunContext,
    state: OrchestratorState | Command | None,
    task_id: str,
    saver: BaseCheckpointSaver | None = None,
) -> dict[str, Any]:
    """Stream the graph on `ctx.thread_id` from `state` (None: continue the thread's saved
    state; a `Command(resume=...)`: answer its pending requests) until it ends or waits;
    returns the final state (with `pending_approvals` when it waits).

    A failure of the lead's model after its retries ends the task `failed` (in its state,
    a checkpoint and the task's record); a failed subagent already does so in `advance`.

    Args:
        saver: the run's checkpointer; None: the memory backend's own, whose repairs are
            warning events, and which is moved aside when SQLite finds it damaged under
            the run (the next `resume` continues from the JSON checkpoints).

    Raises:
        Interrupted: Ctrl-C or SIGTERM, after a checkpoint of what LangGraph saved.
        OrchestratorRuntimeError: the backend's LangGraph database was damaged during the
            run (moved aside).
    """
    if saver is not None:
        return _stream(ctx, state, task_id, saver)
    backend = ctx.store.backend
    saver = backend.checkpointer()
    notices = getattr(backend, "notices", None)
    while notices:  # its repairs (a damaged LangGraph database moved aside) as warnings
        ctx.emit("warning", message=notices.pop(0))
    try:
        return _stream(ctx, state, task_id, saver)
    except sqlite3.DatabaseError as exc:
        if not is_sqlite_damage(exc) or not hasattr(backend, "reset_checkpointer"):
            raise
        aside = backend.reset_checkpointer(exc)
        backend.notices.clear()
        raise OrchestratorRuntimeError(
            "LangGraph's database was damaged during the run "
            f"({describe_sqlite_damage(exc)}); moved aside to {aside}; continue with "
            f"`{resume_command(task_id, ctx.docs)}` (from the JSON checkpoints)"
        ) from None


def _stream(
    ctx: RunContext,
    state: OrchestratorState | Command | None,
    task_id: str,
    saver: BaseCheckpointSaver,
) -> dict[str, Any]:
    graph = compile_graph(saver)
    config = run_config(ctx.thread_id, ctx.max_parallel)
    ctx.checkpointer = saver  # `advance` prunes it at each phase transition
    before = state if isinstance(state, dict) else graph.get_state(config).values
    # what the task spent in earlier runs: its usage journal; a task begun before journals
    # also what its state or record says it spent before
    if not ctx.open_journal(task_id).existed:
        ctx.budget.spent = max(ctx.budget.spent, spent_tokens(before or {}))
    try:
        with _stop_on_ctrl_c(ctx.stop):
            ctx.budget.check("the lead")
            for _ in graph.stream(
                state, config, context=ctx, durability=DURABILITY, stream_mode="updates"
            ):
                pass
    except BudgetReached as exc:
        return _stopped(graph.get_state(config).values or dict(before or {}), ctx, task_id, exc)
    except KeyboardInterrupt as exc:
        signum = signal.SIGTERM if isinstance(exc, Terminated) else signal.SIGINT
        raise _interrupted(graph.get_state(config).values, ctx, task_id, signum) from None
    except ModelCallError as exc:
        return _lead_failed(graph.get_state(config).values, ctx, task_id, exc)
    snapshot = graph.get_state(config)
    if snapshot.interrupts and pending(ctx.docs, task_id, snapshot.interrupts):
        return _waiting(dict(snapshot.values), ctx, task_id, snapshot.interrupts)
    if not snapshot.next:  # ended `done` or `failed`: only its last checkpoint is read again
        prune_thread(saver, ctx.thread_id, lambda m: ctx.emit("warning", message=m))
    return snapshot.values


def spent_tokens(values: dict[str, Any]) -> int:
    """The tokens a task's agents spent (lead and subagents), as its state records them."""
    return sum(int(v or 0) for v in (values.get("tokens") or {}).values())


def _stopped(
    values: dict[str, Any], ctx: RunContext, task_id: str, exc: BudgetReached
) -> dict[str, Any]:
    """The state of a run stopped at its token budget: a `stopped` checkpoint, the task
    record says `stopped` and why; `resume` with a larger budget goes on."""
    reason = ctx.budget.reason(exc.who) if exc.who else str(exc) or ctx.budget.reason()
    values = {**values, "status": "stopped", "stop_reason": reason}
    if values.get("task_id"):
        checkpoint_state(
            ctx,
            values,
            trigger="budget_reached",
            next_action=f"Resume with a larger budget: `{resume_command(task_id, ctx.docs)} "
            f"--budget-tokens N` (N > {ctx.budget.spent})",
        )
    TaskList(ctx.docs).note(
        task_id, status="stopped", stop_reason=reason, spent_tokens=ctx.budget.spent
    )
    ctx.emit("stopped", task_id=task_id, reason=reason, **ctx.budget.summary())
    return values


def _waiting(
    values: dict[str, Any], ctx: RunContext, task_id: str, interrupts: Any
) -> dict[str, Any]:
    """The state of a run stopped at requests waiting for approval: a `waiting` checkpoint
    names them, and the task record says `waiting`."""
    waiting = pending(ctx.docs, task_id, interrupts)
    listed = [p.model_dump() for p in waiting]
    values = {**values, "status": "waiting", "pending_approvals": listed}
    rel = checkpoint_state(
        ctx,
        values,
        trigger="waiting",
        next_action=f"Approve or reject {len(waiting)} request(s): "
        f"`orchestrator approve --task {task_id}`",
        pending_approvals=listed,
    )
    values["checkpoints"] = {
        **(values.get("checkpoints") or {}),
        **checkpoint_update(rel)["checkpoints"],
    }
    fault("waiting_before_record")
    TaskList(ctx.docs).note(task_id, status="waiting", pending_approvals=listed)
    ctx.emit("waiting_approval", task_id=task_id, requests=listed)
    return values


@contextlib.contextmanager
def _stop_on_ctrl_c(stop: threading.Event) -> Iterator[None]:
    """Ctrl-C (and SIGTERM) also set `stop`, for the agents running in worker threads.

    The `KeyboardInterrupt` reaches the main thread only, and LangGraph then waits for
    every task of the super-step it already handed to its thread pool: without `stop`,
    queued subagents would start and every running one would finish its whole tool loop
    first (at `--max-parallel 1`, the rest of the phase). SIGTERM (`kill`, `timeout`,
    `docker stop`) stops the run the same way, as `Terminated`, instead of killing it
    between two writes without its `interrupted` checkpoint. A signal ignored before the
    run stays ignored. Only the main thread can install a signal handler; elsewhere (a
    server's worker) this does nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    raised = {signal.SIGINT: KeyboardInterrupt, signal.SIGTERM: Terminated}
    previous = {signum: signal.getsignal(signum) for signum in raised}

    def handler(signum: int, frame: Any) -> None:
        before = previous[signum]
        if before == signal.SIG_IGN:
            return
        stop.set()
        if callable(before):
            before(signum, frame)  # Python's own for Ctrl-C raises KeyboardInterrupt
        else:
            raise raised[signum]

    for signum in raised:
        signal.signal(signum, handler)
    try:
        yield
    finally:
        for signum, before in previous.items():
            signal.signal(signum, before)


def _interrupted(
    values: dict[str, Any], ctx: RunContext, task_id: str, signum: int = signal.SIGINT
) -> Interrupted:
    """Ctrl-C or SIGTERM: checkpoint what LangGraph saved, and say how to resume."""
    docs = ctx.docs
    cp = None
    if values.get("task_id"):
        rel = checkpoint_state(
            ctx, values, trigger="interrupted", next_action="Resume the interrupted run"
        )
        cp = str(docs.path(rel))
    return Interrupted(task_id, cp, docs.location, resume_command(task_id, docs), signum)


def _lead_failed(
    saved: dict[str, Any], ctx: RunContext, task_id: str, exc: ModelCallError
) -> dict[str, Any]:
    """The state of a run stopped by a failure outside the subagents (the lead's model
    failed after its retries): recorded as `failed` in a checkpoint and the task record."""
    error = redact_text(str(exc))
    values = dict(saved)
    tokens = dict(values.get("tokens") or {})
    spent = int(getattr(exc, "tokens", 0) or 0)
    if spent:
        tokens["lead"] = tokens.get("lead", 0) + spent
    values.update(
        status="failed",
        failed={
            **(values.get("failed") or {}),
            "lead": {"agent": "lead", "error": error, "kind": type(exc).__name__},
        },
        tokens=tokens,
    )
    if values.get("task_id"):
        rel = checkpoint_state(
            ctx, values, trigger="failed", next_action=f"Resume the task ({error[:200]})"
        )
        values["checkpoints"] = {
            **(values.get("checkpoints") or {}),
            **checkpoint_update(rel)["checkpoints"],
        }
    TaskList(ctx.docs).note(task_id, status="failed", error=error[:500])
    ctx.emit("failed", task_id=task_id, failed=["lead"], error=error)
    return values


def run_config(thread_id: str, max_parallel: int) -> dict[str, Any]:
    """The run config: thread id = task id, parallel subagents bounded by `max_parallel`."""
    return {
        "configurable": {"thread_id": thread_id},
        "max_concurrency": max(1, int(max_parallel)),
        "recursion_limit": 10_000,
    }
