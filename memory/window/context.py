"""Budgeted context assembly for each lead-agent call .

`ContextBuilder.build()` returns the messages for one call, in priority order:

1. the system prompt                      (budget `system`, 1,500 tokens)
2. the task's `overview.md`               (budget `overview`, 1,000 tokens)
3. active summaries, highest level first  (budget `summaries`, 2,000 tokens)
4. snippets recalled for the query        (budget `snippets`, 1,500 tokens), skipping what
   is already in context (recent lines, included summaries, the overview)
5. recent turns, whole turns from the end (budget `recent`, 3,000 tokens; at most
   `recent_turns` user turns, by default the last 4 pairs)

6. fill: when the parts leave budget unused, recall fills it: snippets left out by the
   snippet budget, further hits (up to `fill_limit`), and the message before and after each
   recalled `messages.jsonl` line, placed next to it, in rank order, each with its citation

Parts 1-4 and 6 form one system message (providers differ on several system messages); recent
turns follow as they were logged (tool calls and their results kept together). The parts and
how they render are in `memory.window._context_parts`, the fill in `memory.window.context`.

Invariant: `BuiltContext.tokens`, counted over the returned messages exactly as
`count_tokens()` counts them, never exceeds `budgets.total`. When the parts together are
over the total, this order applies: drop snippets first (lowest ranked first), then
the oldest recent turns, then the oldest summaries (a summary is first cut to its opening
line, then dropped). Every omission is named in `omitted` with a citation the agent can
`recall_memory`/`memory_read` to get it back. The fill never brings the context above
`budgets.total`, nor above the sum of the part budgets (system + overview + summaries +
snippets + recent). A caller that keeps the recent turns itself (`recent=0`) gets no fill:
the builder does not see that caller's whole context, so it cannot know what is unused.

Before assembling, the builder runs the task's summariser when it is due (every N user
turns), so using the builder is enough to keep the archive going; at its first build for a
task it also logs the "Available memory" message once (`memory_index=False` to skip).

The fill (`fill`, at the end of this module): recall spends the budget a context's parts
left unused. It runs after the parts were fitted to `budgets.total`, and only adds: recall
hits (as snippets marked `fill`) and the neighbouring lines of recalled messages. It never
takes the context above `budgets.total`, nor above the sum of the part budgets, so a build
with the fill is never over budget where one without it was not.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from memory.backends.blocks import message_text
from memory.errors import MemoryStoreError
from memory.facts.longterm import ensure_memory_index
from memory.task.archive import Archive, Summary
from memory.task.working import Message, WorkingMemory
from memory.text.tokens import count_tokens, estimate_tokens
from memory.window._context_parts import (
    Parts,
    Snippet,
    assemble,
    part_tokens,
    system_text,
    system_tokens,
)

_TRUNCATED = "\n[... truncated: {n} more tokens; read {where}]"


@dataclass
class ContextBudgets:
    """Token budgets (defaults sized for an 8K context); every one is configurable."""

    total: int = 8000
    system: int = 1500
    overview: int = 1000
    summaries: int = 2000
    snippets: int = 1500
    recent: int = 3000
    recent_turns: int = 4
    """At most this many user turns (with their replies) in the recent part."""
    snippet_limit: int = 10
    """Ask recall for this many candidates."""
    snippet_chars: int = 600
    """Each snippet is cut to this many characters."""
    fill_limit: int = 60
    """Recall candidates used to fill unused budget (with their neighbouring messages);
    0 turns the fill off, and so does `recent=0` (the caller keeps the turns itself)."""


@dataclass
class BuiltContext:
    """One assembled context."""

    messages: list[dict[str, Any]]
    tokens: int
    parts: dict[str, int]
    """Tokens per part: system, overview, summaries, snippets, recent, fill."""
    omitted: list[str] = field(default_factory=list)
    """What was left out or cut, each with where to find it."""
    summarized: list[str] = field(default_factory=list)
    """Summary files written by this build (the archive ran because it was due)."""
    warnings: list[str] = field(default_factory=list)

    def to_langchain(self) -> list[Any]:
        """The messages as LangChain `BaseMessage`s (imports langchain-core lazily)."""
        from langchain_core.messages import convert_to_messages

        return convert_to_messages(self.messages)


def truncate_to(text: str, max_tokens: int, where: str) -> tuple[str, bool]:
    """`text` cut to `max_tokens` with a marker saying where the rest is; (text, was_cut)."""
    if estimate_tokens(text) <= max_tokens:
        return text, False
    marker_room = estimate_tokens(_TRUNCATED.format(n=10**7, where=where)) + 1
    keep_chars = max(0, (max_tokens - marker_room) * 4)
    cut = text[:keep_chars]
    rest = estimate_tokens(text) - estimate_tokens(cut)
    out = cut + _TRUNCATED.format(n=rest, where=where)
    if estimate_tokens(out) > max_tokens:  # a budget too small even for the marker
        out = text[: max(0, max_tokens * 4)]
    return out, True


class ContextBuilder:
    """Builds the lead's context for one task.

    Args:
        store: the `MemoryStore`.
        task_id: the task whose working memory is used.
        budgets: token budgets (defaults: `ContextBudgets()`).
        archive: an `Archive` to use (e.g. with a model summariser); default extractive.
        search: `(query, limit) -> list[SearchResult]`; default `store.search` over all views.
    """

    def __init__(
        self,
        store: Any,
        task_id: str,
        budgets: ContextBudgets | None = None,
        *,
        archive: Archive | None = None,
        search: Callable[[str, int], list[Any]] | None = None,
        memory_index: bool = True,
    ):
        self.store = store
        self.budgets = budgets or ContextBudgets()
        self.wm = archive.wm if archive is not None else WorkingMemory(store, task_id)
        self.archive = archive or Archive(self.wm)
        self._search = search or (lambda q, n: store.search(q, limit=n, widen=False))
        self._index_pending = memory_index

    def build(self, system_prompt: str, query: str | None = None) -> BuiltContext:
        """Assemble the context for the next lead call.

        Args:
            system_prompt: the agent's instructions.
            query: what to recall snippets for; `None` uses the last user message,
                `""` recalls nothing.
        """
        warnings: list[str] = []
        summarized: list[str] = []
        if self._index_pending:  # the long-term memory index, once per task, as a user message
            ensure_memory_index(self.wm)
            self._index_pending = False
        result = self.archive.maybe_summarize()
        if result is not None:
            summarized = [s.name for s in result.written]
            if result.error:
                warnings.append(result.error)
        b, omitted = self.budgets, []
        system, cut = truncate_to(system_prompt, b.system, "the agent's configuration")
        if cut:
            omitted.append(f"system prompt cut to {b.system} tokens")
        overview, cut = truncate_to(self.wm.overview_text(), b.overview, self.wm.overview_doc)
        if cut:
            omitted.append(
                f"overview cut to {b.overview} tokens: memory_read {self.wm.overview_doc}"
            )
        turns, turn_lines = self._recent(omitted)
        summaries = self._summaries(omitted)
        if query is None:
            query = self._last_user_text()
        snippets, hits = self._snippets(query, turn_lines, summaries, omitted, warnings)
        parts = Parts(system, overview, summaries, snippets, turns, turn_lines)
        messages = self._fit_total(parts, omitted)
        if hits and filling(self.budgets):
            messages = fill(
                parts, hits, omitted, budgets=self.budgets, wm=self.wm, store=self.store
            )
        return BuiltContext(
            messages=messages,
            tokens=count_tokens(messages),
            parts=part_tokens(parts),
            omitted=omitted,
            summarized=summarized,
            warnings=warnings,
        )

    # -- parts -------------------------------------------------------------------------
    def _last_user_text(self) -> str:
        for message in reversed(self.wm.tail(50)):
            if message.is_user_turn:
                return message.content
        return ""

    def _recent(self, omitted: list[str]) -> tuple[list[list[dict]], list[tuple[int, int]]]:
        """Whole turns from the end within the recent budget (the newest always kept)."""
        b = self.budgets
        tail = self._tail_turns(b.recent_turns)
        first = self.wm.first_message()
        at_start = bool(tail) and first is not None and tail[0].line == first.line
        groups = _group_turns(tail, b.recent_turns, at_start=at_start)
        kept: list[list[dict]] = []
        lines: list[tuple[int, int]] = []
        used = 0
        for group in reversed(groups):
            msgs = [_chat_message(m) for m in group]
            cost = count_tokens(msgs)
            if kept and used + cost > b.recent:
                omitted.append(_turn_note(group, "recent budget"))
                continue
            if not kept and cost > b.recent:
                msgs = _shrink_turn(msgs, group, b.recent)
                cost = count_tokens(msgs)
                omitted.append(
                    f"latest turn cut to {b.recent} tokens: {_span(group)} has it in full"
                )
            kept.insert(0, msgs)
            lines.insert(0, (group[0].line, group[-1].line))
            used += cost
        return kept, lines

    def _tail_turns(self, turns: int) -> list[Message]:
        """Enough of the log's tail to hold `turns` whole user turns (or the whole log)."""
        window = max(16, turns * 8)
        while True:
            tail = self.wm.tail(window)
            starts = sum(1 for m in tail if m.is_user_turn)
            if starts > turns or len(tail) < window or window >= 1 << 16:
                return tail
            window *= 4

    def _summaries(self, omitted: list[str]) -> list[tuple[Summary, str]]:
        """Active summaries within budget: newest kept whole first, older cut, then dropped."""
        active = self.archive.state().active()
        budget, chosen = self.budgets.summaries, {}
        for s in sorted(active, key=lambda s: s.last_line, reverse=True):
            full = _summary_block(s, s.text)
            cost = estimate_tokens(full) + 1
            if cost <= budget:
                chosen[s.name] = full
                budget -= cost
                continue
            short = _summary_block(s, _first_line(s.text))
            cost = estimate_tokens(short) + 1
            if cost <= budget:
                chosen[s.name] = short
                budget -= cost
                omitted.append(f"summary cut to its first line: detail/{s.name}")
            else:
                omitted.append(f"summary left out: detail/{s.name} ({s.span})")
        ordered = sorted(
            (s for s in active if s.name in chosen), key=lambda s: (-s.level, s.first_line)
        )
        return [(s, chosen[s.name]) for s in ordered]

    def _snippets(
        self,
        query: str,
        turn_lines: list[tuple[int, int]],
        summaries: list[tuple[Summary, str]],
        omitted: list[str],
        warnings: list[str],
    ) -> tuple[list[Snippet], list[Snippet]]:
        """The snippets within the snippet budget, and every usable hit in rank order."""
        budgets = self.budgets
        if not query.strip() or budgets.snippets <= 0:
            return [], []
        wanted = max(budgets.snippet_limit, budgets.fill_limit if filling(budgets) else 0)
        try:
            results = self._search(query, wanted)
        except MemoryStoreError as exc:
            warnings.append(f"recall skipped: {exc}")
            return [], []
        except Exception as exc:  # noqa: BLE001 - recall is optional context, never fatal
            warnings.append(f"recall skipped ({type(exc).__name__}: {exc})")
            return [], []
        in_context = {f"detail/{s.name}" for s, _ in summaries}
        messages_rel = self.wm.messages_doc
        overview_rel = self.wm.overview_doc
        budget, out, hits = budgets.snippets, [], []
        for rank, r in enumerate(results):
            path = str(getattr(r, "path", "") or "")
            line = getattr(r, "line", None)
            if path == overview_rel or any(path.endswith(p) for p in in_context):
                continue
            if path == messages_rel and line and any(a <= line <= b for a, b in turn_lines):
                continue
            citation = _full_citation(r, path, self.wm.task_doc)
            hit = Snippet.from_text(
                citation, str(r.text), path, line, max_chars=budgets.snippet_chars
            )
            hits.append(hit)
            if rank >= budgets.snippet_limit:
                continue  # only the fill uses the further candidates
            if hit.tokens > budget:
                omitted.append(f"snippet left out (snippet budget): {citation}")
                continue
            out.append(hit)
            budget -= hit.tokens
        return out, hits

    # -- the total ---------------------------------------------------------------------
    def _fit_total(self, parts: Parts, omitted: list[str]) -> list[dict[str, Any]]:
        """Trim in priority order until the whole context is within `budgets.total`."""
        total = self.budgets.total
        while True:
            messages = assemble(parts)
            if count_tokens(messages) <= total:
                return messages
            if parts.snippets:
                dropped = parts.snippets.pop()
                omitted.append(f"snippet left out (total budget): {dropped.citation}")
            elif len(parts.turns) > 1:
                parts.turns.pop(0)
                a, b = parts.turn_lines.pop(0)
                omitted.append(f"recent turn left out (total budget): messages.jsonl#L{a}-L{b}")
            elif parts.summaries:
                s, _ = parts.summaries.pop(0)  # highest level, oldest first
                omitted.append(f"summary left out (total budget): detail/{s.name} ({s.span})")
            else:
                return self._last_resort(parts, omitted, total)

    def _last_resort(self, parts: Parts, omitted: list[str], total: int) -> list[dict]:
        """Only the system prompt, overview and one turn are left: cut them to fit."""
        over = count_tokens(assemble(parts)) - total
        if parts.turns and over > 0:
            turn = parts.turns[0]
            budget = max(0, count_tokens(turn) - over)
            parts.turns[0] = _shrink_turn(turn, None, budget)
            omitted.append("latest turn cut further (total budget)")
        for attr, where in (
            ("overview", self.wm.overview_doc),
            ("system", "the agent's configuration"),
        ):
            over = count_tokens(assemble(parts)) - total
            if over <= 0:
                break
            text = getattr(parts, attr)
            setattr(
                parts, attr, truncate_to(text, max(0, estimate_tokens(text) - over - 8), where)[0]
            )
            omitted.append(f"{attr} cut (total budget)")
        messages = assemble(parts)
        while count_tokens(messages) > total and parts.turns:
            parts.turns.pop()
            messages = assemble(parts)
        return messages


def build_context(
    store: Any,
    task_id: str,
    system_prompt: str,
    query: str | None = None,
    budgets: ContextBudgets | None = None,
) -> BuiltContext:
    """`ContextBuilder(store, task_id, budgets).build(system_prompt, query)` as a function."""
    return ContextBuilder(store, task_id, budgets).build(system_prompt, query)


# -- helpers -----------------------------------------------------------------------------
def _group_turns(
    messages: list[Message], max_turns: int, *, at_start: bool = False
) -> list[list[Message]]:
    """The last `max_turns` turns (a turn starts at a user message) of `messages`.

    Messages before the first user turn form a turn of their own when `messages` starts at
    the beginning of the log; otherwise they are the cut-off end of an older turn.
    """
    groups: list[list[Message]] = []
    for m in messages:
        if m.is_user_turn or not groups:
            groups.append([m])
        else:
            groups[-1].append(m)
    if groups and not groups[0][0].is_user_turn and len(groups) > 1 and not at_start:
        groups = groups[1:]  # a partial turn cut by the tail window
    groups = groups[-max_turns:] if max_turns > 0 else []
    if groups:  # a tool result without the call that made it would be rejected by providers
        first = groups[0]
        while len(first) > 1 and first[0].role == "tool":
            first = first[1:]
        groups[0] = first
    return groups


def _chat_message(m: Message) -> dict[str, Any]:
    out: dict[str, Any] = {"role": m.role, "content": m.content}
    for key in ("tool_calls", "tool_call_id", "name"):
        if m.record.get(key):
            out[key] = m.record[key]
    return out


def _span(group: list[Message]) -> str:
    return f"messages.jsonl#L{group[0].line}-L{group[-1].line}"


def _turn_note(group: list[Message], why: str) -> str:
    return f"recent turn left out ({why}): {_span(group)}"


def _shrink_turn(msgs: list[dict], group: list[Message] | None, budget: int) -> list[dict]:
    """Cut the longest contents of one turn until it fits `budget` tokens."""
    msgs = [dict(m) for m in msgs]
    lines = [m.line for m in group] if group else [None] * len(msgs)
    for _ in range(len(msgs) * 2):
        over = count_tokens(msgs) - budget
        if over <= 0:
            return msgs
        i = max(range(len(msgs)), key=lambda k: len(str(msgs[k]["content"])))
        content = str(msgs[i]["content"])
        where = f"messages.jsonl#L{lines[i]}" if lines[i] else "messages.jsonl"
        msgs[i]["content"] = truncate_to(
            content, max(0, estimate_tokens(content) - over - 1), where
        )[0]
    return msgs


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip() and line.strip() != "...":
            return line.strip()
    return ""


def _summary_block(s: Summary, text: str) -> str:
    return f"[L{s.level} detail/{s.name} covers {s.span}]\n{text}"


def _full_citation(result: Any, path: str, task_folder: str) -> str:
    """The result's citation; task-relative ones from another task get that task's folder."""
    citation = str(getattr(result, "citation", "") or "") or path
    if path.startswith("working/") and not path.startswith(task_folder + "/"):
        if citation.startswith(("messages.jsonl", "overview.md", "detail/")):
            return f"{path.split('/')[0]}/{path.split('/')[1]}/{citation}"
    return citation


_LINE_REF = re.compile(r"#L\d+$")
_SNIPPET_CUTS = ("snippet budget", "total budget")


def filling(budgets: ContextBudgets) -> bool:
    """Whether unused budget is filled: on, unless the caller keeps the turns itself."""
    return budgets.fill_limit > 0 and budgets.recent > 0 and budgets.recent_turns > 0


def fill(
    parts: Parts,
    hits: list[Snippet],
    omitted: list[str],
    *,
    budgets: ContextBudgets,
    wm: WorkingMemory,
    store: Any,
) -> list[dict]:
    """Use the budget the parts left: hits that did not fit the snippet budget, further
    hits, and the messages before and after each recalled message line, in rank order.

    Each addition is kept only if the whole context, counted as `count_tokens` counts
    it, stays within `budgets.total` and the sum of the part budgets.

    Args:
        parts: the parts as fitted to the total; the fill adds to `parts.snippets`.
        hits: every usable recall hit, in rank order.
        omitted: the build's omissions; a snippet the fill brings back leaves it.
        budgets: the builder's budgets.
        wm: the task's working memory (its recent turns are already in context).
        store: the `MemoryStore`, for the neighbours of hits from other tasks.
    """
    b = budgets
    cap = min(b.total, b.system + b.overview + b.summaries + b.snippets + b.recent)
    others = count_tokens(assemble(parts)[1:])
    if others + system_tokens(system_text(parts)) >= cap:
        return assemble(parts)
    shown = {(s.path, s.line) for s in parts.snippets}
    recent = set() if not parts.turn_lines else {wm.messages_doc}
    logs: dict[str, WorkingMemory | None] = {}

    def fits() -> bool:
        return others + system_tokens(system_text(parts)) <= cap

    for hit in hits:
        if hit not in parts.snippets:
            if (hit.path, hit.line) in shown:
                continue
            hit.fill = True
            parts.snippets.append(hit)
            if not fits():
                parts.snippets.remove(hit)
                continue
            shown.add((hit.path, hit.line))
            notes = {f"snippet left out ({why}): {hit.citation}" for why in _SNIPPET_CUTS}
            omitted[:] = [o for o in omitted if o not in notes]
        if not hit.path.endswith("/messages.jsonl") or not hit.line:
            continue
        for line, after in ((hit.line - 1, False), (hit.line + 1, True)):
            if line < 1 or (hit.path, line) in shown:
                continue
            if hit.path in recent and any(a <= line <= z for a, z in parts.turn_lines):
                continue  # already in context as a recent turn
            text = _line_text(hit.path, line, logs, wm, store)
            if text is None:
                continue
            citation = _LINE_REF.sub(f"#L{line}", hit.citation)
            near = Snippet.from_text(citation, text, hit.path, line, max_chars=b.snippet_chars)
            near.fill = True
            at = parts.snippets.index(hit)
            parts.snippets.insert(at + 1 if after else at, near)
            if fits():
                shown.add((hit.path, line))
            else:
                parts.snippets.remove(near)
    return assemble(parts)


def _line_text(
    path: str,
    line: int,
    logs: dict[str, WorkingMemory | None],
    wm: WorkingMemory,
    store: Any,
) -> str | None:
    """The searchable text of one line of a task's `messages.jsonl` (None if absent)."""
    if path not in logs:
        task = path.split("/")[1] if path.count("/") == 2 else ""
        try:
            logs[path] = wm if path == wm.messages_doc else WorkingMemory(store, task)
        except Exception:  # noqa: BLE001 - a path that names no task: no neighbours
            logs[path] = None
    found_wm = logs[path]
    if found_wm is None or not path.startswith("working/"):
        return None
    found = found_wm.message_range(line, line)
    if not found:
        return None
    return message_text(json.dumps(found[0].record, ensure_ascii=False).encode("utf-8"))
