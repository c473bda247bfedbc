"""Token estimation without a tokenizer download.

tether counts tokens from a model's reported usage when there is one; everywhere else it
uses this estimator: one token per four characters, rounded up. It is the same rule as
LangChain's `count_tokens_approximately` (4 characters per token) so that numbers agree
between the `memory` CLI, which must not import LangChain, and the orchestrator.
`count_tokens` counts chat messages the same way (content, tool calls, and LangChain's
per-message overhead).
"""

from __future__ import annotations

import json
import math
from typing import Any

CHARS_PER_TOKEN = 4
#: Per-message overhead, as in LangChain's `count_tokens_approximately` (role, separators).
TOKENS_PER_MESSAGE = 3


def estimate_tokens(text: str) -> int:
    """Estimated tokens in `text`: `ceil(len(text) / 4)`; 0 for the empty string."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def message_tokens(message: dict[str, Any]) -> int:
    """Estimated tokens of one chat message (content, tool calls, overhead)."""
    content = message.get("content", "")
    if not isinstance(content, str):
        content = json.dumps(content, ensure_ascii=False)
    tokens = estimate_tokens(content) + TOKENS_PER_MESSAGE
    if message.get("tool_calls"):
        tokens += estimate_tokens(json.dumps(message["tool_calls"], ensure_ascii=False))
    return tokens


def count_tokens(messages: list[dict[str, Any]]) -> int:
    """Estimated tokens of a message list (what `BuiltContext.tokens` reports)."""
    return sum(message_tokens(m) for m in messages)
