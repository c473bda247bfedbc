"""What a context snapshot tells a fresh agent: what was found, what is left, what was said.

A snapshot (`context_snapshots/snap_{ts}.md`) must let an agent with an empty context act
at once. This module assembles its three digests from what is on disk and in the state:

* **What was found**: per finished subagent, the first sentence of its summary and one
  of its key discoveries (one that cites a line when there is one), verbatim, with the
  `file:line` citations the finding carries and the path of its findings file; when
  space is short, shared fairly across phases (one finding of each phase per round, the
  current phase first), the rest pointed to by the phase's merged findings file.
* **What is left**: the pending subtasks of the current phase, the failed subagents with
  their errors, the phases not planned yet and the open questions of the findings, or
  "Nothing" for a finished task.
* **Conversation summary**: extractive, over the *whole* conversation
  (`working/{task}/messages.jsonl`, never only its last turns): the first request, the
  last two turns and turns spread evenly in between, one line each; what is left out is
  cited by line range, and the active summaries in `detail/` are named.

Every digest is bounded (`FOUND_CHARS`, `LEFT_CHARS`, `SUMMARY_CHARS`), because it seeds
a fresh lead context that must stay far below the token threshold.

Invariant: every sentence is copied from a finding, the state or the message log (cut
with ` ...` at a word boundary when long, a quoted copy of the objective shortened to
"the objective"), so every figure in a digest is a figure of its source; the only words
added are the connecting labels and counts of what was read here.
"""

from __future__ import annotations

import json
import re
from collections import Counter, deque
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import zip_longest
from typing import TYPE_CHECKING, Any

from memory.task.archive import Archive
from memory.task.working import WorkingMemory
from memory.text.tokens import CHARS_PER_TOKEN
from orchestrator.artifacts.documents import Docs
from orchestrator.artifacts.finding import (
    FindingRecord,
    clip,
    objective_shortened,
)
from orchestrator.artifacts.findings import list_findings, read_findings
from orchestrator.artifacts.render import md_block, md_code
from orchestrator.errors import ArtifactError

if TYPE_CHECKING:
    pass

FOUND_CHARS = 3000
LEFT_CHARS = 1600
SUMMARY_CHARS = 1600
SEED_SHARE = 0.06
"""Largest share of the token threshold the three digests take together."""
TURN_CHARS = 130
"""Longest quoted turn of the conversation summary."""
MAX_QUESTIONS = 8

_TOOL_REPLAY = re.compile(r"^\[\w+\(.*?\)\]\s")


@dataclass(frozen=True)
class SnapshotContent:
    """The three digests of a snapshot (markdown blocks)."""

    what_was_found: str
    what_is_left: str
    conversation_summary: str


# -- text helpers ------------------------------------------------------------------------
def _fit(lines: Sequence[str], order: Iterable[int], budget: int) -> set[int]:
    """Indices of `lines` chosen in `order` while their total length fits `budget`."""
    chosen: set[int] = set()
    used = 0
    for i in order:
        cost = len(lines[i]) + 1
        if i not in chosen and used + cost <= budget:
            chosen.add(i)
            used += cost
    return chosen


def _spread(indices: Sequence[int]) -> list[int]:
    """`indices` in an order whose every prefix is spread evenly over them (bisection)."""
    out: list[int] = []
    queue = deque([(0, len(indices) - 1)])
    while queue:
        lo, hi = queue.popleft()
        if lo > hi:
            continue
        mid = (lo + hi) // 2
        out.append(indices[mid])
        queue.extend([(lo, mid - 1), (mid + 1, hi)])
    return out


# -- what was found ----------------------------------------------------------------------
def _phase(record: FindingRecord) -> str:
    return str(record.phase or None)


def what_was_found(
    records: Sequence[FindingRecord | Mapping[str, Any]],
    *,
    phases: Sequence[str] = (),
    current: str | None = None,
    merged: Mapping[str, str] | None = None,
    objective: str | None = None,
    budget: int = FOUND_CHARS,
    answer: str | None = None,
    quoted: Collection[str] = (),
) -> str:
    """The digest of `records` (findings as the state holds them, with `key` and `phase`),
    opening with the lead's `answer` when the task has one (cut to a third of the budget;
    the whole answer is in the final summary it names). A finding whose file the shown
    part of the answer names (`quoted`) gets no second line.

    Shown in phase order; when the budget is short, the findings go in by rounds, one
    of each phase per round (`current` first, then the newer phases), each phase's first
    one shortened to its share of the budget if need be, so every phase with findings is
    shown; then one key discovery each; a phase with findings left out points to its
    merged findings file.
    """
    merged = dict(merged or {})
    records = [FindingRecord.of(r) for r in records]
    if answer:
        opening = _answer_lines(answer, merged.get("final"), budget // 3)
        if not records:
            return opening + "\n\nNo findings: the lead answered from its own reading."
        named = {r.path for r in records if r.path and r.path in opening}
        rest = what_was_found(
            records, phases=phases, current=current, merged=merged, objective=objective,
            budget=budget - len(opening) - 2, quoted=named,
        )  # fmt: skip
        return opening + "\n\n" + rest
    if not records:
        return "No findings yet."
    order = list(dict.fromkeys([*phases, *sorted({_phase(r) for r in records})]))
    rank = {p: i for i, p in enumerate(order)}
    ordered = sorted(records, key=lambda r: (rank[_phase(r)], r.key))
    statuses = Counter(r.status or "completed" for r in records)
    counts = ", ".join(f"{n} {s}" for s, n in sorted(statuses.items()))
    head = f"{len(records)} finding(s) ({counts}) in {len({_phase(r) for r in records})} phase(s)."
    if merged.get("final"):
        head += f" Final summary: {md_code(merged['final'])}."
    above = [r for r in ordered if r.path and r.path in quoted]
    if above:
        head += f" {len(above)} of them quoted in the answer above; the others:"
        ordered = [r for r in ordered if not (r.path and r.path in quoted)]
    blocks = [r.for_snapshot(objective) for r in ordered]
    by_phase: dict[str, list[int]] = {}
    for i, r in enumerate(ordered):
        by_phase.setdefault(_phase(r), []).append(i)
    # fair across phases: one finding of each phase per round (the current phase, then
    # the newer ones, first), so no phase's findings are left out wholesale
    turn = sorted(by_phase, key=lambda p: (p != current, -rank[p]))
    rounds = zip_longest(*(by_phase[p] for p in turn))
    urgent = [i for row in rounds for i in row if i is not None]
    chosen: set[tuple[int, int]] = set()
    room = budget - len(head) - 1 - sum(len(_left_out(p, 999, merged)) + 1 for p in by_phase)
    share = room // max(len(by_phase), 1)
    for i in urgent[: len(by_phase)]:  # each phase's first finding, shortened to its share
        if len(blocks[i][0]) >= share:
            blocks[i][0] = ordered[i].for_snapshot(objective, share)[0]
    for i, j in [(i, 0) for i in urgent] + [(i, 1) for i in urgent]:
        if j < len(blocks[i]) and (j == 0 or (i, 0) in chosen) and len(blocks[i][j]) < room:
            chosen.add((i, j))
            room -= len(blocks[i][j]) + 1
    lines = [head]
    lines += [
        line for i, block in enumerate(blocks) for j, line in enumerate(block) if (i, j) in chosen
    ]
    left_out = Counter(_phase(r) for i, r in enumerate(ordered) if (i, 0) not in chosen)
    lines += [_left_out(phase, n, merged) for phase, n in left_out.items()]
    return "\n".join(lines)


def _left_out(phase: str, n: int, merged: Mapping[str, str]) -> str:
    """The line pointing to a phase's `n` findings left out of the digest."""
    where = f" in {md_code(merged[phase])}" if merged.get(phase) else ""
    return f"- {n} more finding(s) of phase {phase}{where}."


def _answer_lines(answer: str, path: str | None, budget: int) -> str:
    """The lead's answer, cut at a line boundary to `budget` characters."""
    text = md_block(answer)
    if len(text) > budget:
        cut = text[: max(budget - 40, 0)].rsplit("\n", 1)[0] if "\n" in text[:budget] else ""
        text = (cut or text[: max(budget - 40, 0)]).rstrip() + " ..."
    where = f" (the whole answer: {md_code(path)})" if path else ""
    return f"**Answer**{where}:\n{text}"


# -- what is left ------------------------------------------------------------------------
def _bounded(lines: list[str], budget: int) -> str:
    """`lines` joined, cut at a line boundary to fit `budget` (saying how many were cut)."""
    out: list[str] = []
    used = 0
    for i, line in enumerate(lines):
        if used + len(line) + 1 > budget - 60:
            out.append(f"- ... {len(lines) - i} more line(s) cut to keep this snapshot short.")
            break
        out.append(line)
        used += len(line) + 1
    return "\n".join(out)


def open_questions(records: Sequence[FindingRecord], objective: str | None = None) -> list[str]:
    """The open questions of `records` as digest lines (`[key] question`), capped."""
    found = [
        f"  - [{r.key or r.agent}] {clip(objective_shortened(q, objective))}"
        for r in records
        for q in r.open_questions
    ]
    if len(found) > MAX_QUESTIONS:
        found = [*found[:MAX_QUESTIONS], f"  - +{len(found) - MAX_QUESTIONS} more in the findings."]
    return found


def what_is_left(
    state: Mapping[str, object],
    budget: int = LEFT_CHARS,
    records: Sequence[FindingRecord] | None = None,
) -> str:
    """Pending subtasks, failures, unplanned phases and open questions of a task's state
    (the open questions from `records`, the whole findings; default: the state's own)."""
    phases = list(state.get("phases") or [])
    index = int(state.get("phase_index") or 0)
    findings = state.get("findings") or {}
    failed = state.get("failed") or {}
    if records is None:
        records = [FindingRecord.of({**v, "key": k}) for k, v in sorted(findings.items())]
    lines: list[str] = []
    if state.get("status") == "done":
        lines.append("Nothing: the task is done; no subtask is pending.")
    elif phases:
        phase, where = phases[index], f"({index + 1}/{len(phases)})"
        planned = {
            k: v for k, v in (state.get("subtasks") or {}).items() if v.get("phase") == phase
        }
        pending = [k for k in sorted(planned) if k not in findings and k not in failed]
        if not planned:
            lines.append(f"- Phase {phase} {where} is not planned yet: the lead plans it next.")
        elif pending:
            lines.append(f"- Phase {phase} {where}: {len(pending)} subtask(s) pending:")
            lines += [
                f"  - {k} [{planned[k].get('agent', '?')}]: {clip(planned[k].get('title', ''))}"
                for k in pending
            ]
        else:
            done = sum(1 for k in planned if k in findings)
            failing = sum(1 for k in planned if k in failed)
            tally = f"{done} of {len(planned)} with findings" + (
                f", {failing} failed (below)" if failing else ""
            )
            lines.append(f"- Phase {phase} {where}: no subtask pending ({tally}).")
        if phases[index + 1 :]:
            lines.append(f"- Phases not planned yet: {', '.join(phases[index + 1 :])}.")
    if failed:
        lines.append(f"- {len(failed)} failed subagent(s), run again by `orchestrator resume`:")
        lines += [
            f"  - {k} [{v.get('agent', '?')}]: {clip(v.get('error') or 'failed')}"
            for k, v in sorted(failed.items())
        ]
    questions = open_questions(records, state.get("objective"))
    if questions:
        total = sum(len(r.open_questions) for r in records)
        lines.append(f"- {total} open question(s) in the findings:")
        lines += questions
    return _bounded(lines, budget)


# -- the conversation --------------------------------------------------------------------
@dataclass(frozen=True)
class Turn:
    """One message of a conversation as the summary sees it."""

    line: int | None
    """Line in `messages.jsonl`, or None for a conversation held only in memory."""
    role: str
    text: str
    prose: bool
    """Said in words (a request, a plan, a report), not a tool call or its result."""
    said: str = ""
    """Everything the message says (role, content, calls): equal for a replayed turn."""


def _args(args: Any) -> str:
    return clip(json.dumps(args, ensure_ascii=False, default=str), 60) if args else ""


def turn_of(line: int | None, record: Mapping[str, object]) -> Turn | None:
    """The `Turn` of a `messages.jsonl` record (or a `{role, content}` dict); None for system."""
    role = str(record.get("role", ""))
    if role in ("system", ""):
        return None
    content = record.get("content", "")
    raw = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
    text = " ".join(raw.split())
    calls = [c for c in record.get("tool_calls") or [] if isinstance(c, Mapping)]
    said = json.dumps([role, raw, [[c.get("name"), c.get("args")] for c in calls]], default=str)
    if role == "tool":  # its size only: the bulk a handoff leaves behind (cited by line)
        name = record.get("name") or "tool"
        return Turn(line, role, f"{name} returned {len(raw.strip())} chars", False, said)
    if calls:
        called = ", ".join(f"{c.get('name', '?')}({_args(c.get('args'))})" for c in calls)
        text = f"{text} (calls {called})" if text else f"calls {called}"
        return Turn(line, role, text, prose=bool(raw.strip()), said=said)
    # a tool result replayed into the lead's conversation reads `[tool(args)] result`
    return Turn(line, role, text, bool(text) and not _TOOL_REPLAY.match(raw), said)


def summarize_conversation(
    turns: Sequence[Turn],
    *,
    source: str | None = None,
    archived: Sequence[tuple[str, str]] = (),
    budget: int = SUMMARY_CHARS,
) -> str:
    """An extractive summary of the whole conversation, about `budget` characters long.

    The first request and the last turn are always quoted (so the text may pass a tiny
    budget by those two lines); then the last but one, then prose turns spread evenly over
    the conversation, then (if every prose turn fits) tool calls. Left-out stretches are
    cited by line range.

    Args:
        turns: the conversation, oldest first.
        source: where its lines are (`working/{task}/messages.jsonl`), for citations.
        archived: `(summary file, span)` of the active summaries of the archive.
    """
    if not turns:
        return "No conversation yet."
    distinct: list[Turn] = []
    seen: set[str] = set()
    for turn in turns:  # a turn replayed into a later context is quoted once
        said = turn.said or f"{turn.role}: {turn.text}"
        if said not in seen:
            seen.add(said)
            distinct.append(turn)
    lines = [
        f"- {f'L{t.line} ' if t.line else ''}{t.role}: {clip(t.text or '(empty)', TURN_CHARS)}"
        for t in distinct
    ]
    last = len(distinct) - 1
    first = next((i for i, t in enumerate(distinct) if t.role == "user"), 0)
    prose = [i for i, t in enumerate(distinct) if t.prose]
    repeats = len(turns) - len(distinct)  # turns replayed into a later context
    head = f"{len(turns)} message(s) in {md_code(source) if source else 'the conversation'}"
    head += f" ({repeats} repeating earlier ones)" if repeats else ""
    tail = []
    if archived:
        names = "; ".join(f"{md_code(p)} ({span})" for p, span in archived[-3:])
        more = f" and {len(archived) - 3} earlier" if len(archived) > 3 else ""
        tail.append(f"Archived summaries of the log: {names}{more}.")
    room = budget - len(head) - sum(len(t) + 1 for t in tail) - 40
    padded = [line + " " * 24 for line in lines]  # a line may open a `- ... L4-L9` gap
    chosen = _fit(padded, [first, last, max(last - 1, 0), *_spread(prose)], room)
    if set(prose) <= chosen:  # tool calls only when every prose turn is in
        other = [i for i, t in enumerate(distinct) if not t.prose]
        chosen = _fit(padded, [*sorted(chosen), *_spread(other)], room)
    shown = sorted(chosen | {first, last})
    out = [f"{head}; all {len(distinct)} distinct quoted:"]
    if len(shown) < len(distinct):
        out = [f"{head}; {len(shown)} of the {len(distinct)} distinct quoted, the rest cited:"]
    previous = -1
    for i in [*shown, len(distinct)]:
        gap = distinct[previous + 1 : i]
        if gap:
            lo, hi = gap[0].line, gap[-1].line
            span = (f"L{lo} " if lo == hi else f"L{lo}-L{hi} ") if lo and hi else ""
            out.append(f"- ... {span}({len(gap)} more)")
        if i < len(distinct):
            out.append(lines[i])
        previous = i
    return "\n".join(out + tail)


def task_conversation(
    store: Any,
    task_id: str,
    fallback: Iterable[Mapping[str, object]] = (),
    budget: int = SUMMARY_CHARS,
) -> str:
    """The summary of task `task_id`'s logged conversation (else of `fallback` turns)."""
    docs = Docs.of(store)
    wm = WorkingMemory(store, task_id)
    logged = [t for m in wm.messages() if (t := turn_of(m.line, m.record))]
    if not logged:
        turns = [t for r in fallback if (t := turn_of(None, r))]
        return summarize_conversation(turns, budget=budget)
    try:
        active = Archive(wm).state().active()
    except OSError:  # the archive is a help here, never a reason to lose the snapshot
        active = []
    archived = [(docs.rel(s.path), s.span) for s in active]
    source = wm.messages_doc
    return summarize_conversation(logged, source=source, archived=archived, budget=budget)


# -- the two kinds of snapshot -------------------------------------------------------------
def budgets(threshold: int | None) -> tuple[int, int, int]:
    """Character budgets of (found, left, summary): the defaults, or less for a threshold
    so low that the defaults would fill a fresh context (`SEED_SHARE` of it at most)."""
    full = FOUND_CHARS + LEFT_CHARS + SUMMARY_CHARS
    scale = min(1.0, threshold * CHARS_PER_TOKEN * SEED_SHARE / full) if threshold else 1.0
    return int(FOUND_CHARS * scale), int(LEFT_CHARS * scale), int(SUMMARY_CHARS * scale)


def lead_content(ctx: Any, state: Mapping[str, object]) -> SnapshotContent:
    """The digests of an orchestrator task (its state, findings and lead conversation)."""
    phases = list(state.get("phases") or [])
    index = int(state.get("phase_index") or 0)
    task_id = state["task_id"]
    records = [ctx.finding(task_id, k, v) for k, v in sorted((state.get("findings") or {}).items())]
    found, left, said = budgets(ctx.token_threshold)
    return SnapshotContent(
        what_was_found=what_was_found(
            records,
            phases=phases,
            current=phases[index] if phases else None,
            merged=state.get("merged"),
            objective=state.get("objective"),
            budget=found,
            answer=state.get("answer"),
        ),
        what_is_left=what_is_left(state, left, records),
        conversation_summary=task_conversation(
            ctx.store, state["task_id"], state.get("lead_log") or [], said
        ),
    )


MAX_FINDINGS_READ = 200


def task_findings(docs: Docs, task_id: str) -> list[FindingRecord]:
    """Findings records of `task_id` from the newest findings files of the memory."""
    records = []
    for path in list_findings(docs, merged=False)[:MAX_FINDINGS_READ]:
        try:
            meta = read_findings(path, docs)
        except (ArtifactError, OSError):
            continue
        if meta.get("task_id") == task_id:
            key = meta.get("subtask_id") or meta.get("agent")
            records.append(FindingRecord.of({**meta, "key": key, "path": docs.rel(path)}))
    return records


def agent_content(store: Any, task_id: str, threshold: int | None = None) -> SnapshotContent:
    """The digests of any agent's task handed off mid-turn (`TetherMemoryMiddleware`)."""
    found_chars, left_chars, said = budgets(threshold)
    records = task_findings(Docs.of(store), task_id)
    found = (
        what_was_found(records, budget=found_chars)
        if records
        else f"No findings file of task {task_id} yet; what the agent learnt so far is "
        "in its conversation (summary below)."
    )
    wm = WorkingMemory(store, task_id)
    turns = [t for m in wm.messages() if (t := turn_of(m.line, m.record))]
    source = wm.messages_doc
    lines = []
    request = next((t for t in turns if t.role == "user"), None)
    if request is not None:
        cite = md_code(f"{source}#L{request.line}")
        lines.append(
            "- The request is not finished (handed off at the token threshold): "
            f"{clip(request.text)} ({cite})"
        )
    step = next((t for t in reversed(turns) if t.role == "assistant"), None)
    if step is not None:
        cite = md_code(f"{source}#L{step.line}")
        lines.append(f"- Last step before the handoff: {clip(step.text)} ({cite})")
    questions = open_questions(records)
    if questions:
        lines.append("- Open questions in the findings:")
        lines += questions
    return SnapshotContent(
        what_was_found=found,
        what_is_left=_bounded(lines, left_chars),
        conversation_summary=task_conversation(store, task_id, budget=said),
    )
