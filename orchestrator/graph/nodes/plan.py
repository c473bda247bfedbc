"""plan: the lead agent plans the current wave of the current phase and writes the research plan.

A phase runs in waves: each planning turn plans one wave (at most `max_subtasks`
subtasks); its `continue_phase` asks `advance` for another wave of the same phase after
these subtasks have run and merged (`orchestrator.graph.nodes.advance`).

The lead runs `orchestrator.agents.loop.run_agent` with the workdir tools, `recall_memory`
and the `PhasePlan` final tool, and with `lead_middleware` (tether's protocol middleware and
`TetherMemoryMiddleware`, the same middleware users add to their own agents: its turns go
to `working/{task}/messages.jsonl`). Its context is
rebuilt for every call from durable parts (`orchestrator.graph.lead.lead_messages`).

Before a plan is accepted it is checked against the workdir and the findings
(`orchestrator.graph.plan_check`): a scope that does not exist, or a key question marked
answered that no finding addresses, is refused back to the lead, which plans again; past
`PLAN_RETRIES` refusals tether settles the plan itself and notes it in the plan file.

Idempotent: a wave that already has subtasks in the state (replayed super-step, or a
state rebuilt from a JSON checkpoint) is not planned again.
"""

from __future__ import annotations

from typing import Any

from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.runtime import Runtime

from orchestrator.agents.chat_models import context_window
from orchestrator.agents.loop import run_agent
from orchestrator.agents.memory_middleware import TetherMemoryMiddleware
from orchestrator.agents.protocol_middleware import WINDOW_SHARE
from orchestrator.agents.provider import approx_tokens, tool_tokens
from orchestrator.config.defaults import DEFAULT_NUDGES
from orchestrator.errors import ContextOverflowError
from orchestrator.faults import fault
from orchestrator.graph.context import RunContext
from orchestrator.graph.lead import LEAD, lead_messages, log_lead, max_subtasks
from orchestrator.graph.plan_check import MAX_NOTES, PlanCheck, checking
from orchestrator.graph.writes import phase_findings, write_plan_file
from orchestrator.state import (
    OrchestratorState,
    current_phase,
    current_wave,
    subtask_key,
    usage_record,
    wave_subtasks,
)
from orchestrator.types import PhasePlan, Plan

LEAD_MAX_STEPS = 6
"""Model calls of one planning turn, unless the workflow defines a `lead` agent."""


def _subtask_records(ctx: RunContext, state: OrchestratorState, plan: Any) -> dict[str, dict]:
    phase = current_phase(state)
    wave = current_wave(state)
    known = set(ctx.workflow.agents)  # a workflow has at least one agent
    default_agent = sorted(known)[0]
    records: dict[str, dict] = {}
    earlier = state.get("subtasks") or {}  # an id an earlier wave took gets a suffix
    for sub in plan.subtasks[: max_subtasks(ctx)]:
        key = subtask_key(phase, sub.id)
        n = 2
        while key in records or key in earlier:
            key = subtask_key(phase, f"{sub.id}-{n}")
            n += 1
        agent = sub.agent if sub.agent in known else default_agent
        # the state's record is the `Subtask` (every field of it), renamed and placed
        records[key] = {**sub.model_dump(), "id": key.split("/", 1)[1], "agent": agent}
        records[key]["phase"] = phase
        records[key]["wave"] = wave
    return records


def _tool_results(transcript: list[Any]) -> list[tuple[dict, Any]]:
    """`(tool call, tool message)` pairs of an agent run, in order."""
    calls: dict[str, dict] = {}
    pairs = []
    for message in transcript:
        if isinstance(message, AIMessage):
            calls.update({c.get("id") or c["name"]: c for c in message.tool_calls or []})
        elif isinstance(message, ToolMessage) and message.tool_call_id in calls:
            pairs.append((calls[message.tool_call_id], message))
    return pairs


def _plan_update(
    ctx: RunContext, state: OrchestratorState, result: Any, fresh: bool, notes: list[str]
) -> dict:
    """The state update of one planning turn (the lead's log grows by what it saw);
    `notes`: what the plan check changed or could not check (`PlanCheck.settle`)."""
    phase = current_phase(state)
    wave = current_wave(state)
    plan = result.final
    subtasks = _subtask_records(ctx, state, plan)
    where = f"phase {phase}" + (f", wave {wave}" if wave > 1 else "")
    summary = (
        f"Plan for {where}: {plan.strategy}\nSubtasks:"
        + "".join(f"\n- {v['id']} ({v['agent']}): {v['title']}" for v in subtasks.values())
        if subtasks
        else f"Plan for {where}: {plan.strategy}\nSubtasks: none."
    )
    if plan.continue_phase and subtasks:
        summary += "\nAnother wave of this phase follows (continue_phase)."
    summary += "".join(f"\nNote: {n}." for n in notes)
    questions = list(dict.fromkeys([*(state.get("key_questions") or []), *plan.key_questions]))
    answered = {i for i in plan.answered if 1 <= i <= len(questions)}
    update: dict[str, Any] = {}
    if plan.done and not ctx.workflow.run_all_phases:
        update["done_reason"] = " ".join(plan.reason.split()) or (
            "the lead declared the objective answered"
        )
        summary += f" Objective answered after this phase: {update['done_reason']}"
        if plan.answer.strip() and not subtasks:  # answered alone: no answer call follows
            read = [c.get("args", {}).get("path") for c, _ in _tool_results(result.transcript)
                    if c["name"] == "read_file"]  # fmt: skip
            update["answer"] = plan.answer.strip()
            update["answer_info"] = {
                "by": "offline" if ctx.offline else "plan",
                "findings": [],
                "files": [p for p in dict.fromkeys(read) if isinstance(p, str)],
                "open_questions": [],
            }
    return {
        **update,
        "subtasks": subtasks,
        # a wave without subtasks ends the phase whatever the plan says
        "continue_phase": bool(plan.continue_phase and subtasks),
        # the lead's `Plan` as given, but the key questions, which add up over the phases
        **plan.model_dump(include=set(Plan.model_fields) - {"key_questions"}),
        "key_questions": questions,
        "answered": sorted(answered | set(state.get("answered") or [])),
        "plan_notes": [*(state.get("plan_notes") or []), *notes][-MAX_NOTES:],
        "usage": {LEAD: usage_record(result, (state.get("usage") or {}).get(LEAD))},
        "tokens": {LEAD: (state.get("tokens") or {}).get(LEAD, 0) + result.tokens},
        "first_call_done": True,
        # the lead's conversation keeps its plans and the findings' digests, not the raw
        # tool output of earlier turns (in working memory, searchable and fetchable)
        "lead_log": [*(state.get("lead_log") or []), {"role": "assistant", "content": summary}],
        "lead_calls": [
            *(state.get("lead_calls") or []),
            {
                "phase": phase,
                "tokens": max(result.context_tokens or [0]),
                "fresh": fresh,
                "reported": not result.estimated,
                "spent": result.tokens,
            },
        ],
    }


class LeadMemoryMiddleware(TetherMemoryMiddleware):
    """`TetherMemoryMiddleware` without its end-of-agent record, which for the lead would
    be a durable super-step of its own that records nothing: the lead's turn ends in a model
    step whose answer `wrap_model_call` records (`FinalAnswerMiddleware` answers a valid final
    call there), or after a tool step whose answers the next model call records first."""

    after_agent = AgentMiddleware.after_agent


def lead_middleware(ctx: RunContext, task_id: str) -> Any:
    """The lead's `TetherMemoryMiddleware`: records its turns in working memory and gauges
    each call; a planning turn that outgrows the threshold snapshots and goes on fresh.
    (Recall is already part of the lead's context: `working_context`.)"""

    def forward(event: dict[str, Any]) -> None:
        if event["event"] in ("warning", "snapshot", "offloaded"):
            fields = {k: v for k, v in event.items() if k not in ("event", "task_id")}
            ctx.emit(event["event"], agent=LEAD, **fields)

    return LeadMemoryMiddleware(
        ctx.store,
        task_id,
        threshold=ctx.token_threshold,
        warning_ratio=ctx.warning_ratio,
        recall=False,
        record_system=False,
        on_event=forward,
        tool_result_tokens=ctx.tool_result_tokens,
        usage=ctx.usage,
    )


WINDOW_MARGIN = WINDOW_SHARE
"""Share of the model's window a lead context may fill before the lean one is used."""
TURN_GROWTH = 0.2
"""Share of the window a planning turn's own tool results may add (a listing, a read)."""


def plan_check(ctx: RunContext, state: OrchestratorState) -> PlanCheck:
    """The check of this planning turn's plans (`orchestrator.graph.plan_check`)."""
    agents = ctx.workflow.agents
    subtasks = state.get("subtasks") or {}

    def records() -> list[dict[str, Any]]:
        return [
            {**r.model_dump(), "scope": (subtasks.get(r.key) or {}).get("scope") or []}
            for r in phase_findings(ctx, state)
        ]

    return PlanCheck(
        state["workdir"],
        remote={name for name, spec in agents.items() if spec.remote is not None},
        known=set(agents),
        default_agent=sorted(agents)[0],
        questions=state.get("key_questions") or [],
        answered=set(state.get("answered") or []),
        records=records,
        phases=state["phases"],
    )


def _plan_turn(
    ctx: RunContext, state: OrchestratorState, messages: list[Any], check: PlanCheck
) -> Any:
    spec = ctx.agent_spec(LEAD)
    with checking(check):
        return run_agent(
            ctx.model,
            tools=ctx.tools_for(LEAD, state["task_id"], state["workdir"], lead=True),
            final_tool=PhasePlan,
            messages=messages,
            max_steps=spec.max_steps if spec is not None else LEAD_MAX_STEPS,
            max_context_tokens=max(ctx.token_threshold * 2, 4000),
            middleware=[
                # the keys first: the result they record is the one the lead is given
                *ctx.call_keys(LEAD, state["task_id"], _lead_scope(state), lead=True),
                check,
                lead_middleware(ctx, state["task_id"]),
                *ctx.budget_middleware(LEAD),
                *ctx.trace_middleware(LEAD),
            ],
            stop=ctx.stop,
            usage=ctx.usage,
            notify=lambda line: ctx.emit("warning", message=f"{LEAD}: {line}"),
            nudges=spec.nudges if spec is not None else DEFAULT_NUDGES,
            journal=ctx.calls(LEAD, LEAD, current_phase(state)),
        )


def _lead_scope(state: OrchestratorState) -> str:
    """The lead's part of its tool calls' idempotency keys: its phase and wave."""
    return f"{LEAD}/{current_phase(state)}/{current_wave(state)}"


def plan_node(state: OrchestratorState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Plan the current phase (once) and write the research plan."""
    ctx = runtime.context
    phase = current_phase(state)
    wave = current_wave(state)
    ctx.emit(
        "phase", phase=phase, index=state["phase_index"] + 1, total=len(state["phases"]),
        wave=wave,
    )  # fmt: skip
    if wave_subtasks(state):
        return {}
    messages = lead_messages(ctx, state)
    window = context_window(ctx.model)
    tools = [*ctx.tools_for(LEAD, state["task_id"], state["workdir"], lead=True), PhasePlan]
    expected = ctx.usage.tokens(approx_tokens(messages) + tool_tokens(tools))
    room = window * (WINDOW_MARGIN - TURN_GROWTH) if window else 0
    if window and expected > room and not state.get("lean_seed"):
        # the provider counts more than the estimate: this context would be refused
        ctx.emit(
            "warning",
            message=f"lead context ~{expected} tokens (as the provider counts) leaves too "
            f"little of the model's {window}-token window for the planning turn; planning "
            "from the lean context",
        )
        messages = lead_messages(ctx, state, lean=True)
    check = plan_check(ctx, state)
    try:
        result = _plan_turn(ctx, state, messages, check)
    except ContextOverflowError as exc:  # even cut, the context is over the model's window
        ctx.emit(
            "warning",
            message=f"lead context over the model's window ({exc}); planning again from "
            "the lean context (plan, snapshot path, newest turns)",
        )
        result = _plan_turn(ctx, state, lead_messages(ctx, state, lean=True), check)
    result.final, notes = check.settle(result.final)
    for note in notes:
        ctx.emit("warning", message=f"{LEAD}: plan: {note}")
    fresh = bool(state.get("seed_snapshot")) and not state.get("lead_log")
    update = _plan_update(ctx, state, result, fresh, notes)
    subtasks = update["subtasks"]
    new_state = {**state, **update, "subtasks": {**(state.get("subtasks") or {}), **subtasks}}
    path = write_plan_file(ctx, new_state)
    update["plan_path"] = ctx.docs.rel(path)
    log_lead(
        ctx,
        state["task_id"],
        "assistant",
        update["lead_log"][-1]["content"],
        phase=phase,
        node="plan",
    )
    ctx.emit(
        "plan",
        phase=phase,
        wave=wave,
        continue_phase=update["continue_phase"],
        path=str(path),
        subtasks=[
            {"key": k, "agent": v["agent"], "title": v["title"]} for k, v in subtasks.items()
        ],
    )
    ctx.emit(
        "tokens",
        agent=LEAD,
        tokens=update["tokens"][LEAD],
        context=update["lead_calls"][-1]["tokens"],
        threshold=ctx.token_threshold,
        warning_ratio=ctx.warning_ratio,
    )
    fault("plan_after_write")
    return update
