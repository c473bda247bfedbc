"""advance: phase transition checkpoint `cp_{phase}_{ts}.json`, then the next phase or the end.

After the last phase it hands the task to the `answer` node (`answering`), which answers
the objective, writes the final synthesis and a closing snapshot, and marks the task
`done` (`orchestrator.graph.nodes.answer`). A phase whose plan
declared the objective answered (`done_reason`, `PhasePlan.done`) is the last one: the
phases after it are recorded as skipped, with the reason, in the plan and the checkpoint.

A phase with a failed subagent ends the task `failed` (checkpoint `phase_failed`, the plan
names what failed): later phases are never planned without its finding; `resume` reruns
the failed subagents only (`orchestrator.recovery.rebuild.retry_failed`).

At a transition to the next phase, after its checkpoint, the thread's superseded LangGraph
checkpoints are pruned (`orchestrator.graph.pruning`): the finished phase's steps and its
subagents' conversations, which no resume reads again.

Idempotent: a replayed transition only writes one more checkpoint, which is harmless.
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from orchestrator.faults import fault
from orchestrator.graph.context import RunContext
from orchestrator.graph.pruning import prune_thread
from orchestrator.graph.writes import (
    checkpoint_state,
    checkpoint_update,
    write_plan_file,
)
from orchestrator.state import (
    OrchestratorState,
    current_phase,
    failure_summary,
    last_phase,
)


def phase_failures(state: OrchestratorState) -> dict[str, dict[str, Any]]:
    """Failed subagents of the current phase (key -> `{agent, error}`)."""
    phase = current_phase(state)
    subtasks = state.get("subtasks") or {}
    return {
        k: v
        for k, v in (state.get("failed") or {}).items()
        if (subtasks.get(k) or {}).get("phase") == phase
    }


def _fail(ctx: RunContext, state: OrchestratorState, failed: dict[str, dict]) -> dict[str, Any]:
    """Stop the task: a later phase must not be planned without a failed agent's finding."""
    what = failure_summary(failed)
    failed_state = {**state, "status": "failed"}
    nxt = f"Resume to rerun the failed subagents: {what}"
    write_plan_file(ctx, {**failed_state, "next_actions": [nxt]})
    cp = checkpoint_state(ctx, failed_state, trigger="phase_failed", next_action=nxt[:500])
    ctx.emit("failed", task_id=state["task_id"], failed=sorted(failed), error=what)
    return {"status": "failed", **checkpoint_update(cp)}


def advance_node(state: OrchestratorState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Checkpoint the phase's end, then move to the next phase, or finish (or fail) the task."""
    ctx = runtime.context
    failed = phase_failures(state)
    if failed:
        return _fail(ctx, state, failed)
    last = last_phase(state)
    nxt = (
        "answer the objective and finish the task"
        if last
        else f"Plan phase {state['phases'][state['phase_index'] + 1]}"
    )
    fault("advance_before_checkpoint")
    # after the last phase, the `task_complete` checkpoint of `answer` refreshes STATUS.md
    cp = checkpoint_state(
        ctx, state, trigger="phase_transition", next_action=nxt, status_file=not last
    )
    fault("advance_after_checkpoint")
    update: dict[str, Any] = checkpoint_update(cp)
    if not last:  # the task's end prunes once the graph ends (`run_graph`)
        prune_thread(ctx.checkpointer, ctx.thread_id, _warner(ctx))
        fault("advance_after_prune")
        update["phase_index"] = state["phase_index"] + 1
        update["warned"] = state.get("warned", False)
        return update
    return {**update, "answering": True}  # the `answer` node answers and finishes


def _warner(ctx: RunContext) -> Any:
    return lambda message: ctx.emit("warning", message=message)


def route_advance(state: OrchestratorState) -> str:
    if state.get("status") in ("done", "failed"):
        return "end"
    return "answer" if state.get("answering") else "plan"
