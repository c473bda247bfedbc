"""answer: the lead answers the objective, then the task ends `done`.

After the last phase (`advance` sets `answering`), the lead gets the objective, the plan's
strategy and each finding's digest (summary, key discoveries and the files it examined,
with its findings file; bounded by `DIGEST_CHARS`) and answers in one call of the
`SubmitAnswer` tool, with `recall_memory` and `read_file` to read more if it must. A lead
that answered alone in its plan (`PhasePlan.answer`, no subtasks) makes no further call.

The answer opens the task's final synthesis, `findings/merged_{ts}.md` (the template's
merge of every finding follows it), and the research plan and the closing snapshot start
with it. Then the episode is recorded in long-term memory (`memory.facts.reflect.reflect`) and the
task's final checkpoint written (`task_complete`).

What the answer cites is checked before it is written (`orchestrator.graph.citations`): only
this task's findings files and workdir files that exist stay its sources, and the answer
file says how many citations were checked and lists those not found.

Idempotent: the answer is recorded in the artifact registry (`answer:final`) as soon as the
model gives it, so a replay after a crash reuses it instead of asking again; the final
merged file is registered like every merged batch (`merged:final:N`).
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from memory.facts.reflect import reflect
from orchestrator.agents.chat_models import context_window
from orchestrator.agents.loop import run_agent
from orchestrator.agents.provider import approx_tokens, tool_tokens
from orchestrator.artifacts.finding import ANSWER_CHARS, FindingRecord
from orchestrator.artifacts.registry import Keys, Status, registry_lookup, registry_note
from orchestrator.faults import fault
from orchestrator.graph.citations import check_citations
from orchestrator.graph.context import RunContext
from orchestrator.graph.handoff import write_lead_snapshot
from orchestrator.graph.lead import LEAD
from orchestrator.graph.writes import (
    checkpoint_state,
    checkpoint_update,
    merge_findings,
    merged_digest,
    phase_findings,
    write_plan_file,
)
from orchestrator.state import OrchestratorState, current_phase, skipped_phases, usage_record
from orchestrator.types import SubmitAnswer

WINDOW_MARGIN = 0.95
ANSWER_TOOLS = ("recall_memory", "read_file")
ANSWER_STEPS = 4
ANSWER_STEPS_HINT = (
    f"the answer has {ANSWER_STEPS} steps of its own, which no workflow setting changes; "
    "`orchestrator resume` asks for the answer again (the findings are kept)"
)
DIGEST_CHARS = 8000
"""Characters of findings digests the answer call is given (it can read the rest); each
finding's own bound is `FindingRecord.for_answer`'s (`ANSWER_CHARS`)."""
ANSWER_SYSTEM = (
    "You are the lead agent of a tether run. The work is done: answer the objective now, "
    "directly, from the findings below (read more with your tools only if you must), then "
    "call SubmitAnswer with the answer in Markdown, the findings files and workdir files it "
    "rests on, and what is still open."
)


def answer_messages(
    state: OrchestratorState, records: list[FindingRecord], budget: int = DIGEST_CHARS
) -> list[Any]:
    """The answer call's conversation: the system text, then the objective, the strategy
    and the findings' digests within `budget` characters (the offline model reads the
    same lines)."""
    from langchain_core.messages import HumanMessage, SystemMessage

    digests, used, left = [], 0, 0
    for record in records:
        text = record.for_answer(min(ANSWER_CHARS, budget))
        if used + len(text) > budget:
            left += 1
            continue
        digests.append(text)
        used += len(text)
    more = [f"(+{left} more findings: read them with recall_memory)"] if left else []
    lines = [
        f"Objective: {state['objective']}",
        f"Strategy: {' '.join(str(state.get('strategy') or '').split()) or '-'}",
        f"Findings ({len(records)}):",
        *(digests or ["- none: no subagent ran"]),
        *more,
        "Answer the objective now and call SubmitAnswer.",
    ]
    return [SystemMessage(ANSWER_SYSTEM), HumanMessage("\n".join(lines))]


def _ask(
    ctx: RunContext, state: OrchestratorState, records: list[FindingRecord]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The lead's answer from one model call, and the state's updated lead usage."""
    tools = [
        t
        for t in ctx.tools_for(LEAD, state["task_id"], state["workdir"], lead=True)
        + ctx.memory_tools(state["task_id"])
        if t.name in ANSWER_TOOLS
    ]
    tools = list({t.name: t for t in tools}.values())
    messages = answer_messages(state, records)
    window, budget = context_window(ctx.model), DIGEST_CHARS
    schemas = tool_tokens([*tools, SubmitAnswer])
    while window and budget > 500:  # as the provider counts: the call must fit its window
        if ctx.usage.tokens(approx_tokens(messages) + schemas) <= window * WINDOW_MARGIN / 2:
            break
        budget //= 2
        messages = answer_messages(state, records, budget)
    result = run_agent(
        ctx.model,
        tools=tools,
        final_tool=SubmitAnswer,
        messages=messages,
        max_steps=ANSWER_STEPS,
        max_context_tokens=max(ctx.token_threshold * 2, 4000),
        middleware=[*ctx.budget_middleware(LEAD), *ctx.trace_middleware(LEAD)],
        stop=ctx.stop,
        usage=ctx.usage,
        notify=lambda line: ctx.emit("warning", message=f"{LEAD}: {line}"),
        steps_hint=ANSWER_STEPS_HINT,
        journal=ctx.calls(LEAD, LEAD, current_phase(state)),
    )
    usage = {
        "usage": {LEAD: usage_record(result, (state.get("usage") or {}).get(LEAD))},
        "tokens": {LEAD: (state.get("tokens") or {}).get(LEAD, 0) + result.tokens},
    }
    call = {
        "phase": current_phase(state),
        "tokens": max(result.context_tokens or [0]),
        "fresh": False,
        "reported": not result.estimated,
        "spent": result.tokens,
        "node": "answer",
    }
    usage["lead_calls"] = [*(state.get("lead_calls") or []), call]
    return {**result.final.model_dump(), "by": "offline" if ctx.offline else "answer"}, usage


def _answer(
    ctx: RunContext, state: OrchestratorState, records: list[FindingRecord]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The task's answer: the plan's, the one recorded before a crash, or a new call."""
    task_id = state["task_id"]
    if state.get("answer"):  # the lead answered alone, in its plan
        info = state.get("answer_info") or {}
        return {"answer": state["answer"], **info, "by": info.get("by", "plan")}, {}
    recorded = registry_lookup(ctx.docs, task_id, Keys.answer())
    if recorded and str(recorded.get("answer") or "").strip():
        return {k: v for k, v in recorded.items() if k != "key"}, {}
    answer, usage = _ask(ctx, state, records)
    registry_note(ctx.docs, task_id, Keys.answer(), Status.NOTED, **answer)
    fault("answer_after_call")
    return answer, usage


def answer_node(state: OrchestratorState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Answer the objective (once) and finish the task."""
    ctx = runtime.context
    records = phase_findings(ctx, state)
    answer, usage = _answer(ctx, state, records)
    own = [  # this task's findings files and subtask keys, and its merged batches
        *(r.path for r in records if r.path),
        *(r.key for r in records if r.key),
        *(state.get("merged") or {}).values(),
    ]
    answer = check_citations(answer, workdir=state["workdir"], findings=own)
    state = {**state, **_merged_usage(state, usage)}
    finished = _finish(ctx, state, records, answer)
    return {**usage, **finished}


def _merged_usage(state: OrchestratorState, usage: dict[str, Any]) -> dict[str, Any]:
    """`state`'s keyed usage channels with `usage` merged in (the lead's calls replaced)."""
    return {
        k: v if isinstance(v, list) else {**(state.get(k) or {}), **v} for k, v in usage.items()
    }


def _finish(
    ctx: RunContext, state: OrchestratorState, records: list[FindingRecord], answer: dict[str, Any]
) -> dict[str, Any]:
    """The final synthesis (the answer first), the plan, the closing snapshot, the episode
    and the `task_complete` checkpoint."""
    final_state = {**state, "status": "done", "answer": answer["answer"]}
    merged = merge_findings(ctx, final_state, "final", records, answer=answer)
    info = {k: answer.get(k) for k in ("findings", "files", "open_questions", "by", "citations")}
    info["path"] = merged
    final_state["answer_info"] = info
    write_plan_file(  # the plan of a finished task says so, and where the answer is
        ctx,
        {**final_state, "next_actions": [f"None: the task is done; the answer is in `{merged}`."]},
    )
    merged_all = {**(state.get("merged") or {}), "final": merged}
    snap = write_lead_snapshot(  # the lead's context as the monitor last measured it
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
        skipped=skipped_phases(state),
        reason=state.get("done_reason"),
        answer=answer["answer"],
    )
    return {
        "status": "done",
        "answering": False,
        "answer": answer["answer"],
        "answer_info": info,
        "merged": {"final": merged},
        "final_summary": summary,
        "snapshots": snapshots,
        **checkpoint_update(cp),
    }


def _reflect(ctx: RunContext, state: OrchestratorState, records: list[FindingRecord]) -> None:
    files = sorted({p for r in records for p in r.examined()})
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
