"""plan: the lead agent plans the current phase and writes the research plan.

The lead runs `agent_loop.run_agent` with the workdir tools, `recall_memory` and the
`PhasePlan` final tool, and with `TetherMemoryMiddleware` (the same middleware users add
to their own agents: its turns go to `working/{task}/messages.jsonl`). Its context
(`lead_messages`) is rebuilt for every call from
durable parts, in this order: system prompt, the memory index (first call of the task
only), the skills index, the working-memory overview, the research plan file, the
snapshot it was seeded from after a handoff, the lead's conversation since its last
fresh start (`lead_log`), then the instruction for this phase in the line format the
offline model parses (`Objective:`, `Phase:`, `Max subtasks:`, `Agents:`).

Idempotent: a phase that already has subtasks in the state (replayed super-step, or a
state rebuilt from a JSON checkpoint) is not planned again.
"""

from __future__ import annotations

import re
from typing import Any

from orchestrator.nodes._common import write_plan_file
from orchestrator.recovery import fault
from orchestrator.state import OrchestratorState, current_phase, phase_subtasks, subtask_key

LEAD = "lead"
DEFAULT_MAX_SUBTASKS = 4
LEAD_SYSTEM = (
    "You are the lead agent of a tether run: a long, phased, multi-agent task. For the "
    "current phase, look at the project with the tools if needed, then call PhasePlan "
    "once with a short strategy and independent subtasks for parallel subagents. "
    "Use the agent names listed. Your plan and the subagents' findings are saved as files; "
    "the skills below can be loaded when relevant."
)


_META = re.compile(r"^<!-- tether:\w+ .* -->[ \t]*\n?", re.MULTILINE)


def _text_of(path: Any) -> str:
    """A memory file's text without its machine-readable metadata comment."""
    try:
        return _META.sub("", path.read_text(encoding="utf-8")).strip()
    except OSError:
        return ""


#: Snapshot sections a fresh lead is seeded with (the plan and findings files carry the
#: rest, and the lead can read them with its tools).
SEED_SECTIONS = (
    "What Was Found",
    "What Is Left",
    "Conversation Summary",
    "Important Context",
    "Pending Decisions",
    "Resume Instructions",
)


def seed_text(snapshot: str) -> str:
    """The parts of a snapshot that seed a fresh lead context."""
    from orchestrator.artifacts import sections

    parts = sections(snapshot)
    kept = [f"## {title}\n{parts[title]}" for title in SEED_SECTIONS if parts.get(title)]
    return "\n\n".join(kept) if kept else snapshot


#: Views recalled into the lead's context: what agents found and what was learnt before
#: (checkpoints and snapshots repeat the plan and would crowd them out).
RECALL_SCOPES = ["findings", "detail", "facts", "episodes", "entries"]
RECALL_BUDGET = 800


def working_context(ctx: Any, state: OrchestratorState) -> str:
    """Overview, active summaries and recalled snippets, from `memory.context.ContextBuilder`.

    The builder's own recent-turns part is switched off: the lead's turns since its last
    fresh start come from `lead_log`, so that a handoff really starts a fresh context.
    Recall is best effort (the builder reports a failing search as a warning), and the
    builder also runs the never-delete archive when enough turns have accumulated.
    """
    from memory.context import ContextBudgets, ContextBuilder

    store = ctx.store
    budgets = ContextBudgets(
        total=max(ctx.token_threshold, 8000), recent=0, recent_turns=0, snippets=RECALL_BUDGET
    )
    query = f"{state['objective']} {current_phase(state)}"
    built = ContextBuilder(
        store,
        state["task_id"],
        budgets,
        search=lambda q, n: store.search(q, scope=RECALL_SCOPES, limit=n),
        memory_index=False,  # the lead injects the memory index itself, once
    ).build("", query=query)
    for warning in built.warnings:
        ctx.emit("warning", message=f"lead context: {warning}")
    return "\n\n".join(
        str(m.get("content", "")) for m in built.messages if m.get("role") == "system"
    ).strip()


def log_lead(ctx: Any, task_id: str, role: str, content: str, **fields: Any) -> None:
    """Append a lead message to the task's durable message log (working memory)."""
    from memory.working import WorkingMemory

    WorkingMemory(ctx.store, task_id).append_message(role, content, **fields)


def phase_instruction(ctx: Any, state: OrchestratorState) -> str:
    phase = current_phase(state)
    agents = sorted((getattr(ctx.workflow, "agents", None) or {}).keys()) or ["researcher"]
    k, n = state["phase_index"] + 1, len(state["phases"])
    return "\n".join(
        [
            f"Objective: {state['objective']}",
            f"Phase: {phase}",
            f"Phase number: {k} of {n} ({', '.join(state['phases'])})",
            f"Max subtasks: {max_subtasks(ctx)}",
            f"Agents: {', '.join(agents)}",
            "Plan this phase now and call PhasePlan.",
        ]
    )


def max_subtasks(ctx: Any) -> int:
    """Subtasks per phase: the API's `max_subtasks`, the workflow's, else 4."""
    thresholds = getattr(ctx.workflow, "thresholds", None)
    return int(ctx.max_subtasks or getattr(thresholds, "max_subtasks", 0) or DEFAULT_MAX_SUBTASKS)


def lead_messages(ctx: Any, state: OrchestratorState) -> list[Any]:
    """The lead's context for its next call (see the module docstring)."""
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

    system = [LEAD_SYSTEM]
    if not state.get("first_call_done"):
        from memory.longterm import memory_index_message

        index = memory_index_message(ctx.store)
        if index:
            system.append(index)
    if ctx.skills_index:
        system.append("Skills (name: description):\n" + ctx.skills_index)
    memory = working_context(ctx, state)
    if memory:
        system.append(memory)
    plan_text = _text_of(ctx.layout.plan(state["task_id"]))
    if plan_text:
        system.append("Current research plan:\n" + plan_text)
    if state.get("seed_snapshot"):
        snap = seed_text(_text_of(ctx.layout.root / state["seed_snapshot"]))
        system.append("You continue from this context snapshot (fresh context):\n" + snap)
    messages: list[Any] = [SystemMessage("\n\n".join(system))]
    for turn in state.get("lead_log") or []:
        cls = AIMessage if turn["role"] == "assistant" else HumanMessage
        messages.append(cls(turn["content"]))
    messages.append(HumanMessage(phase_instruction(ctx, state)))
    return messages


def _subtask_records(ctx: Any, state: OrchestratorState, plan: Any) -> dict[str, dict]:
    phase = current_phase(state)
    known = set(getattr(ctx.workflow, "agents", None) or {})
    default_agent = sorted(known)[0] if known else "researcher"
    records: dict[str, dict] = {}
    for sub in plan.subtasks[: max_subtasks(ctx)]:
        key = subtask_key(phase, sub.id)
        n = 2
        while key in records:
            key = subtask_key(phase, f"{sub.id}-{n}")
            n += 1
        agent = sub.agent if (not known or sub.agent in known) else default_agent
        records[key] = {
            "id": key.split("/", 1)[1],
            "title": sub.title,
            "description": sub.description,
            "agent": agent,
            "scope": list(sub.scope),
            "phase": phase,
        }
    return records


TOOL_RESULT_CHARS = 3000


def _tool_results(transcript: list[Any]) -> list[tuple[dict, Any]]:
    """`(tool call, tool message)` pairs of an agent run, in order."""
    from langchain_core.messages import AIMessage, ToolMessage

    calls: dict[str, dict] = {}
    pairs = []
    for message in transcript:
        if isinstance(message, AIMessage):
            calls.update({c.get("id") or c["name"]: c for c in message.tool_calls or []})
        elif isinstance(message, ToolMessage) and message.tool_call_id in calls:
            pairs.append((calls[message.tool_call_id], message))
    return pairs


def _tool_turn(call: dict, message: Any) -> dict[str, str]:
    """What the lead saw from one tool call, kept in its conversation (bounded)."""
    text = str(message.content)
    if len(text) > TOOL_RESULT_CHARS:
        text = text[:TOOL_RESULT_CHARS] + " ..."
    return {"role": "user", "content": f"[{call['name']}({call.get('args') or {}})]\n{text}"}


def _plan_update(ctx: Any, state: OrchestratorState, result: Any, fresh: bool) -> dict:
    """The state update of one planning turn (the lead's log grows by what it saw)."""
    phase = current_phase(state)
    plan = result.final
    subtasks = _subtask_records(ctx, state, plan)
    summary = f"Plan for phase {phase}: {plan.strategy} Subtasks: " + "; ".join(
        f"{v['id']} ({v['agent']}): {v['title']}" for v in subtasks.values()
    )
    seen = [_tool_turn(call, msg) for call, msg in _tool_results(result.transcript)]
    return {
        "subtasks": subtasks,
        "strategy": plan.strategy,
        "key_questions": list(
            dict.fromkeys([*(state.get("key_questions") or []), *plan.key_questions])
        ),
        "constraints": list(plan.constraints),
        "next_actions": list(plan.next_actions),
        "tokens": {LEAD: (state.get("tokens") or {}).get(LEAD, 0) + result.tokens},
        "first_call_done": True,
        "lead_log": [
            *(state.get("lead_log") or []),
            *seen,
            {"role": "assistant", "content": summary},
        ],
        "lead_calls": [
            *(state.get("lead_calls") or []),
            {
                "phase": phase,
                "tokens": max(result.context_tokens or [0]),
                "fresh": fresh,
                "reported": not result.estimated,
            },
        ],
    }


def lead_middleware(ctx: Any, task_id: str) -> Any:
    """The lead's `TetherMemoryMiddleware`: records its turns in working memory and gauges
    each call; a planning turn that outgrows the threshold snapshots and goes on fresh.
    (Recall is already part of the lead's context: `working_context`.)"""
    from orchestrator.middleware import TetherMemoryMiddleware

    def forward(event: dict[str, Any]) -> None:
        if event["event"] in ("warning", "snapshot"):
            fields = {k: v for k, v in event.items() if k not in ("event", "task_id")}
            ctx.emit(event["event"], agent=LEAD, **fields)

    return TetherMemoryMiddleware(
        ctx.store,
        task_id,
        threshold=ctx.token_threshold,
        warning_ratio=ctx.warning_ratio,
        recall=False,
        record_system=False,
        on_event=forward,
    )


def plan_node(state: OrchestratorState, runtime: Any) -> dict[str, Any]:
    """Plan the current phase (once) and write the research plan."""
    from orchestrator.agent_loop import run_agent
    from orchestrator.protocol import PhasePlan

    ctx = runtime.context
    phase = current_phase(state)
    ctx.emit("phase", phase=phase, index=state["phase_index"] + 1, total=len(state["phases"]))
    if phase_subtasks(state):
        return {}
    spec = ctx.agent_spec(LEAD)
    result = run_agent(
        ctx.model,
        tools=ctx.tools_for(LEAD, state["task_id"], state["workdir"], lead=True),
        final_tool=PhasePlan,
        messages=lead_messages(ctx, state),
        max_steps=int(getattr(spec, "max_steps", 0) or 6),
        max_context_tokens=max(ctx.token_threshold * 2, 4000),
        middleware=[lead_middleware(ctx, state["task_id"])],
    )
    fresh = bool(state.get("seed_snapshot")) and not state.get("lead_log")
    update = _plan_update(ctx, state, result, fresh)
    subtasks = update["subtasks"]
    new_state = {**state, **update, "subtasks": {**(state.get("subtasks") or {}), **subtasks}}
    path = write_plan_file(ctx, new_state)
    update["plan_path"] = ctx.layout.relative(path)
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
