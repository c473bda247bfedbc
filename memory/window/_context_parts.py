"""The parts of one built context and the messages they make (see `memory.window.context`).

Parts 1-4 (system prompt, overview, summaries, recalled snippets) and the fill render as one
system message; the recent turns follow it as logged. Every token count of the whole context
goes through `assemble()`, so what is counted is exactly what is returned.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from memory.task.archive import Summary
from memory.text.tokens import count_tokens, estimate_tokens, message_tokens


@dataclass(eq=False)
class Snippet:
    """One recalled block of the system message, with the citation that gets it back."""

    citation: str
    text: str
    tokens: int
    path: str = ""
    line: int | None = None
    fill: bool = False
    """Added by the fill (a re-added or further hit, or a neighbouring message)."""

    @classmethod
    def from_text(
        cls, citation: str, text: str, path: str, line: int | None, *, max_chars: int
    ) -> Snippet:
        """`text` on one line, cut to `max_chars`, as a `- [citation] text` block."""
        text = " ".join(text.split())
        if len(text) > max_chars:
            text = text[: max_chars - 3] + "..."
        block = f"- [{citation}] {text}"
        return cls(citation, block, estimate_tokens(block) + 1, path, line)


@dataclass
class Parts:
    """What goes into one context, before it is assembled into messages."""

    system: str
    overview: str
    summaries: list[tuple[Summary, str]]
    snippets: list[Snippet]
    turns: list[list[dict[str, Any]]]
    turn_lines: list[tuple[int, int]]


def system_text(parts: Parts) -> str:
    """The one system message: the prompt, then the overview, summaries and snippets."""
    sections = [parts.system]
    if parts.overview.strip():
        sections.append("# Working memory (overview.md)\n" + parts.overview.strip())
    if parts.summaries:
        sections.append(
            "# Conversation summaries (highest level first)\n"
            + "\n\n".join(text for _, text in parts.summaries)
        )
    if parts.snippets:
        sections.append("# Recalled from memory\n" + "\n".join(s.text for s in parts.snippets))
    return "\n\n".join(s for s in sections if s)


def assemble(parts: Parts) -> list[dict[str, Any]]:
    """The messages of the context: the system message, then the recent turns."""
    messages = [{"role": "system", "content": system_text(parts)}]
    for turn in parts.turns:
        messages.extend(turn)
    return messages


def system_tokens(system_text: str) -> int:
    """Tokens of the system message holding `system_text`."""
    return message_tokens({"role": "system", "content": system_text})


def part_tokens(parts: Parts) -> dict[str, int]:
    """Tokens per part, as `BuiltContext.parts` reports them."""
    return {
        "system": estimate_tokens(parts.system),
        "overview": estimate_tokens(parts.overview),
        "summaries": sum(estimate_tokens(t) for _, t in parts.summaries),
        "snippets": sum(s.tokens for s in parts.snippets if not s.fill),
        "recent": sum(count_tokens(t) for t in parts.turns),
        "fill": sum(s.tokens for s in parts.snippets if s.fill),
    }
