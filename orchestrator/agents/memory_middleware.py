"""tether's external memory as one LangChain `AgentMiddleware` for any `create_agent` agent.

```python
from langchain.agents import create_agent
from orchestrator import TetherMemoryMiddleware

agent = create_agent(model, tools, middleware=[TetherMemoryMiddleware(".temp/memory", "T1")])
agent.invoke({"messages": [{"role": "user", "content": "Map the auth flow"}]})
```

What it does, per model call:

* **records** every new message (user, assistant with its tool calls, tool results) in
  `working/{task}/messages.jsonl` through `memory.task.working.WorkingMemory`;
* **recalls**: the first call of a context gets the best matching snippets of the memory
  directory (findings, facts, episodes, entries) added to its system message;
* **gauges** the context: the input tokens the provider reported for the last call
  (`usage_metadata`), or an estimate shown with `~` when it reports none; the threshold is
  min(`threshold`, `context_ratio` x the model profile's `max_input_tokens`);
* **warns** once per context in the warning zone (`warning_ratio` x threshold);
* **hands off** at the threshold: writes `context_snapshots/snap_{ts}.md` and sends the
  next calls a fresh context: the system message (instructions never vanish), the first
  user message, the snapshot, and the newest exchange (so every tool call stays answered);
  the agent's state keeps everything;
* **never snapshots in a loop**: a context that reaches the threshold again within
  `REFILL_CALLS` calls of a handoff learned nothing new; the middleware then compacts what it
  sends (every tool result over `COMPACT_SHARE` of the threshold goes to a memory entry, the
  seed keeps only what is left to do) and, if even that refills, raises `ContextLoopError`
  (one line) instead of writing another snapshot;
* **evicts large tool results** (`orchestrator.agents.offload.OffloadLargeToolResults`, which it
  extends): a result over `tool_result_tokens` (default 10% of the model's window) is
  stored as a memory entry and the model gets its head and the entry id, to read more with
  `memory_fetch` (give the agent `memory.facts.tools.memory_tools(store)`).

Messages carry their LangChain ids into the log, and an id already there is not written
again (an agent replayed after a crash). Events go to `on_event` (dicts with `event`:
`tokens`, `warning`, `snapshot`, `offloaded`; models in `orchestrator.events`), never to
stdout. Invariant: the middleware never drops a
tool message whose call it sends, and never sends one whose call it dropped.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from memory.store import MemoryStore
from memory.task.working import WorkingMemory
from orchestrator.agents.chat_models import CONTEXT_RATIO, effective_threshold
from orchestrator.agents.gauge import SAVE, WARN, TokenGauge, UsageRatio
from orchestrator.agents.offload import OffloadLargeToolResults
from orchestrator.agents.provider import approx_tokens
from orchestrator.artifacts.documents import Docs
from orchestrator.artifacts.snapshot import write_snapshot
from orchestrator.artifacts.snapshot_content import agent_content
from orchestrator.artifacts.text import body_text
from orchestrator.config.defaults import RECALL_SCOPES, TOKEN_THRESHOLD, WARNING_RATIO
from orchestrator.errors import ContextLoopError
from orchestrator.events import build_event

if TYPE_CHECKING:
    from langchain.agents.middleware import (
        AgentState,
        ModelCallResult,
        ModelRequest,
        ModelResponse,
    )
    from langchain_core.messages import BaseMessage
    from langgraph.runtime import Runtime

    from orchestrator.types import JsonObject

REFILL_CALLS = 3
"""A handoff followed by the threshold again within this many model calls made no progress."""
COMPACT_SHARE = 0.05
"""In compact mode, tool results over this share of the threshold are sent as references."""
SHORT_SEED_CHARS = 2000


class TetherMemoryMiddleware(OffloadLargeToolResults):
    """Record, recall, gauge, warn and hand off an agent's context (see the module doc).

    Args:
        memory: a memory directory path or a `memory.store.MemoryStore`.
        task_id: the working-memory task the messages belong to.
        threshold: lead-context tokens that trigger a snapshot (default 150,000).
        warning_ratio: start of the warning zone, as a share of the threshold.
        context_ratio: share of the model's context window used at most.
        recall: add recalled snippets to the first call of each context.
        record_system: also record system messages (the orchestrator's lead, whose system
            prompt is rebuilt every phase, does not).
        on_event: receives `tokens`, `warning`, `snapshot` and `offloaded` events.
        tool_result_tokens: tool results above this many (provider) tokens go to a memory
            entry (default: 10% of the model's context window, else 8,000).
        usage: a shared reported/estimated token ratio (default: this middleware's own).
    """

    def __init__(
        self,
        memory: str | os.PathLike[str] | Any,
        task_id: str,
        *,
        threshold: int = TOKEN_THRESHOLD,
        warning_ratio: float = WARNING_RATIO,
        context_ratio: float = CONTEXT_RATIO,
        recall: bool = True,
        recall_limit: int = 3,
        record_system: bool = True,
        on_event: Callable[[JsonObject], None] | None = None,
        tool_result_tokens: int | None = None,
        usage: UsageRatio | None = None,
    ) -> None:
        store = memory if hasattr(memory, "backend") else MemoryStore(Path(memory))
        super().__init__(
            store,
            max_tokens=tool_result_tokens,
            usage=usage,
            tags=(f"task:{task_id}",),
            on_event=lambda event: self._emit(event.pop("event"), **event),
        )
        self.task_id = task_id
        self.working = WorkingMemory(self.store, task_id)
        self.working.ensure()
        self.threshold = threshold
        self.warning_ratio = warning_ratio
        self.context_ratio = context_ratio
        self.recall = recall
        self.recall_limit = recall_limit
        self.kinds = ("human", "ai", "tool", "system") if record_system else ("human", "ai", "tool")
        self.on_event = on_event
        self.recorded = 0
        """State messages already written to `messages.jsonl`."""
        self.seen: set[str] | None = None
        self.cut = 0
        """Messages before this index are behind the last handoff (not sent)."""
        self.seed: str | None = None
        self.last_tokens = 0
        self.estimated = True
        self.warned = False
        self.snapshots: list[Path] = []
        self.calls_since_handoff: int | None = None
        """Model calls since the last handoff (None before the first one)."""
        self.compact = False
        """Set after a refill: large tool results and most of the seed are left out."""
        self._evicted: dict[str, Any] = {}

    # -- the gauge --------------------------------------------------------------------------
    def gauge(self, model: object = None) -> TokenGauge:
        """The gauge for `model` (threshold capped by its context window)."""
        threshold = effective_threshold(self.threshold, model, self.context_ratio)
        return TokenGauge(threshold, self.warning_ratio)

    def shown(self) -> str:
        """The gauge as people see it: `~` marks an estimate."""
        return f"{'~' if self.estimated else ''}{self.last_tokens}"

    def _emit(self, event: str, **fields: object) -> None:
        built = build_event(event, task_id=self.task_id, **fields)  # checked even unheard
        if self.on_event is not None:
            self.on_event(built)

    # -- hooks --------------------------------------------------------------------------------
    def wrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]
    ) -> ModelCallResult:
        self.note_model(request.model)
        messages = list(request.messages)
        self._record(messages)
        gauge = self.gauge(request.model)
        zone = gauge.zone(self.last_tokens)
        refill = self.calls_since_handoff is not None and self.calls_since_handoff < REFILL_CALLS
        if zone == SAVE and refill:
            self._refilled(gauge)
        elif zone == SAVE:
            self._handoff(messages, gauge)
        elif zone == WARN and not self.warned:
            self.warned = True
            self._emit(
                "warning",
                message=f"context {self.shown()} tokens is in the warning zone "
                f"({gauge.warn_at}-{gauge.threshold}); a snapshot follows at {gauge.threshold}",
            )
        sent = self._context(messages)
        system = request.system_message
        if self.recall and (len(sent) <= 2 or self.seed is not None and len(sent) <= 4):
            system = self._with_recall(system, messages)
        response = handler(request.override(messages=sent, system_message=system))
        if self.calls_since_handoff is not None:
            self.calls_since_handoff += 1
        self._measure(sent, response.result[-1], gauge)
        self._record([*messages, *response.result])
        return response

    def _refilled(self, gauge: TokenGauge) -> None:
        """The threshold again right after a handoff: compact once, then give up.

        Raises:
            ContextLoopError: the compacted context refilled too.
        """
        if self.compact:
            raise ContextLoopError(
                f"the context of task {self.task_id!r} reaches the {gauge.threshold}-token "
                f"threshold again right after a snapshot ({self.shown()} tokens, even "
                "compacted): raise the threshold or give the agent smaller tool results"
            )
        self.compact = True
        self.calls_since_handoff = 0
        tokens, self.last_tokens = self.last_tokens, 0
        self._emit(
            "warning",
            message=f"context {tokens} tokens refilled right after a snapshot; sending large "
            "tool results as memory references and a shorter seed instead of snapshotting again",
        )

    def after_agent(self, state: AgentState, runtime: Runtime) -> None:
        self._record(list(state["messages"]))
        return None

    # -- parts ----------------------------------------------------------------------------------
    def _record(self, messages: list[BaseMessage]) -> None:
        if self.seen is None:  # ids already in the log: a replayed agent is not logged twice
            self.seen = {str(m.record.get("id")) for m in self.working.messages()}
        new = [
            m
            for m in messages[self.recorded :]
            if m.type in self.kinds and not (m.id and m.id in self.seen)
        ]
        self.seen.update(m.id for m in new if m.id)
        if new:
            self.working.append_chat_messages(new)
        self.recorded = max(self.recorded, len(messages))

    def _measure(self, sent: list[Any], reply: Any, gauge: TokenGauge) -> None:
        usage = getattr(reply, "usage_metadata", None) or {}
        reported = int(usage.get("input_tokens") or 0)
        self.estimated = not reported
        estimate = approx_tokens(sent)
        self.usage.observe(estimate, reported)
        self.last_tokens = reported or estimate
        self._emit(
            "tokens",
            context=self.last_tokens,
            estimated=self.estimated,
            shown=self.shown(),
            threshold=gauge.threshold,
            zone=gauge.zone(self.last_tokens),
        )

    def _context(self, messages: list[BaseMessage]) -> list[BaseMessage]:
        """What to send: everything, or after a handoff the seed and what came since."""
        if self.seed is None:
            return messages
        # instructions never vanish: a system message in the conversation stays at its head
        system = next((m for m in messages if isinstance(m, SystemMessage)), None)
        first = next((m for m in messages if isinstance(m, HumanMessage)), None)
        head = [m for m in (system, first) if m is not None]
        text = self.seed
        recent = _answered(messages[self.cut :])
        if self.compact:  # after a refill: the seed's head, and large results as references
            whole = self.snapshots[-1] if self.snapshots else None
            text = text[:SHORT_SEED_CHARS] + (
                f"\n[... the whole snapshot: {whole}]" if whole else ""
            )
            recent = [self._compacted(m) for m in recent]
        seed = HumanMessage(f"You continue from this context snapshot (fresh context):\n{text}")
        return [*head, seed, *recent]

    def _compacted(self, message: object) -> Any:
        """A tool message as sent in compact mode: a reference when it is large (stored in
        memory once per tool call)."""
        if not isinstance(message, ToolMessage):
            return message
        key = message.tool_call_id
        if key not in self._evicted:
            limit = max(200, int(self.threshold * COMPACT_SHARE))
            self._evicted[key] = self.offload(message, limit)
        return self._evicted[key]

    def _handoff(self, messages: list[BaseMessage], gauge: TokenGauge) -> None:
        # the log already holds `messages`: `wrap_model_call` records them first
        content = agent_content(self.store, self.task_id, gauge.threshold)
        first = next((m for m in messages if isinstance(m, HumanMessage)), None)
        path = write_snapshot(
            self.store,
            task_id=self.task_id,
            phase="agent",
            reason="token_limit",
            token_count=self.last_tokens,
            conversation_summary=content.conversation_summary,
            what_was_found=content.what_was_found,
            what_is_left=content.what_is_left,
            important_context=f"Objective: {first.content if first else '-'}",
            resume_instructions="Continue the work from this snapshot in a fresh context.",
        )
        self.snapshots.append(path)
        self.seed = body_text(path, Docs.of(self.store))
        self.cut = _last_exchange_start(messages)
        self.warned = False
        self.calls_since_handoff = 0
        tokens, self.last_tokens = self.last_tokens, 0
        self._emit(
            "snapshot",
            path=str(path),
            reason="token_limit",
            tokens=tokens,
            threshold=gauge.threshold,
        )

    def _with_recall(self, system: Any, messages: list[Any]) -> Any:
        query = " ".join(
            str(m.content) for m in messages if isinstance(m, HumanMessage) and m.content
        )[:500]
        if not query.strip():
            return system
        try:
            hits = self.store.search(
                query, scope=RECALL_SCOPES, limit=self.recall_limit, widen=False
            )
        except Exception as exc:  # recall is best effort
            self._emit("warning", message=f"recall failed: {type(exc).__name__}: {exc}")
            return system
        if not hits:
            return system
        lines = "\n".join(f"- [{h.citation}] {h.text}" for h in hits)
        text = f"Recalled from memory (cite when you use it):\n{lines}"
        base = system.text if system is not None else ""
        return SystemMessage(f"{base}\n\n{text}".strip())


def _last_exchange_start(messages: list[BaseMessage]) -> int:
    """Index of the newest AI message with tool calls whose results end the list, else len."""
    i = len(messages)
    while i > 0 and isinstance(messages[i - 1], ToolMessage):
        i -= 1
    if i < len(messages) and i > 0 and isinstance(messages[i - 1], AIMessage):
        return i - 1
    return len(messages)


def _answered(messages: list[BaseMessage]) -> list[BaseMessage]:
    """Drop leading tool messages whose call is not in the list (never send orphans)."""
    calls = {c.get("id") for m in messages if isinstance(m, AIMessage) for c in m.tool_calls}
    return [m for m in messages if not isinstance(m, ToolMessage) or m.tool_call_id in calls]
