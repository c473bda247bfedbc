"""tether's offline chat model: deterministic, no network, driven by a queue or a policy.

`OfflineChatModel` is an ordinary LangChain `BaseChatModel`, so the graph cannot tell it
from a real provider: it supports `bind_tools`, returns `AIMessage`s with tool calls, and
reports `usage_metadata` (token counts estimated with LangChain's
`count_tokens_approximately`) and `response_metadata["model_name"] == "tether-offline"`.
What it answers comes from, in order:

1. the **queue**: messages given as a list (`OfflineChatModel(policy=[...])`) or added with
   `enqueue()` are served first, one per call (like pydantic-ai's `FunctionModel` and
   llm's `MockModel.enqueue`); a list-only model raises `ModelCallError` when it runs dry;
2. the **policy**: a callable `(messages, tools) -> AIMessage | str`, where `tools` are the
   bound tools as OpenAI tool dicts (`{"type": "function", "function": {"name", ...}}`),
   narrowed to the forced tool when `bind_tools(..., tool_choice=NAME)` names one
   (`"none"`: no tools);
3. by default `ResearchPolicy` (in `orchestrator.offline.policy`), which speaks
   tether's protocol (`PhasePlan` for the lead, `SubmitFindings` for subagents) and does
   real, extractive work with the workdir tools. Its input format is documented there.

Tool calls with `"id": None` (LangChain requires the key) get an id derived from a hash of
the conversation, the call's position, name and arguments: unique within a conversation,
identical across runs. A policy can therefore return
`AIMessage(content="", tool_calls=[{"name": "read_file", "args": {...}, "id": None}])`.

Invariant: the same messages and bound tools always produce the same reply.
"""

from __future__ import annotations

import hashlib
import json
import math
import threading
from collections import deque
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import StructuredTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import PrivateAttr

from orchestrator.errors import ModelCallError
from orchestrator.offline.policy import ResearchPolicy

if TYPE_CHECKING:
    from orchestrator.types import JsonObject

MODEL_NAME = "tether-offline"
# One lock for every queue: the critical sections are tiny, and a module-level lock keeps
# model instances copyable (a `threading.Lock` attribute cannot be deep-copied).
_QUEUE_LOCK = threading.Lock()

Policy = Callable[[list[BaseMessage], list[dict[str, Any]]], "AIMessage | str"]
"""A function answering a conversation: `(messages, tools) -> AIMessage | str`."""

__all__ = ["MODEL_NAME", "OfflineChatModel", "Policy", "ResearchPolicy", "tool_names"]


#: OpenAI dicts of tool objects and classes already converted (`create_agent` binds the
#: tools again before every model call, and converting a tool builds pydantic models):
#: id -> (the object, kept alive so the id stays its own; its dict).
_CONVERTED: dict[int, tuple[Any, dict[str, Any]]] = {}
_CONVERTED_MAX = 512
#: The JSON length of each dict in `_CONVERTED`, for the usage estimate, which would
#: otherwise dump every bound tool's schema on every call: id(dict) -> (dict, length).
_TOOL_CHARS: dict[int, tuple[dict[str, Any], int]] = {}
#: Converted dicts of plain `StructuredTool`s by what their dict is made of (name,
#: description, arguments model): a run builds new tool objects over the same functions
#: (bound to its store and workdir), and converting one builds a pydantic model, about
#: 0.5 ms a tool.
_BY_SCHEMA: dict[tuple[str, str, type], dict[str, Any]] = {}


def _openai_tool(tool: object) -> dict[str, Any]:
    if isinstance(tool, dict):
        return convert_to_openai_tool(tool)  # a caller's dict may change: never cached
    hit = _CONVERTED.get(id(tool))
    if hit is not None and hit[0] is tool:
        return hit[1]
    same = _same_schema_key(tool)
    formatted = _BY_SCHEMA.get(same) if same is not None else None
    if formatted is None:
        formatted = convert_to_openai_tool(tool)
    with _QUEUE_LOCK:
        if len(_CONVERTED) >= _CONVERTED_MAX:
            _CONVERTED.clear()
            _TOOL_CHARS.clear()
            _BY_SCHEMA.clear()
        _CONVERTED[id(tool)] = (tool, formatted)
        _TOOL_CHARS[id(formatted)] = (formatted, len(json.dumps(formatted)))
        if same is not None:
            _BY_SCHEMA[same] = formatted
    return formatted


def _same_schema_key(tool: Any) -> tuple[str, str, type] | None:
    """The `_BY_SCHEMA` key of a plain `StructuredTool` with a model class as its schema."""
    schema = getattr(tool, "args_schema", None)
    if type(tool) is not StructuredTool or not isinstance(schema, type) or tool.metadata:
        return None
    return (tool.name, tool.description, schema)


def _usage_tokens(messages: Sequence[BaseMessage], tools: Sequence[dict[str, Any]]) -> int:
    """`count_tokens_approximately(messages, tools=tools)`, with the tools' share computed
    once per converted tool (the estimate adds their JSON length over 4, rounded up)."""
    chars = 0
    for tool in tools:
        hit = _TOOL_CHARS.get(id(tool))
        chars += hit[1] if hit is not None and hit[0] is tool else len(json.dumps(tool))
    return count_tokens_approximately(messages) + math.ceil(chars / 4)


def tool_names(tools: Sequence[dict[str, Any]]) -> list[str]:
    """Names of bound tools given as OpenAI tool dicts."""
    return [t.get("function", t).get("name", "") for t in tools]


def _forced(tools: list[dict[str, Any]], choice: object) -> list[JsonObject]:
    """The tools the policy may call under `tool_choice` ("none", a name, or a dict)."""
    if isinstance(choice, dict):
        choice = choice.get("function", choice).get("name")
    if not isinstance(choice, str) or choice in ("auto", "any", "required"):
        return tools
    if choice == "none":
        return []
    return [t for t in tools if tool_names([t]) == [choice]] or tools


def _to_message(reply: AIMessage | str) -> AIMessage:
    if isinstance(reply, AIMessage):
        return reply
    if isinstance(reply, str):
        return AIMessage(content=reply)
    raise ModelCallError(
        f"offline policy returned {type(reply).__name__!r}: return an AIMessage or a str"
    )


def _conversation_digest(messages: Sequence[BaseMessage]) -> str:
    h = hashlib.sha256()
    for m in messages:
        h.update(m.type.encode())
        h.update(str(m.text).encode("utf-8", "replace"))
        for tc in getattr(m, "tool_calls", None) or []:
            h.update(str(tc.get("id")).encode())
        h.update(str(getattr(m, "tool_call_id", "")).encode())
        h.update(b"\x00")
    return h.hexdigest()


def _with_ids(message: AIMessage, messages: Sequence[BaseMessage]) -> AIMessage:
    """Give every tool call lacking an id a deterministic, conversation-unique one."""
    if not message.tool_calls or all(tc.get("id") for tc in message.tool_calls):
        return message
    digest = _conversation_digest(messages)
    calls = []
    for i, tc in enumerate(message.tool_calls):
        if not tc.get("id"):
            seed = f"{digest}|{len(messages)}|{i}|{tc['name']}|"
            seed += json.dumps(tc.get("args", {}), sort_keys=True, default=str)
            tc = {**tc, "id": "call_" + hashlib.sha256(seed.encode()).hexdigest()[:20]}
        calls.append(tc)
    return message.model_copy(update={"tool_calls": calls})


class OfflineChatModel(BaseChatModel):
    """A deterministic chat model that never touches the network.

    Args:
        policy: `None` for `ResearchPolicy()`, a callable `(messages, tools) -> AIMessage | str`,
            or a list of replies (`AIMessage` or `str`) served in order.
        model_name: reported in `response_metadata["model_name"]`.

    Example:
        >>> model = OfflineChatModel(policy=["hello"])
        >>> model.invoke("hi").content
        'hello'
    """

    policy: Any = None
    """`None`, a `Policy` callable, or a list of queued replies."""
    model_name: str = MODEL_NAME
    """The name reported in `response_metadata`."""

    _queue: deque = PrivateAttr(default_factory=deque)
    _queue_only: bool = PrivateAttr(default=False)
    _answer: Any = PrivateAttr(default=None)

    def model_post_init(self, context: Any, /) -> None:
        super().model_post_init(context)
        if isinstance(self.policy, (list, tuple, deque)):
            self._queue.extend(self.policy)
            self._queue_only = True
        elif self.policy is None:
            self._answer = ResearchPolicy()
        elif callable(self.policy):
            self._answer = self.policy
        else:
            raise TypeError(
                f"policy {self.policy!r} is not usable: pass None, a callable or a list"
            )

    @property
    def _llm_type(self) -> str:
        return MODEL_NAME

    @property
    def _identifying_params(self) -> JsonObject:
        return {"model_name": self.model_name}

    def enqueue(self, *replies: AIMessage | str) -> None:
        """Queue replies; they are served, one per call, before the policy is asked."""
        with _QUEUE_LOCK:
            self._queue.extend(replies)

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | Any],
        *,
        tool_choice: str | None = None,
        **kwargs: object,
    ) -> Runnable:
        """Bind tools (BaseTool, pydantic model, function or dict); the policy sees them."""
        formatted = [_openai_tool(t) for t in tools]
        if tool_choice is not None:
            kwargs["tool_choice"] = tool_choice
        return self.bind(tools=formatted, **kwargs)

    def _reply(self, messages: list[BaseMessage], tools: list[dict[str, Any]]) -> AIMessage:
        with _QUEUE_LOCK:
            queued = self._queue.popleft() if self._queue else None
        if queued is not None:
            return _to_message(queued)
        if self._queue_only:
            raise ModelCallError(
                "offline model queue is empty: enqueue more replies with "
                "OfflineChatModel.enqueue() or pass a policy function"
            )
        return _to_message(self._answer(messages, tools))

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: Any = None,
        **kwargs: object,
    ) -> ChatResult:
        tools = list(kwargs.get("tools") or [])
        visible = _forced(tools, kwargs.get("tool_choice"))
        message = _with_ids(self._reply(list(messages), visible), messages)
        input_tokens = _usage_tokens(messages, tools)
        output_tokens = count_tokens_approximately([message])
        message = message.model_copy(
            update={
                "usage_metadata": {
                    "input_tokens": input_tokens,
                    "output_tokens": output_tokens,
                    "total_tokens": input_tokens + output_tokens,
                },
                "response_metadata": {
                    **message.response_metadata,
                    "model_name": self.model_name,
                    "model_provider": "tether",
                    "finish_reason": "tool_calls" if message.tool_calls else "stop",
                },
            }
        )
        return ChatResult(generations=[ChatGeneration(message=message)])
