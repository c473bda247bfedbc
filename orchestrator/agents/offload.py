"""Large tool results go to memory: `OffloadLargeToolResults`, a LangChain middleware.

A tool result whose size, in the provider's tokens, is over the limit is stored as a
memory entry (the same store as `memory log`: summary, chunks) and replaced, in what the
model sees, by its head, its size and the entry id; the model reads more with
`memory_fetch(entry_id, chunk=N)`. The limit is `max_tokens` if given, else 10% of the
model's context window (its LangChain profile's `max_input_tokens`, seen at the first model
call), else 8,000. Sizes are estimated (about 4 characters a token) and scaled by the ratio
of provider-reported to estimated tokens seen so far (`orchestrator.agents.gauge.UsageRatio`),
so a provider that counts three times more tokens than the estimate evicts a third as much
text.

A `memory_fetch` result is never stored again (that would only make a second copy): one
over the limit is cut to it, with a note naming the chunks to fetch instead.

`TetherMemoryMiddleware` inherits this, so any `create_agent` agent that adds tether's
memory middleware evicts its large tool results too; tether's subagents get it on its own.

Invariant: the tool message keeps its id, name and status; only its content changes, and
the whole original content is in the entry, byte for byte.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import ToolMessage

from orchestrator.agents.chat_models import context_window
from orchestrator.agents.gauge import UsageRatio
from orchestrator.events import build_event

if TYPE_CHECKING:
    from langchain.agents.middleware import (
        ModelCallResult,
        ModelRequest,
        ModelResponse,
        ToolCallRequest,
    )
    from langgraph.types import Command

    from orchestrator.types import JsonObject

DEFAULT_LIMIT = 8_000
"""Tokens of a tool result kept in context when the model's window is unknown."""
WINDOW_SHARE = 0.10
"""Share of the model's context window one tool result may take."""
HEAD_SHARE = 0.5
"""Share of the limit the head of an evicted result takes (the note is extra)."""
MAX_HEAD_TOKENS = 1_000
CHARS_PER_TOKEN = 4
TAG = "tool-result"
FETCH_TOOL = "memory_fetch"


def result_limit(configured: int | None, model: object = None) -> int:
    """The eviction limit in provider tokens: `configured`, else 10% of the model's
    window, else `DEFAULT_LIMIT`."""
    if configured:
        return int(configured)
    window = context_window(model) if model is not None else None
    return max(500, int(window * WINDOW_SHARE)) if window else DEFAULT_LIMIT


def _text(content: object) -> str | None:
    """A tool message's content as text; None for content that is not text (images)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict) and block.get("type") == "text":
                parts.append(str(block.get("text", "")))
            else:
                return None
        return "\n".join(parts)
    return None


class OffloadLargeToolResults(AgentMiddleware):
    """Evict tool results over the limit to memory entries (see the module docstring).

    Args:
        memory: a memory directory or a `MemoryStore`.
        max_tokens: the limit in provider tokens (None: from the model's window).
        usage: the run's reported/estimated token ratio (None: this middleware's own,
            from the usage the model reports).
        tags: extra tags for the entries (e.g. the task).
        on_event: receives `{"event": "offloaded", ...}` per evicted result.
    """

    def __init__(
        self,
        memory: str | os.PathLike[str] | Any,
        *,
        max_tokens: int | None = None,
        usage: UsageRatio | None = None,
        tags: tuple[str, ...] = (),
        on_event: Callable[[JsonObject], None] | None = None,
    ) -> None:
        super().__init__()
        if hasattr(memory, "backend"):
            self.store = memory
        else:
            from memory.store import MemoryStore

            self.store = MemoryStore(Path(memory))
        self.max_tokens = max_tokens
        self.usage = usage if usage is not None else UsageRatio()
        self.extra_tags = tuple(tags)
        self.offload_events = on_event
        self._model: Any = None

    def offload_limit(self) -> int:
        """The current limit in provider tokens."""
        return result_limit(self.max_tokens, self._model)

    def note_model(self, model: object) -> None:
        """Remember the model (its window sets the default limit)."""
        if model is not None and self._model is None:
            self._model = model

    def wrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]
    ) -> ModelCallResult:
        self.note_model(getattr(request, "model", None))
        return handler(request)

    def wrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], ToolMessage | Command]
    ) -> ToolMessage | Command:
        return self.offload(handler(request))

    def offload(self, result: object, limit: int | None = None) -> Any:
        """`result` with its content replaced by a reference when it is over the limit
        (`limit`, else `offload_limit()`)."""
        if not isinstance(result, ToolMessage):
            return result  # a Command or anything else a tool may return
        text = _text(result.content)
        if text is None:
            return result
        limit = limit or self.offload_limit()
        tokens = self.usage.tokens(len(text) // CHARS_PER_TOKEN + 1)
        if tokens <= limit:
            return result
        ratio = self.usage.value
        head_chars = int(min(limit * HEAD_SHARE, MAX_HEAD_TOKENS) / ratio * CHARS_PER_TOKEN)
        head = text[: max(200, head_chars)]
        if result.name == FETCH_TOOL:
            note = (
                f"\n[... cut: this piece is ~{tokens} tokens, over the {limit}-token limit of "
                "one tool result; fetch one chunk at a time (chunk=0, 1, ...) ...]"
            )
            return result.model_copy(update={"content": head + note})
        entry = self.store.log(
            text, tags=[TAG, f"tool:{result.name or 'tool'}", *self.extra_tags], type="output"
        )
        pieces = f"{entry.pieces} chunk(s), chunk=0..{entry.pieces - 1}"
        note = (
            f"\n[... {len(text):,} characters, ~{tokens:,} tokens: over the {limit:,}-token limit "
            f"of one tool result, so the whole result is stored in memory as entry {entry.id} "
            f"({pieces}). Read more with memory_fetch(entry_id={entry.id!r}, chunk=N), or "
            f"search it with recall_memory. Summary: {entry.summary_line} ...]"
        )
        if self.offload_events is not None:
            self.offload_events(
                build_event(
                    "offloaded", tool=result.name, entry=entry.id, tokens=tokens, limit=limit
                )
            )
        return result.model_copy(update={"content": head + note})
