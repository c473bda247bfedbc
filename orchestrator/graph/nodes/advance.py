"""advance: phase transition checkpoint `cp_{phase}_{ts}.json`, then the next phase or the end.

After the last phase it writes the final merged summary of every finding, a closing
snapshot (so any fresh agent can pick the finished task up), records the episode in
long-term memory (`memory.reflect.reflect`), and marks the task `done`. A phase whose plan
declared the objective answered (`done_reason`, `PhasePlan.done`) is the last one: the
phases after it are recorded as skipped, with the reason, in the plan and the checkpoint.

A phase with a failed subagent ends the task `failed` (checkpoint `phase_failed`, the plan
names what failed): later phases are never planned without its finding; `resume` reruns
the failed subagents only (`orchestrator.recovery.rebuild.retry_failed`).

At a transition to the next phase, after its checkpoint, the thread's superseded LangGraph
checkpoints are pruned (`orchestrator.graph.pruning`): the finished phase's steps and its
subagents' conversations, which no resume reads again.

Idempotent: the final summary is registered (`merged:final`), and a replayed transition
only writes one more checkpoint, which is harmless.
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from memory.reflect import reflect
from orchestrator.faults import fault
from orchestrator.graph.context import RunContext
from orchestrator.graph.handoff import write_lead_snapshot
from orchestrator.graph.pruning import prune_thread
from orchestrator.graph.writes import (
    checkpoint_state,
    checkpoint_update,
    merge_findings,
    merged_digest,
    phase_findings,
    write_plan_file,
)
from orchestrator.state import (
    OrchestratorState,
    current_phase,
    failure_summary,
    last_phase,
    skipped_phases,
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
    nxt = "finish the task" if last else f"Plan phase {state['phases'][state['phase_index'] + 1]}"
    fault("advance_before_checkpoint")
    # after the last phase, the `task_complete` checkpoint of `_finish` refreshes STATUS.md
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
    finished = _finish(ctx, state)  # records its own checkpoint beside this one
    written = {**update.get("checkpoints", {}), **finished.get("checkpoints", {})}
    return {**finished, "checkpoints": written}


def _warner(ctx: RunContext) -> Any:
    return lambda message: ctx.emit("warning", message=message)


def _finish(ctx: RunContext, state: OrchestratorState) -> dict[str, Any]:
    records = phase_findings(ctx, state)
    final_state = {**state, "status": "done"}
    merged = merge_findings(ctx, final_state, "final", records)
    write_plan_file(  # the plan of a finished task says so, and where the summary is
        ctx,
        {**final_state, "next_actions": [f"None: the task is done; read `{merged}`."]},
    )
    merged_all = {**(state.get("merged") or {}), "final": merged}
    snap = write_lead_snapshot(  # the lead's context as the monitor just measured it
        ctx,
        {**final_state, "merged": merged_all},
        reason="phase_end",
        token_count=ctx.lead_context_measured(state),
    )
    relative = ctx.docs.rel(snap)
    ctx.emit("snapshot", path=str(snap), reason="phase_end")
    fault("finish_before_reflect")
    _reflect(ctx, state, records)
    summary = merged_digest("final", records, state.get("failed") or {})
    snapshots = [*(state.get("snapshots") or []), relative]
    skipped = skipped_phases(state)
    cp = checkpoint_state(  # the task's final state, closing snapshot included
        ctx,
        {**final_state, "merged": merged_all, "snapshots": snapshots},
        trigger="task_complete",
        next_action="Task complete; nothing to do",
    )
    ctx.emit(
        "done",
        task_id=state["task_id"],
        merged=str(ctx.docs.path(merged)),
        findings=len(records),
        skipped=skipped,
        reason=state.get("done_reason"),
    )
    return {
        "status": "done",
        "merged": {"final": merged},
        "final_summary": summary,
        "snapshots": snapshots,
        **checkpoint_update(cp),
    }


def _reflect(ctx: RunContext, state: OrchestratorState, records: list[dict]) -> None:
    files = sorted({f["path"] for r in records for f in r.get("files") or [] if f.get("path")})
    ran = state["phases"][: state["phase_index"] + 1]
    outcome = (
        f"{len(records)} findings, {len(state.get('failed') or {})} failed, "
        f"over phases {', '.join(ran)}."
    )
    if state.get("done_reason"):
        outcome += f" Answered early: {state['done_reason']}"
    try:
        reflect(
            ctx.store,
            task_id=state["task_id"],
            objective=state["objective"],
            outcome=outcome,
            files_touched=files[:50],
        )
    except Exception as exc:  # long-term memory must not fail a finished task
        ctx.emit("warning", message=f"reflect failed: {type(exc).__name__}: {exc}")


def route_advance(state: OrchestratorState) -> str:
    return "end" if state.get("status") in ("done", "failed") else "plan"
