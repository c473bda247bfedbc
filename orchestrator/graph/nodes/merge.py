"""merge: synthesise the wave's findings into `findings/merged_{ts}.md`, update the plan,
checkpoint `agent_completion`.

A batch is one wave of a phase: its own findings only, so what a merge reads and writes
does not grow with the waves before it.

Idempotent: the merged file of a batch is registered like findings
(`orchestrator.graph.writes.merge_findings`), so a replay after a crash reuses the file it
wrote instead of adding a second one, and a phase already merged in the state is not
merged again. The merged summary also enters the lead's conversation (`lead_log`), which
is what makes the lead's context grow from phase to phase (and what the token monitor
watches).
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from orchestrator.faults import fault
from orchestrator.graph.context import RunContext
from orchestrator.graph.lead import log_lead
from orchestrator.graph.writes import (
    checkpoint_state,
    checkpoint_update,
    merge_findings,
    merged_digest,
    phase_findings,
    update_overview,
    write_plan_file,
)
from orchestrator.state import (
    OrchestratorState,
    current_phase,
    current_wave,
    merge_key,
    wave_subtasks,
)


def merge_node(state: OrchestratorState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Merge the wave's findings once, update plan and overview, checkpoint."""
    ctx = runtime.context
    phase = current_phase(state)
    wave = current_wave(state)
    batch = merge_key(phase, wave)
    if batch in (state.get("merged") or {}):
        return {}
    keys = set(wave_subtasks(state))
    records = [r for r in phase_findings(ctx, state, phase, keys=keys)]
    failed = {
        k: v
        for k, v in (state.get("failed") or {}).items()
        if k in keys and k not in (state.get("findings") or {})
    }
    merged_path = merge_findings(ctx, state, phase, records, batch=batch)
    digest = merged_digest(phase, records, failed, wave=wave)
    new_state = {**state, "merged": {**(state.get("merged") or {}), batch: merged_path}}
    write_plan_file(ctx, new_state)
    what = f"phase {phase}" + (f" wave {wave}" if wave > 1 else "")
    update_overview(
        ctx, new_state, f"merged {len(records)} finding(s) of {what} into `{merged_path}`"
    )
    log_lead(ctx, state["task_id"], "user", digest, phase=phase, node="merge")
    ctx.emit(
        "merged",
        phase=phase,
        wave=wave,
        path=str(ctx.docs.path(merged_path)),
        findings=len(records),
        failed=sorted(failed),
    )
    cp = checkpoint_state(
        ctx,
        new_state,
        trigger="agent_completion",
        next_action=f"Check the token gauge, then finish {what}",
    )
    fault("merge_after_checkpoint")
    return {
        "merged": {batch: merged_path},
        "lead_log": [*(state.get("lead_log") or []), {"role": "user", "content": digest}],
        **checkpoint_update(cp),
    }
