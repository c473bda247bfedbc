"""The defaults a run falls back on when neither the skill, the workflow nor a flag sets them.

One home for each, so the skill's front matter, the workflow model, the token monitor, the
memory middleware and the live view agree.
"""

from __future__ import annotations

DEFAULT_PHASES = ("exploration", "planning", "implementation", "review")
"""Phases of a run when the workflow names none."""
TOKEN_THRESHOLD = 150_000
"""Tokens of lead context at which a snapshot and a fresh context are made."""
WARNING_RATIO = 0.8
"""Fraction of the threshold where the warning zone starts."""
DEFAULT_NUDGES = 1
"""Replies without a tool call an agent gets a nudge for ("use a tool, or finish") before
its final tool is forced (an agent's `nudges`)."""
SUBAGENT_MAX_TOKENS: int | None = None
"""A subagent's token cap when neither its spec nor the thresholds set one: none."""
RECALL_SCOPES = ("findings", "detail", "facts", "episodes", "entries")
"""Views recalled into an agent's context: what agents found and what was learnt before
(checkpoints and snapshots repeat the plan and would crowd them out)."""
