"""Where a run stands, tallied as its progress events arrive: what the live view draws.

`RunProgress` takes each event (`apply`) and keeps, per event, constant work whatever the
number of agents seen: the count of agents per state (task-wide and in the current
phase), the agents of each state in the order they entered it (an insertion-ordered dict
per state, so a move is two O(1) dict operations, the oldest running and the newest done
are the first items of an iteration), the current plan's titles, the task's spend (tokens
and model calls) and the subagents' rate. The view reads a bounded slice of it per frame
(`first`, `newest`), never the whole.

Spend: the last figure the run reported for the whole task (`tokens.total` and
`tokens.calls` of the lead's gauge, which the monitor and a continued run's standing
events give) plus what the subagents and the lead reported since (an agent's `tokens` and
`steps` grow; only the growth is added). An agent told again by a continued run
(`reused`) adds nothing: the total it came with counts it already.

Invariant: `apply` never iterates over the agents (amortized: a state's dict is compacted
once the keys removed from it outnumber twice the kept), and a read (`first`, `newest`)
costs the rows it returns.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import Any

from orchestrator.config.defaults import TOKEN_THRESHOLD, WARNING_RATIO
from orchestrator.events import Event

#: Each agent state, and the order agents are listed (and counted) in: what needs an eye
#: first.
STATE_ORDER = ("waiting", "running", "failed", "pending", "done")

#: Titles of the current plan kept for its line (the line is cut to the terminal anyway).
PLAN_TITLES = 24


class RunProgress:
    """A run's standing, kept as its events arrive (see the module docstring).

    Args:
        clock: seconds as a float, for each agent's start and the rate.
    """

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self.phase: str | None = None
        self.index = (0, 0)
        self.wave: int | None = None
        self.agents: dict[str, dict[str, Any]] = {}
        self.roles: set[str] = set()
        """The agent roles seen (one role: rows need not name it)."""
        self.by_state: dict[str, dict[str, None]] = {s: {} for s in STATE_ORDER}
        """Agent keys per state, in the order they entered it."""
        self._removed = dict.fromkeys(STATE_ORDER, 0)
        self.tally = dict.fromkeys(STATE_ORDER, 0)
        self.phase_tally: dict[str, dict[str, int]] = {}
        """Per phase (the key's part before `/`), agents per state."""
        self.lead: dict[str, Any] = {
            "context": 0,
            "threshold": TOKEN_THRESHOLD,
            "warning_ratio": WARNING_RATIO,
            "tokens": 0,
        }
        self.plan: list[str] = []
        """Titles of the current phase's plan (or wave)."""
        self.budget: int | None = None
        self.spent = 0
        self.calls = 0
        self.spend_known = False
        """A figure of the task's spend has been reported (else the line is not shown)."""
        self.finished_here = 0
        """Subagents that finished in this run (not told again by a resume): the rate."""
        self.first_start: float | None = None

    # -- events ------------------------------------------------------------------------------
    def apply(self, event: Event) -> None:
        """Tally one event (constant work)."""
        kind = event.get("event")
        if kind in ("start", "resume") and event.get("budget_tokens") is not None:
            self.budget = int(event["budget_tokens"])
        if kind == "phase":
            if event["phase"] != self.phase or event.get("wave") != self.wave:
                self.plan = []
            self.phase, self.index = event["phase"], (event["index"], event["total"])
            self.wave = event.get("wave")
        elif kind == "plan":
            self.plan = [s["title"] for s in event["subtasks"][:PLAN_TITLES]]
        elif kind == "agent":
            self._agent(event)
        elif kind == "tokens" and event.get("agent") == "lead":
            self._lead(event)
        elif kind == "finish" and event.get("usage"):  # the run's own count, the last call's too
            self.calls = int(event["usage"].get("calls") or self.calls)
        elif kind == "stopped":
            self.spent, self.spend_known = max(self.spent, int(event["spent"])), True
            self.budget = event.get("budget") or self.budget

    def _agent(self, event: Event) -> None:
        key, state = event["key"], event["state"]
        row = self.agents.get(key)
        if row is None:
            row = self.agents[key] = {"agent": event["agent"], "tokens": 0, "steps": 0}
            self.roles.add(event["agent"])
            old = None
        else:
            old = row["state"]
        row["state"] = state
        if event.get("title"):
            row["title"] = event["title"]
        if state == "running" and old != "running":
            row.update(since=self.clock(), steps=0, tool=None)
            if self.first_start is None:
                self.first_start = row["since"]
        self._spend(row, event)
        row["error"] = event.get("error") or ""
        for field in ("max_steps", "tool"):
            if event.get(field) is not None:
                row[field] = event[field]
        if state in ("done", "failed") and old != state and not event.get("reused"):
            self.finished_here += state == "done"
        self._move(key, old, state)

    def _spend(self, row: dict[str, Any], event: Event) -> None:
        """Add what an agent reported since its last event (its tokens and steps grow)."""
        tokens, steps = event.get("tokens"), event.get("steps")
        grew = 0 if tokens is None or event.get("reused") else max(0, int(tokens) - row["tokens"])
        if tokens:
            row["tokens"] = int(tokens)
        self.spent += grew
        if steps is not None and row["state"] == "running":
            self.calls += max(0, int(steps) - row["steps"])
            row["steps"] = int(steps)
        self.spend_known = self.spend_known or grew > 0

    def _move(self, key: str, old: str | None, new: str) -> None:
        phase = key.partition("/")[0]
        per_phase = self.phase_tally.setdefault(phase, dict.fromkeys(STATE_ORDER, 0))
        if old is not None:
            self._leave(old, key)
            self.tally[old] -= 1
            per_phase[old] -= 1
        self.by_state[new][key] = None
        self.tally[new] += 1
        per_phase[new] += 1

    def _leave(self, state: str, key: str) -> None:
        """`key` leaves `state`'s dict. A dict keeps a removed key's slot until it grows,
        and iterating it from the start walks those slots: 10,000 agents that left
        `pending` would make every frame walk 10,000 slots. Once the removed outnumber
        twice the kept, the dict is copied (compact), which the removals since paid for."""
        keys = self.by_state[state]
        keys.pop(key, None)
        self._removed[state] += 1
        if self._removed[state] > 2 * len(keys) + 64:
            self.by_state[state] = dict(keys)
            self._removed[state] = 0

    def _lead(self, event: Event) -> None:
        keys = ("context", "threshold", "warning_ratio", "estimated")
        self.lead.update({k: event[k] for k in keys if k in event})
        if event.get("tokens") is not None:  # the lead's own spend so far
            self.spent += max(0, int(event["tokens"]) - int(self.lead["tokens"]))
            self.lead["tokens"] = int(event["tokens"])
            self.spend_known = True
        if event.get("total") is not None:  # the whole task's: replaces what was added
            self.spent, self.spend_known = int(event["total"]), True
        if event.get("calls") is not None:
            self.calls = int(event["calls"])

    # -- reads -------------------------------------------------------------------------------
    def first(self, state: str, n: int) -> list[str]:
        """The first `n` agents that entered `state` (oldest first)."""
        return list(itertools.islice(self.by_state[state], max(n, 0)))

    def newest(self, state: str, n: int) -> list[str]:
        """The last `n` agents that entered `state` (newest first)."""
        return list(itertools.islice(reversed(self.by_state[state]), max(n, 0)))

    def listed(self, n: int) -> Iterator[str]:
        """Up to `n` agents, most telling first: waiting, running, failed, pending (oldest
        first), then the newest done."""
        left = n
        for state in STATE_ORDER:
            keys = self.newest(state, left) if state == "done" else self.first(state, left)
            yield from keys
            left -= len(keys)
            if left <= 0:
                return

    def current(self) -> dict[str, int]:
        """Agents per state of the current phase."""
        return self.phase_tally.get(self.phase or "", dict.fromkeys(STATE_ORDER, 0))

    #: Seconds of subagents running before a rate is given (a first one says little).
    RATE_AFTER = 10.0

    def rate(self) -> float | None:
        """Subagents finished per minute in this run (None before the first, or in the
        first `RATE_AFTER` seconds)."""
        if not self.finished_here or self.first_start is None:
            return None
        seconds = self.clock() - self.first_start
        return self.finished_here / seconds * 60 if seconds >= self.RATE_AFTER else None

    def left(self) -> float | None:
        """Seconds left in the current phase at the rate so far (None: unknown)."""
        rate, now = self.rate(), self.current()
        remaining = now["pending"] + now["running"] + now["waiting"]
        if rate is None or not remaining:
            return None
        return remaining / rate * 60
