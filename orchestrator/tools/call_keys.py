"""Idempotency keys for the user's tool calls: effects that happen once across crashes.

tether applies its own writes once (the artifact registry); a user's tool with an effect
(`send_email`, a payment, a ticket) can do the same with the key tether gives each of its
calls. `ToolCallKeys`, a middleware on every agent that has user tools (Python or MCP):

* **the key** of a call is `{task}/{scope}/{tool}/{n}`: the task, the agent's scope (a
  subagent's subtask key, the lead's `lead/{phase}/{wave}`), the tool, and how many calls
  of that tool the agent made before this one in its conversation. All of these survive a
  resume: the conversation an agent continues from is durable (LangGraph's checkpoint of
  its last model call, or the transcript of a failed attempt), and an agent run again from
  its prompt makes its calls in the same order;
* **before** the tool runs, the key (with the tool's name and a digest of its arguments) is
  noted durably under `Keys.tool_call(scope, tool, n)`; a call in flight at a kill runs
  again on resume with the same key, so a tool that honours the key acts once;
* **after**, its result (the `ToolMessage` the agent gets) is noted there too: the same call
  (same tool, same arguments) made again, by an agent run again from its prompt, gets the
  recorded result and the tool is not run a second time.

A tool gets its key in one of three ways: a parameter named `tool_call_key` (a
function's; a LangChain tool's annotated `ToolCallKey`, LangChain's `InjectedToolArg`),
which the toolbox hides from the model's schema and fills from the key
(`orchestrator.tools.toolbox`); `tool_call_key()`, a context variable (also in a tool's own
threads when it copies the context, as the user's tools' timeouts do); and an MCP server in
the `tools/call` request's `_meta` under `META_KEY` (`orchestrator.tools.mcp_client`).
Invariant: the key is noted durably before the tool starts, and a call whose result was
noted is never run again.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable
from contextvars import ContextVar
from typing import TYPE_CHECKING, Annotated, Any

from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import ToolMessage, messages_from_dict, messages_to_dict
from langchain_core.tools import InjectedToolArg

from orchestrator.artifacts.documents import Docs
from orchestrator.artifacts.registry import Keys, Status, registry_lookup, registry_note
from orchestrator.faults import fault

if TYPE_CHECKING:
    from langchain.agents.middleware import ToolCallRequest
    from langgraph.types import Command

KEY_PARAM = "tool_call_key"
"""The parameter a Python tool declares to be given its key."""
META_KEY = "tether/tool_call_key"
"""Where an MCP server finds the key: the `_meta` of the `tools/call` request."""
MAX_RECORDED_CHARS = 200_000
"""A result longer than this (as the agent got it: large results are memory references by
then) is not kept: a repeated call runs the tool again, with the same key."""

ToolCallKey = Annotated[str, InjectedToolArg]
"""The type of a tool's `tool_call_key` parameter: tether fills it in, the model never sees
it (`def send_email(to: str, body: str, tool_call_key: ToolCallKey) -> str`)."""

_KEY: ContextVar[str | None] = ContextVar("tether_tool_call_key", default=None)


def tool_call_key() -> str | None:
    """The idempotency key of the tool call running now (None outside a call of a user's
    tool in a tether run): the same for the call repeated after a crash."""
    return _KEY.get()


def set_tool_call_key(key: str | None) -> None:
    """Make `key` the current call's key in this context (an MCP call's task)."""
    _KEY.set(key)


def _ordinal(state: Any, call: dict[str, Any]) -> int | None:
    """Calls of `call`'s tool the agent made before it (None: not in the conversation)."""
    messages = state.get("messages") if isinstance(state, dict) else None
    if not messages:
        return None
    n = 0
    for message in messages:
        for made in getattr(message, "tool_calls", None) or []:
            if made.get("id") == call.get("id"):
                return n
            n += made.get("name") == call["name"]
    return None


def _digest(args: Any) -> str:
    text = json.dumps(args, sort_keys=True, default=str, ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _recorded(rec: dict[str, Any] | None, digest: str, call_id: str) -> ToolMessage | None:
    """The recorded answer of the same call (same arguments), for call `call_id`."""
    if not rec or rec.get("args") != digest or not isinstance(rec.get("result"), dict):
        return None
    try:
        (message,) = messages_from_dict([rec["result"]])
    except (KeyError, TypeError, ValueError):
        return None
    if not isinstance(message, ToolMessage):
        return None
    return message.model_copy(update={"tool_call_id": call_id})


def _serialised(message: ToolMessage) -> dict[str, Any] | None:
    """`message` as the registry keeps it (None: too long, or not JSON)."""
    try:
        (data,) = messages_to_dict([message])
        if len(json.dumps(data)) > MAX_RECORDED_CHARS:
            return None
    except (TypeError, ValueError):
        return None
    return data


class ToolCallKeys(AgentMiddleware):
    """Gives each call of the user's tools its idempotency key and applies it once (see the
    module docstring). Put it before the middleware that run or change tool calls
    (timeouts, offloading), so the key reaches the tool's thread and the recorded result is
    what the agent was given.

    Args:
        docs: the memory the task's artifact registry is in.
        task_id: the task.
        scope: the agent's part of the key (a subtask key, `lead/{phase}/{wave}`).
        names: the user's tools (tether's own apply their writes once already).
    """

    def __init__(self, docs: Docs, task_id: str, scope: str, names: Iterable[str]) -> None:
        super().__init__()
        self.docs = docs
        self.task_id = task_id
        self.scope = scope
        self.names = frozenset(names)

    def wrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], ToolMessage | Command]
    ) -> ToolMessage | Command:
        call = request.tool_call
        n = _ordinal(request.state, call) if call["name"] in self.names else None
        if n is None:
            return handler(request)
        rkey = Keys.tool_call(self.scope, call["name"], n)
        key = f"{self.task_id}/{self.scope}/{call['name']}/{n}"
        digest = _digest(call.get("args"))
        rec = registry_lookup(self.docs, self.task_id, rkey)
        again = _recorded(rec, digest, call.get("id") or "")
        if again is not None:
            return again
        if rec is None or rec.get("args") != digest:
            registry_note(
                self.docs, self.task_id, rkey, Status.STARTED,
                idempotency_key=key, tool=call["name"], args=digest, result=None,
            )  # fmt: skip
        token = _KEY.set(key)
        try:
            result = handler(request)
        finally:
            _KEY.reset(token)
        if isinstance(result, ToolMessage) and (data := _serialised(result)) is not None:
            registry_note(self.docs, self.task_id, rkey, Status.NOTED, result=data)
            fault("tool_call_after_result")
        return result
