"""The token gauge: per-agent and total usage, the warning zone and the save threshold.

Counting: each model call counts its `usage_metadata["total_tokens"]` when the model
reports usage, else LangChain's `count_tokens_approximately` of what was sent and
received (`orchestrator.agents.provider.usage_tokens`). Per-agent totals live in the state
(`tokens`, keyed `lead` and `{agent}:{subtask}`).

The gauge that triggers a handoff is the size of the *lead's context* (what its next call
would send), not the cumulative spend: in the warning zone (`warning_ratio` x threshold)
tether warns once per context; at the threshold the `monitor` node writes
`context_snapshots/snap_{ts}.md` and continues the lead in a fresh context seeded from
that snapshot, the overview, the plan and the skills index. The threshold defaults to the
external-memory skill's 150,000 tokens, overridable by the workflow file and
`--token-threshold`.

Invariant: after a handoff the lead's conversation log is empty, so its next context is
the fixed seed only, far below the threshold for any sensible threshold.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from orchestrator.config.defaults import TOKEN_THRESHOLD, WARNING_RATIO

OK, WARN, SAVE = "ok", "warn", "save"


@dataclass
class UsageRatio:
    """Provider-reported input tokens per estimated token, over the calls seen so far.

    tether estimates tokens with LangChain's approximate counter (about 4 characters a
    token); a provider may count far more (code, other scripts, its own overhead). Budgets
    that must hold in the provider's tokens (a context cut, the size at which a tool result
    is evicted to memory) scale the estimate by this ratio. Shared by every agent of a
    run (thread-safe); 1.0 until a call with reported usage is seen.
    """

    reported: int = 0
    estimated: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def observe(self, estimated: int, reported: int) -> None:
        """One call: the estimate of what was sent, and the input tokens reported for it."""
        if estimated <= 0 or reported <= 0:
            return
        with self._lock:
            self.estimated += estimated
            self.reported += reported

    @property
    def value(self) -> float:
        """Reported per estimated token (never below 1: the estimate is the floor)."""
        with self._lock:
            if not self.estimated:
                return 1.0
            return max(1.0, self.reported / self.estimated)

    def tokens(self, estimate: int) -> int:
        """`estimate` in the provider's tokens."""
        return int(estimate * self.value)


@dataclass(frozen=True)
class TokenGauge:
    """Zones of a token count against a threshold."""

    threshold: int = TOKEN_THRESHOLD
    warning_ratio: float = WARNING_RATIO

    @property
    def warn_at(self) -> int:
        return int(self.threshold * self.warning_ratio)

    def zone(self, tokens: int) -> str:
        if tokens >= self.threshold:
            return SAVE
        if tokens >= self.warn_at:
            return WARN
        return OK


def total_tokens(tokens: dict[str, int] | None) -> int:
    """The task's spend: the sum of its per-agent totals."""
    return sum(int(v) for v in (tokens or {}).values())
