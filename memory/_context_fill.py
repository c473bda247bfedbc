"""The fill: recall spends the budget a context's parts left unused (see `memory.context`).

It runs after the parts were fitted to `budgets.total`, and only adds: recall hits (as
snippets marked `fill`) and the neighbouring lines of recalled messages. Invariant: the fill
never takes the context above `budgets.total`, nor above the sum of the part budgets, so a
build with the fill is never over budget where one without it was not.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from memory._context_parts import Parts, Snippet, assemble, system_text, system_tokens
from memory.backends.blocks import message_text
from memory.tokens import count_tokens
from memory.working import WorkingMemory

if TYPE_CHECKING:
    from memory.context import ContextBudgets

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
