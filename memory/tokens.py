"""Token estimation without a tokenizer download.

tether counts tokens from a model's reported usage when there is one; everywhere else it
uses this estimator: one token per four characters, rounded up. It is the same rule as
LangChain's `count_tokens_approximately` (4 characters per token) so that numbers agree
between the `memory` CLI, which must not import LangChain, and the orchestrator.
"""

from __future__ import annotations

import math

CHARS_PER_TOKEN = 4


def estimate_tokens(text: str) -> int:
    """Estimated tokens in `text`: `ceil(len(text) / 4)`; 0 for the empty string."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)
