"""The usage journal: one durable record of every model call a task's agents make.

`.tether/usage/{task}.jsonl` is append-only. Before a call goes to the provider its agent
appends `sent` (call id, agent, its state key, phase, the prompt's estimated tokens); when
the reply comes back, `answered` (the provider's reported prompt and total tokens, or an
estimate, marked); when the provider answered with an error, `failed` (nothing spent). A
call whose only record is `sent` was cut (Ctrl-C, SIGTERM, a timeout, kill -9): it counts
as spent, its prompt tokens as estimated. A remote agent's run is one `remote` record.

Invariant: what a task spent is this journal, read whole (`Spend`): the token budget, the
`Usage:`, `Budget:` and `Stopped:` lines, `status` and their splits by phase and by agent
are all views of it, so they agree and sum to one figure, and a kill loses none of it
(each record is durable before the call it follows returns). A task from before the
journal has none: its readers fall back to the graph state's counters.

Thread safety: parallel agents share one `UsageJournal`; its records are under a lock and
each append is one whole line (`Docs.append_jsonl`).
"""

from __future__ import annotations

import threading
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from orchestrator.artifacts.documents import Docs
    from orchestrator.types import JsonObject

USAGE = ".tether/usage"


def usage_path(task_id: str) -> str:
    """The task's usage journal (a hidden document: the memory's index skips it)."""
    return f"{USAGE}/{task_id}.jsonl"


@dataclass
class Spend:
    """What a task spent, read from its journal."""

    tokens: int = 0
    """Prompt plus completion tokens of every call (reported, else estimated)."""
    calls: int = 0
    """Model calls answered or cut (errors the provider answered are not calls)."""
    input_tokens: int = 0
    cut: int = 0
    """Calls cut in flight (counted with their estimated prompt)."""
    estimated: int = 0
    """Calls whose tokens are estimated (no usage reported, or cut)."""
    by_agent: dict[str, int] = field(default_factory=dict)
    by_phase: dict[str, int] = field(default_factory=dict)
    by_key: dict[str, int] = field(default_factory=dict)
    """By the graph state's agent keys (`lead`, `{agent}:{subtask}`)."""

    def usage(self) -> dict[str, int]:
        """`{"calls", "input_tokens"}`, as `RunResult.usage` and `status` show them."""
        return {"calls": self.calls, "input_tokens": self.input_tokens}

    def parts(self) -> JsonObject:
        """`{"spent", "by_phase", "by_agent"}`, as `state.spend` returns them."""
        return {"spent": self.tokens, "by_phase": dict(self.by_phase),
                "by_agent": dict(self.by_agent)}  # fmt: skip


def spend_of(records: list[dict[str, Any]]) -> Spend:
    """The spend of journal records, in order (a call's latest record wins)."""
    tally = Tally()
    for record in records:
        tally.add(record)
    return tally.spend()


class Tally:
    """A journal's spend kept as its records come (`add`): each record changes only its
    call's share, so reading the spend costs the same at the 10th call as at the 10,000th."""

    def __init__(self) -> None:
        self._calls: dict[str, dict[str, Any]] = {}
        self._total = Spend()
        self._counts: dict[tuple[str, str], int] = {}  # calls under each split's name

    def add(self, record: dict[str, Any]) -> None:
        ident = str(record.get("call") or "")
        if not ident:
            return
        old = self._calls.get(ident)
        self._calls[ident] = call = {**(old or {}), **record}
        self._apply(call, 1)  # the new share first: a split keeps its place in the order
        if old is not None:
            self._apply(old, -1)

    def _apply(self, call: dict[str, Any], sign: int) -> None:
        state = call.get("state")
        if state == "failed" or "agent" not in call:
            return
        out = self._total
        tokens = int(call.get("tokens") or 0)
        if state == "sent":  # cut in flight: its prompt, as estimated
            tokens = int(call.get("estimate") or 0)
            out.cut += sign
        out.calls += sign * int(call.get("calls", 1) or 0)
        out.tokens += sign * tokens
        out.input_tokens += sign * int(call.get("input_tokens", call.get("estimate")) or 0)
        if state == "sent" or call.get("estimated"):
            out.estimated += sign
        agent = str(call.get("agent"))
        key, phase = str(call.get("key") or agent), str(call.get("phase") or "(no phase)")
        splits = (("agent", out.by_agent, agent), ("key", out.by_key, key),
                  ("phase", out.by_phase, phase))  # fmt: skip
        for kind, split, name in splits:
            split[name] = split.get(name, 0) + sign * tokens
            count = self._counts[kind, name] = self._counts.get((kind, name), 0) + sign
            if not count:  # no call left under this name (a failed call's `sent` undone)
                del split[name]

    @property
    def tokens(self) -> int:
        return self._total.tokens

    def spent_by(self, key: str) -> int:
        return self._total.by_key.get(key, 0)

    def spend(self) -> Spend:
        """A copy of the spend so far."""
        t = self._total
        return Spend(t.tokens, t.calls, t.input_tokens, t.cut, t.estimated, dict(t.by_agent),
                     dict(t.by_phase), dict(t.by_key))  # fmt: skip


def read_spend(docs: Docs, task_id: str) -> Spend | None:
    """The task's spend from its journal; None when it has none (a task from before it)."""
    rel = usage_path(task_id)
    if not docs.exists(rel):
        return None
    return spend_of([r for _, r in docs.read_jsonl(rel).records if isinstance(r, dict)])


class UsageJournal:
    """A task's usage journal, open for appending (its records so far read at start)."""

    def __init__(self, docs: Docs, task_id: str) -> None:
        self.docs = docs
        self.rel = usage_path(task_id)
        self._lock = threading.Lock()
        read = docs.read_jsonl(self.rel) if docs.exists(self.rel) else None
        self._tally = Tally()
        for _, record in read.records if read else ():
            if isinstance(record, dict):
                self._tally.add(record)
        self.existed = read is not None

    def _append(self, record: dict[str, Any]) -> None:
        self.docs.append_jsonl(self.rel, record)  # durable before the caller goes on
        with self._lock:
            self._tally.add(record)
            self.existed = True

    def sent(self, agent: str, key: str, phase: str, estimate: int) -> str:
        """Record a call about to be sent; returns its id."""
        ident = uuid.uuid4().hex[:16]
        self._append({"call": ident, "state": "sent", "agent": agent, "key": key,
                      "phase": phase, "estimate": int(estimate)})  # fmt: skip
        return ident

    def answered(self, ident: str, input_tokens: int, tokens: int, estimated: bool) -> None:
        """Record the reply of call `ident`: its prompt and total tokens."""
        record = {"call": ident, "state": "answered", "input_tokens": int(input_tokens),
                  "tokens": int(tokens)}  # fmt: skip
        if estimated:
            record["estimated"] = True
        self._append(record)

    def failed(self, ident: str) -> None:
        """Record that the provider answered call `ident` with an error (nothing spent)."""
        self._append({"call": ident, "state": "failed"})

    def remote(self, agent: str, key: str, phase: str, tokens: int, usage: dict) -> None:
        """Record a remote agent's run: its reported tokens and calls."""
        self._append({"call": uuid.uuid4().hex[:16], "state": "answered", "agent": agent,
                      "key": key, "phase": phase, "tokens": int(tokens),
                      "calls": int(usage.get("calls") or 0),
                      "input_tokens": int(usage.get("input_tokens") or 0)})  # fmt: skip

    def spend(self) -> Spend:
        with self._lock:
            return self._tally.spend()

    def tokens(self) -> int:
        """The tokens spent so far (what a budget check reads before each call)."""
        with self._lock:
            return self._tally.tokens

    def spent_by(self, key: str) -> int:
        """The tokens spent so far under one agent key (`{agent}:{subtask}`), uncopied."""
        with self._lock:
            return self._tally.spent_by(key)

    def recorder(self, agent: str, key: str, phase: str) -> CallRecorder:
        """What one agent run records its calls with."""
        return CallRecorder(self, agent, key, phase)


@dataclass
class CallRecorder:
    """One agent's calls into the journal (`UsageMiddleware` calls it)."""

    journal: UsageJournal
    agent: str
    key: str
    phase: str

    def sent(self, estimate: int) -> str:
        return self.journal.sent(self.agent, self.key, self.phase, estimate)

    def answered(self, ident: str, input_tokens: int, tokens: int, estimated: bool) -> None:
        self.journal.answered(ident, input_tokens, tokens, estimated)

    def failed(self, ident: str) -> None:
        self.journal.failed(ident)
