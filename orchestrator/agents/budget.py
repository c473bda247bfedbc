"""A task's token budget: no model call starts once the task has spent it.

`TokenBudget` counts what the task's agents spend, lead and subagents alike: the prompt
plus completion tokens each call's provider reports (`usage_metadata`; LangChain's estimate
where none is reported, as everywhere else in tether), in all the task's runs. Its figure
is the task's usage journal (`orchestrator.artifacts.usage`, `journal`), where every call
is durable as sent before the request and as answered after it: a call cut by a stop or a
kill counts (its prompt, estimated), and a resume starts from all of it. Without a
journal (a context that runs no task) it counts in memory. `BudgetMiddleware` checks it
before every model call of an agent: once the budget is reached it raises `BudgetReached`
instead of calling, so a run spends at most the calls already in flight past its budget
(one per running agent). `BudgetReached` is a `KeyboardInterrupt`, like Ctrl-C's
`Stopped`: no handler takes it for a failed agent, the agents' finished steps are kept,
and the run ends `stopped` (exit code 6), resumable with a larger budget.

Thread safety: parallel subagents share one `TokenBudget`; its counter is under a lock.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import AIMessage

from orchestrator.agents.provider import approx_tokens, usage_tokens

if TYPE_CHECKING:
    from langchain.agents.middleware import (
        ModelCallResult,
        ModelRequest,
        ModelResponse,
    )

    from orchestrator.types import JsonObject


class BudgetReached(KeyboardInterrupt):
    """The task's token budget is spent: the agent stops before its next model call."""

    def __init__(self, message: str = "", who: str = "") -> None:
        super().__init__(message)
        self.who = who


class TokenBudget:
    """The task's budget (`limit`, None: unlimited) and what it has spent so far."""

    def __init__(self, limit: int | None = None, spent: int = 0) -> None:
        self.limit = limit
        self._spent = spent
        self.journal: Any = None
        """The task's `UsageJournal`: once set, `spent` is its figure (plus what a task from
        before the journal spent before it, the `spent` given)."""
        self._lock = threading.Lock()

    @property
    def spent(self) -> int:
        if self.journal is not None:
            return self._spent + self.journal.tokens()
        return self._spent

    @spent.setter
    def spent(self, value: int) -> None:
        self._spent = value

    @property
    def reached(self) -> bool:
        return self.limit is not None and self.spent >= self.limit

    def add(self, tokens: int) -> None:
        """Count `tokens` spent by a call no journal records (none once it has one)."""
        if self.journal is not None:
            return
        with self._lock:
            self._spent += max(int(tokens), 0)

    def check(self, who: str) -> None:
        """Raise `BudgetReached` when the budget is spent (before `who` calls its model)."""
        if self.reached:
            raise BudgetReached(self.reason(who), who)

    def reason(self, who: str = "") -> str:
        by = f" before {who}'s next model call" if who else ""
        return f"token budget reached: {self.spent:,} of {self.limit:,} tokens spent{by}"

    def summary(self, spent: Any = None) -> JsonObject:
        """`{"budget", "spent"}`; with `spent` (a reading of the journal, `Spend`) its
        figure and its splits by phase and by agent."""
        if spent is None:
            return {"budget": self.limit, "spent": self.spent}
        return {"budget": self.limit, **spent.parts(), "spent": self._spent + spent.tokens}


def call_tokens(request: Any, reply: Any) -> int:
    """The prompt plus completion tokens of one call, as reported (else estimated), counted
    as the agent's own record counts them (`protocol_middleware.UsageMiddleware`)."""
    usage = getattr(reply, "usage_metadata", None) or {}
    context = int(usage.get("input_tokens") or 0) or approx_tokens(request.messages)
    return usage_tokens(reply, context)


class BudgetMiddleware(AgentMiddleware):
    """Checks the task's budget before each model call and counts the call's tokens."""

    def __init__(self, budget: TokenBudget, who: str) -> None:
        super().__init__()
        self.budget = budget
        self.who = who

    def wrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]
    ) -> ModelCallResult:
        self.budget.check(self.who)
        response = handler(request)
        # the model's reply (the final-answer middleware may append its tool's answer)
        reply = next((m for m in response.result if isinstance(m, AIMessage)), None)
        if reply is not None:
            self.budget.add(call_tokens(request, reply))
        return response
