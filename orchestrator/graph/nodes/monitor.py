"""monitor: the token gauge between merge and advance (see `orchestrator.agents.gauge`).

Measures the lead's next context; in the warning zone emits a warning (once per
context); at the threshold writes a context snapshot and starts the lead afresh: its
conversation log is emptied and its next context is seeded from the snapshot, the
overview, the plan and the skills index. After the last phase no lead call follows, so
the closing snapshot of `advance` stands in for the handoff.
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from orchestrator.agents.gauge import SAVE, WARN, TokenGauge, total_tokens
from orchestrator.faults import fault
from orchestrator.graph.context import RunContext
from orchestrator.graph.handoff import write_lead_snapshot
from orchestrator.graph.lead import lead_context_estimated, lead_context_tokens
from orchestrator.state import OrchestratorState, last_phase, usage_totals


def monitor_node(state: OrchestratorState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Gauge the lead's next context: warn once in the warning zone, hand off at the threshold."""
    ctx = runtime.context
    gauge = TokenGauge(ctx.token_threshold, ctx.warning_ratio)
    lead = lead_context_tokens(ctx, state)
    ctx.remember_lead_context(state, lead)
    zone = gauge.zone(lead)
    # the task's spend: its usage journal (every call so far), else the state's counters
    spent = ctx.journal.spend() if ctx.journal is not None and ctx.journal.existed else None
    ctx.emit(
        "tokens",
        agent="lead",
        context=lead,
        total=spent.tokens if spent else total_tokens(state.get("tokens")),
        calls=spent.calls if spent else usage_totals(state.get("usage"))["calls"],
        threshold=gauge.threshold,
        warning_ratio=gauge.warning_ratio,
        zone=zone,
        estimated=lead_context_estimated(state),
    )
    if zone == WARN and not state.get("warned"):
        ctx.emit(
            "warning",
            message=(
                f"lead context {'~' if lead_context_estimated(state) else ''}{lead} tokens "
                "is in the warning zone "
                f"({gauge.warn_at}-{gauge.threshold}); a snapshot follows at {gauge.threshold}"
            ),
        )
        return {"warned": True}
    if zone != SAVE:
        return {}
    if last_phase(state):
        # no lead call follows the last phase; `advance` writes the closing snapshot
        return {}
    calls = state.get("lead_calls") or []
    if calls and calls[-1].get("fresh") and int(calls[-1].get("tokens") or 0) >= gauge.threshold:
        # the fresh context itself was over the threshold: another snapshot would refill at
        # once; the lead goes on from the lean context instead (never snapshots in a loop)
        if not state.get("lean_seed"):
            ctx.emit(
                "warning",
                message=f"the lead's fresh context was already {calls[-1]['tokens']} tokens, "
                f"over the {gauge.threshold} threshold; continuing from a lean context "
                "(plan, snapshot path, newest turns) instead of another snapshot",
            )
        return {"lean_seed": True}
    if not state.get("warned"):
        ctx.emit("warning", message=f"lead context ~{lead} tokens passed the warning zone")
    path = write_lead_snapshot(ctx, state, reason="token_limit", token_count=lead)
    relative = ctx.docs.rel(path)
    ctx.emit("snapshot", path=str(path), reason="token_limit", tokens=lead)
    fault("monitor_after_snapshot")
    return {
        "seed_snapshot": relative,
        "snapshots": [*(state.get("snapshots") or []), relative],
        "lead_log": [],
        "warned": False,
    }
