"""approve: with `approve_plan: true`, a phase's plan waits for a person before it runs.

Between `plan` and `spawn`. The request is a LangGraph `interrupt` in the shape of
LangChain's `HumanInTheLoopMiddleware` (one action, `PhasePlan`, whose arguments are the
phase's strategy and subtasks; decisions `approve` or `reject`), so the same
`{"decisions": [...]}` payload answers it as a subagent's tool approval, from the CLI
(`orchestrator approve`), the API or a LangGraph Server client (`Command(resume=...)`).

* approve: the phase is recorded in `approved` and its subtasks are spawned;
* reject: the phase's subtasks are dropped and the lead plans the phase again, with the
  reviewer's message in its conversation.

Without `approve_plan` the node only records the phase as approved (so a plan of zero
subtasks still goes on to `spawn`). Idempotent: an approved phase passes at once.
"""

from __future__ import annotations

from typing import Any

from langgraph.errors import GraphInterrupt
from langgraph.runtime import Runtime
from langgraph.types import interrupt

from orchestrator.approvals import note_requests
from orchestrator.graph.context import RunContext
from orchestrator.graph.lead import LEAD, log_lead
from orchestrator.graph.writes import write_plan_file
from orchestrator.state import DELETE, OrchestratorState, current_phase, phase_subtasks

PLAN_ACTION = "PhasePlan"


def plan_request(state: OrchestratorState) -> dict[str, Any]:
    """The interrupt value asking to approve the current phase's plan."""
    phase = current_phase(state)
    subtasks = [
        {"id": v["id"], "agent": v["agent"], "title": v["title"]}
        for _k, v in sorted(phase_subtasks(state).items())
    ]
    args = {"phase": phase, "strategy": state.get("strategy") or "", "subtasks": subtasks}
    if state.get("done_reason"):
        args["done"] = state["done_reason"]
    return {
        "action_requests": [
            {
                "name": PLAN_ACTION,
                "args": args,
                "description": f"The lead's plan for phase {phase!r} of task "
                f"{state['task_id']!r} waits for approval ({len(subtasks)} subtask(s)).",
            }
        ],
        "review_configs": [
            {"action_name": PLAN_ACTION, "allowed_decisions": ["approve", "reject"]}
        ],
    }


def approve_node(state: OrchestratorState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Ask for the plan's approval once per phase (with `approve_plan`)."""
    ctx = runtime.context
    phase = current_phase(state)
    approved = list(state.get("approved") or [])
    if phase in approved:
        return {}
    if not ctx.workflow.approve_plan:
        return {"approved": [*approved, phase]}
    try:
        answer = interrupt(plan_request(state))
    except GraphInterrupt as exc:
        note_requests(ctx, state["task_id"], exc, agent=LEAD, key=f"{phase}/plan")
        raise
    decision = (answer.get("decisions") or [{}])[0] if isinstance(answer, dict) else {}
    if decision.get("type") == "approve":
        ctx.emit("approved", agent=LEAD, phase=phase)
        write_plan_file(ctx, {**state, "approved": [*approved, phase]})  # no longer waiting
        return {"approved": [*approved, phase]}
    message = (decision.get("message") or "").strip() or "no reason given"
    text = f"Your plan for phase {phase} was rejected: {message}. Plan this phase again."
    log_lead(ctx, state["task_id"], "user", text, phase=phase, node="approve")
    ctx.emit("rejected", agent=LEAD, phase=phase, message=message)
    return {
        "subtasks": {k: DELETE for k in phase_subtasks(state)},
        "done_reason": None,
        "lead_log": [*(state.get("lead_log") or []), {"role": "user", "content": text}],
    }


def route_approve(state: OrchestratorState) -> str:
    return "spawn" if current_phase(state) in (state.get("approved") or []) else "plan"
