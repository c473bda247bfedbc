"""The lead's context: what its next call is sent, and how big that is.

The lead's context is rebuilt for every call from durable parts, in this order: system
prompt, the memory index (first call of the task only), the skills index, the
working-memory overview with recalled snippets (`working_context`), the research plan
file, the snapshot it was seeded from after a handoff, the running summary of its older
waves (`lead_summary`), its conversation since the latest wave began (`lead_log`: that
wave's plan and the full digest of its findings), then the instruction for this wave in
the line format the offline model parses (`Objective:`, `Phase:`, `Wave:`, `Max subtasks:`,
`Agents:`, `Covered:`).

**What does not grow with the task.** At each wave's or phase's end the lead's older turns
are folded (`fold_lead_log`) into the running summary: one line per wave (L1), and each
group of `FOLD_GROUP` lines of one level into one line of the next (L2, L3, ...), so the
summary grows with the logarithm of the waves; every finding stays reachable by its path
(the merged files) and by `recall_memory`. The plan's progress and the covered scopes are
cut to fixed bounds (`plan`'s `COMPLETED_SHOWN`, `COVERED_CHARS`).

`plan` sends it; `monitor` measures it (`lead_context_tokens`) to decide on a handoff; the
lead's turns are logged to working memory (`log_lead`) by `plan` and `merge`. The measure
rebuilds every part but the recalled snippets, which it counts at their budget
(`RECALL_BUDGET`, which they never exceed): a search, with the index sync of every file
written since, would cost more than the rest of the measure for a figure that only
decides whether a handoff comes a few hundred tokens sooner.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

from memory.facts.longterm import memory_index_message
from memory.task.working import WorkingMemory
from memory.window.context import ContextBudgets, ContextBuilder
from orchestrator.agents.provider import approx_tokens
from orchestrator.artifacts.text import body_text, sections
from orchestrator.config.defaults import RECALL_SCOPES
from orchestrator.graph.context import RunContext
from orchestrator.state import OrchestratorState, current_phase, current_wave

if TYPE_CHECKING:
    from langchain_core.messages import BaseMessage

    from orchestrator.types import JsonObject

LEAD = "lead"
LEAD_SYSTEM = (
    "You are the lead agent of a tether run: a phased task with parallel subagents. Plan "
    "the current phase: "
    "look at the project with your tools if needed, then call PhasePlan once with a short "
    "strategy and independent subtasks (none if none are needed), each for one of the "
    "agents below. List in `answered` the key questions the findings so far answer. When "
    "the findings answer the objective (or will, once this phase's subtasks are done), set "
    "done=true with the reason: the later phases are skipped. A phase runs in waves: when "
    "more of this phase's work is left than one wave's subtasks cover (e.g. more modules "
    "than Max subtasks), set continue_phase=true and you plan the next wave after seeing "
    "what this one found; plan only work no earlier wave covered (see Covered)."
)
ALONE_NOTE = (
    "If the objective needs no fan-out, answer it from your own reading: call PhasePlan "
    "with no subtasks, done=true and your answer (Markdown, citing files) in `answer`."
)
SIZED_NOTE = "This workflow runs every phase (run_all_phases): leave done false."


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
    parts = sections(snapshot)
    kept = [f"## {title}\n{parts[title]}" for title in SEED_SECTIONS if parts.get(title)]
    return "\n\n".join(kept) if kept else snapshot


RECALL_BUDGET = 300
"""Tokens of recalled snippets in the lead's context (a snippet of a file the context
already shows, the plan or a findings file of this task, is left out)."""


def working_context(ctx: RunContext, state: OrchestratorState, *, recall: bool = True) -> str:
    """Overview, active summaries and recalled snippets (none with `recall=False`, which
    searches nothing), from `memory.window.context.ContextBuilder`.

    The builder's own recent-turns part is switched off: the lead's turns since its last
    fresh start come from `lead_log`, so that a handoff really starts a fresh context.
    Recall is best effort (the builder reports a failing search as a warning), and the
    builder also runs the never-delete archive when enough turns have accumulated.
    """
    store = ctx.store
    budgets = ContextBudgets(
        total=max(ctx.token_threshold, 8000),
        recent=0,
        recent_turns=0,
        snippets=RECALL_BUDGET if recall else 0,
    )
    query = f"{state['objective']} {current_phase(state)}"
    shown = {
        ctx.docs.plan(state["task_id"]),  # the plan is in the context whole
        *(v.get("path") for v in (state.get("findings") or {}).values()),
        *(state.get("merged") or {}).values(),  # and the findings as their digests
    }

    def search(q: str, n: int) -> list[Any]:
        hits = store.search(q, scope=RECALL_SCOPES, limit=n + len(shown), widen=False)
        return [h for h in hits if h.path not in shown][:n]

    built = ContextBuilder(
        store,
        state["task_id"],
        budgets,
        search=search,
        memory_index=False,  # the lead injects the memory index itself, once
    ).build("", query=query)
    for warning in built.warnings:
        ctx.emit("warning", message=f"lead context: {warning}")
    return "\n\n".join(
        str(m.get("content", "")) for m in built.messages if m.get("role") == "system"
    ).strip()


def turn_id(task_id: str, role: str, content: str) -> str:
    """The message id of a lead turn, derived from what it says.

    The lead's turns are sent again in every later call of its context (`lead_log`), and a
    node replayed after a crash says them again; with the same id each time, the durable
    message log (`messages.jsonl`) keeps one line per turn.
    """
    digest = hashlib.sha256(f"{task_id}\0{role}\0{content}".encode()).hexdigest()[:24]
    return f"lead-{digest}"


def log_lead(ctx: RunContext, task_id: str, role: str, content: str, **fields: object) -> None:
    """Append a lead message to the task's durable message log (working memory), once."""
    working = WorkingMemory(ctx.store, task_id)
    message_id = turn_id(task_id, role, content)
    if any(m.record.get("id") == message_id for m in working.messages()):
        return  # a replayed node: the turn is in the log already
    working.append_message(role, content, id=message_id, **fields)


def phase_instruction(ctx: RunContext, state: OrchestratorState) -> str:
    phase = current_phase(state)
    agents = sorted(ctx.workflow.agents)
    k, n = state["phase_index"] + 1, len(state["phases"])
    wave = current_wave(state)
    lines = [
        f"Objective: {state['objective']}",
        f"Phase: {phase}",
        f"Phase number: {k} of {n} ({', '.join(state['phases'])})",
        f"Wave: {wave} of at most {ctx.max_waves}",
        f"Max subtasks: {max_subtasks(ctx)}",
        f"Agents: {', '.join(agents)}",
    ]
    covered = covered_scopes(state)
    if covered:
        lines.append(f"Covered: {covered}")
    lines.append(
        "Plan this phase now and call PhasePlan."
        if wave == 1
        else f"Plan wave {wave} of this phase now (work no earlier wave covered) and call "
        "PhasePlan; no subtasks ends the phase."
    )
    return "\n".join(lines)


COVERED_CHARS = 1000
"""Characters of the `Covered:` line (the scopes finished subtasks looked at), newest first."""


def covered_scopes(state: OrchestratorState) -> str:
    """The scopes of the finished subtasks of this task, newest first, each once, cut at
    `COVERED_CHARS` (`and N more`): what the lead must not plan again."""
    findings = state.get("findings") or {}
    scopes: dict[str, None] = {}
    for key, sub in reversed(list((state.get("subtasks") or {}).items())):
        if key in findings:
            scopes.update(dict.fromkeys(str(s) for s in sub.get("scope") or []))
    shown, size = [], 0
    for scope in scopes:
        if size + len(scope) + 2 > COVERED_CHARS:
            break
        shown.append(scope)
        size += len(scope) + 2
    more = len(scopes) - len(shown)
    return ", ".join(shown) + (f" (and {more} more)" if more else "")


KEEP_TURNS = 2
"""The lead's newest turns kept whole at a wave's end: the wave's plan and its digest."""
FOLD_GROUP = 8
"""Summary lines of one level folded into one line of the next level."""
SUMMARY_KEYS = 4
"""Subtask keys an L1 summary line names (then `and N more`)."""


def fold_lead_log(state: OrchestratorState) -> dict[str, Any]:
    """The state update that ends a wave for the lead: its summary gains a line for the
    wave (L1: phase, wave, findings, the subtask keys), groups of `FOLD_GROUP` lines of a
    level become one line of the next, and `lead_log` keeps its newest `KEEP_TURNS`."""
    phase, wave = current_phase(state), current_wave(state)
    findings = state.get("findings") or {}
    keys = [k for k, v in (state.get("subtasks") or {}).items()
            if v.get("phase") == phase and int(v.get("wave") or 1) == wave]  # fmt: skip
    line = {
        "level": 1,
        "phases": [phase],
        "waves": [wave, wave],
        "findings": sum(1 for k in keys if k in findings),
        "failed": sum(1 for k in keys if k not in findings),
        "keys": keys[:SUMMARY_KEYS],
        "more": max(0, len(keys) - SUMMARY_KEYS),
    }
    summary = [*(state.get("lead_summary") or []), line]
    level = 1
    while sum(1 for s in summary if s["level"] == level) > FOLD_GROUP:
        group = [s for s in summary if s["level"] == level][:FOLD_GROUP]
        folded = {
            "level": level + 1,
            "phases": list(dict.fromkeys(p for s in group for p in s["phases"])),
            "waves": [group[0]["waves"][0], group[-1]["waves"][1]],
            "findings": sum(s["findings"] for s in group),
            "failed": sum(s["failed"] for s in group),
            "keys": [],
            "more": 0,
        }
        at = summary.index(group[0])
        summary = [s for s in summary if s not in group]
        summary.insert(at, folded)
        level += 1
    return {"lead_summary": summary, "lead_log": list(state.get("lead_log") or [])[-KEEP_TURNS:]}


def summary_text(state: OrchestratorState) -> str:
    """The running summary as the lead reads it (empty before the first wave ended)."""
    lines = []
    for s in state.get("lead_summary") or []:
        first, last = s["waves"]
        waves = f"wave {first}" if first == last else f"waves {first}-{last}"
        where = f"{'/'.join(s['phases'])} {waves}"
        failed = f", {s['failed']} failed" if s["failed"] else ""
        keys = f": {', '.join(s['keys'])}" if s["keys"] else ""
        more = f" and {s['more']} more" if s["more"] else ""
        lines.append(f"- {where}: {s['findings']} finding(s){failed}{keys}{more}")
    if not lines:
        return ""
    return (
        "Earlier waves (a running summary; every finding is a file under findings/, "
        "listed in its wave's merged file and found by recall_memory):\n" + "\n".join(lines)
    )


def max_subtasks(ctx: RunContext) -> int:
    """Subtasks per phase: the API's `max_subtasks`, else the workflow's."""
    return int(ctx.max_subtasks or ctx.workflow.thresholds.max_subtasks)


def roster(ctx: RunContext) -> str:
    """The agents the lead can assign subtasks to, with what each is for."""
    lines = [
        f"- {name}: {' '.join(spec.description.split())}"
        for name, spec in sorted(ctx.workflow.agents.items())
    ]
    return "Agents (name: what it is for):\n" + "\n".join(lines)


def numbered_questions(state: OrchestratorState) -> str:
    """The key questions so far, numbered for `PhasePlan.answered`."""
    questions = state.get("key_questions") or []
    if not questions:
        return ""
    answered = set(state.get("answered") or [])
    lines = [
        f"{i}. {q}{' (answered)' if i in answered else ''}" for i, q in enumerate(questions, 1)
    ]
    return "Key questions (new ones you add continue the numbering):\n" + "\n".join(lines)


LEAN_PLAN_CHARS = 4000
LEAN_TURNS = 2


def lead_messages(
    ctx: RunContext, state: OrchestratorState, *, recall: bool = True, lean: bool = False
) -> list[BaseMessage]:
    """The lead's context for its next call (see the module docstring); `recall=False`
    leaves the recalled snippets out.

    `lean` (or the state's `lean_seed`, set when even a fresh context was over the
    threshold): the smallest context that still carries the task: the protocol text, the
    agents, the key questions, the research plan (cut), the snapshot's path, the newest
    turns and the instruction; no memory index, skills, overview or recall.
    """
    lean = lean or bool(state.get("lean_seed"))
    if lean:
        return _lean_messages(ctx, state)
    system = [LEAD_SYSTEM]
    if ctx.workflow.run_all_phases:
        system.append(SIZED_NOTE)
    elif not state.get("first_call_done"):
        system.append(ALONE_NOTE)
    system.append(roster(ctx))
    questions = numbered_questions(state)
    if questions:
        system.append(questions)
    if not state.get("first_call_done"):
        index = memory_index_message(ctx.store)
        if index:
            system.append(index)
    if ctx.skills_index:
        system.append("Skills (name: description):\n" + ctx.skills_index)
    memory = working_context(ctx, state, recall=recall)
    if memory:
        system.append(memory)
    docs = ctx.docs
    plan_text = body_text(docs.path(docs.plan(state["task_id"])), docs)
    if plan_text:
        system.append("Current research plan:\n" + plan_text)
    if state.get("seed_snapshot"):
        snap = seed_text(body_text(docs.path(state["seed_snapshot"]), docs))
        system.append("You continue from this context snapshot (fresh context):\n" + snap)
    summary = summary_text(state)
    if summary:
        system.append(summary)
    messages: list[Any] = [SystemMessage("\n\n".join(system))]
    task_id = state["task_id"]
    for turn in state.get("lead_log") or []:
        cls = AIMessage if turn["role"] == "assistant" else HumanMessage
        messages.append(cls(turn["content"], id=turn_id(task_id, turn["role"], turn["content"])))
    instruction = phase_instruction(ctx, state)
    messages.append(HumanMessage(instruction, id=turn_id(task_id, "user", instruction)))
    return messages


def _lean_messages(ctx: RunContext, state: OrchestratorState) -> list[BaseMessage]:
    system = [LEAD_SYSTEM, roster(ctx)]
    questions = numbered_questions(state)
    if questions:
        system.append(questions)
    docs = ctx.docs
    plan = docs.plan(state["task_id"])
    plan_text = body_text(docs.path(plan), docs)
    if plan_text:
        cut = plan_text[:LEAN_PLAN_CHARS]
        more = f"\n[... the whole plan: {plan}]" if len(plan_text) > LEAN_PLAN_CHARS else ""
        system.append("Current research plan:\n" + cut + more)
    if state.get("seed_snapshot"):
        system.append(
            f"You continue in a fresh context; the snapshot {state['seed_snapshot']} holds "
            "what was found and what is left (read it with recall_memory if you need it)."
        )
    summary = summary_text(state)
    if summary:
        system.append(summary)
    messages: list[Any] = [SystemMessage("\n\n".join(system))]
    task_id = state["task_id"]
    for turn in (state.get("lead_log") or [])[-LEAN_TURNS:]:
        cls = AIMessage if turn["role"] == "assistant" else HumanMessage
        messages.append(cls(turn["content"], id=turn_id(task_id, turn["role"], turn["content"])))
    instruction = phase_instruction(ctx, state)
    messages.append(HumanMessage(instruction, id=turn_id(task_id, "user", instruction)))
    return messages


def lead_context_tokens(ctx: RunContext, state: JsonObject) -> int:
    """Size of the lead's context: the input tokens the provider reported for the lead's
    last call (tool schemas included), or the estimate of its next context when that is
    larger (findings merged since) or when no usage was reported.

    The estimate rebuilds the context without searching and counts the recalled snippets
    at their budget, `RECALL_BUDGET` (see the module docstring).
    """
    estimate = approx_tokens(lead_messages(ctx, state, recall=False)) + RECALL_BUDGET
    calls = state.get("lead_calls") or []
    reported = int(calls[-1].get("tokens") or 0) if calls and calls[-1].get("reported") else 0
    return max(reported, estimate)


def lead_context_estimated(state: JsonObject) -> bool:
    """True when the lead's gauge has no provider-reported usage behind it (show `~`)."""
    calls = state.get("lead_calls") or []
    return not (calls and calls[-1].get("reported"))
