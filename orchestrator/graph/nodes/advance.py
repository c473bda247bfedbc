"""advance: the next wave of the phase, or the phase transition checkpoint
`cp_{phase}_{ts}.json` and the next phase, or the end.

A phase runs in waves: while the wave's plan said `continue_phase` (and planned subtasks),
the next wave of the same phase is planned, seeing what this one found, up to
`max_waves` (then the phase ends with a warning saying so, not a failure). Each wave end
folds the lead's older turns into its running summary (`graph.lead.fold_lead_log`) and
prunes the thread's superseded LangGraph checkpoints, as a phase transition does, so
neither the lead's prompt nor the graph state grows with the waves.

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
from orchestrator.graph.lead import fold_lead_log
from orchestrator.graph.pruning import prune_thread
from orchestrator.graph.writes import (
    checkpoint_state,
    checkpoint_update,
    write_plan_file,
)
from orchestrator.state import (
    OrchestratorState,
    current_phase,
    current_wave,
    failure_summary,
    last_phase,
    wave_subtasks,
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
    if _another_wave(ctx, state):
        fault("advance_before_wave")
        prune_thread(ctx.checkpointer, ctx.thread_id, _warner(ctx))
        return {"wave": current_wave(state) + 1, "continue_phase": False, **fold_lead_log(state)}
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
        return {**update, "wave": 1, "continue_phase": False, **fold_lead_log(state)}
    return {**update, "answering": True}  # the `answer` node answers and finishes


def _another_wave(ctx: RunContext, state: OrchestratorState) -> bool:
    """Whether the phase goes on with another wave: its plan asked for one, planned
    subtasks, and the objective is not declared answered; at `max_waves` the phase ends
    with a warning that says so."""
    if not state.get("continue_phase") or state.get("done_reason") or not wave_subtasks(state):
        return False
    wave = current_wave(state)
    if wave >= ctx.max_waves:
        ctx.emit(
            "warning",
            message=f"phase {current_phase(state)}: max_waves ({ctx.max_waves}) reached; "
            "the lead asked for another wave, the phase ends here (raise --max-waves or "
            "thresholds.max_waves to let it go on)",
        )
        return False
    return True


def _warner(ctx: RunContext) -> Any:
    return lambda message: ctx.emit("warning", message=message)


def route_advance(state: OrchestratorState) -> str:
    if state.get("status") in ("done", "failed"):
        return "end"
    return "answer" if state.get("answering") else "plan"
