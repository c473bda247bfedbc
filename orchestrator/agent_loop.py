"""The agents of tether (lead and subagents), built with LangChain's `create_agent`.

`run_agent` builds a `langchain.agents.create_agent` agent from the model, the agent's
ordinary tools and one *final* protocol tool (`PhasePlan` or `SubmitFindings`, see
`orchestrator.protocol`), plus `ProtocolMiddleware`, which adds what LangChain's stock
middleware lacks for tether's protocol:

* **every assistant tool call is answered by a `ToolMessage`**: a final call with
  missing fields or arguments that are not JSON (a provider's truncated reply lands in
  `invalid_tool_calls`) is answered by an error tool message the model can correct, a
  failing tool by an error tool message; nothing is ever sent after an unanswered call,
  which the real APIs reject with HTTP 400;
* **the final answer is accepted in any valid form**: a call of the final tool, or the
  same JSON given as the message text; prose is answered by one more call with the final
  tool forced (`tool_choice`);
* **bounded steps**: after `max_steps` model calls the final tool is forced with
  `tool_choice`; `AgentLoopError` if the model still does not give a valid answer;
* **bounded context**: before each call the conversation is cut to `max_context_tokens`
  (the system and first user message always stay, the oldest tool exchanges go first, a
  single huge tool result is truncated with a note); a provider's
  `context_length_exceeded` cuts the request to half and sends it once more;
* **retries** with exponential backoff on 5xx, 429 (honouring `Retry-After`), timeouts,
  connection errors and unparseable responses; 4xx request errors are not retried;
* **token accounting** from the provider's `usage_metadata` (an estimate only when the
  provider reports none); `on_step` sees the running total after every call, so the
  tokens of an agent that fails later still count;
* **Ctrl-C** reaches agents in worker threads through a `stop` event: the agent raises
  `Stopped` before its next model call or retry.

The compiled agent graph holds no state of a run, so runs with the same model class, final
tool, tools of the same shape (name, description, arguments model) and middleware classes
share one: the subagents of a run, and the agents of later runs in the same process. Each
run's `ProtocolMiddleware`, model, tool objects and own middleware reach it through a
context variable.

The middleware is in `orchestrator.protocol_middleware`; token counts, context fitting and
the reading of provider failures in `orchestrator.provider`.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware
from langgraph.errors import GraphRecursionError
from pydantic import BaseModel, ValidationError

from orchestrator.errors import AgentLoopError, ModelCallError
from orchestrator.gauge import UsageRatio
from orchestrator.protocol_middleware import (
    DEFAULT_INITIAL_DELAY,
    DEFAULT_RETRIES,
    ENV_RETRY_DELAY,
    WATCH_EVERY,
    AgentResult,
    ProtocolMiddleware,
    _final_tool_object,
)

__all__ = ["AgentResult", "run_agent"]

# -- one compiled agent per (model class, final tool, tool shapes, middleware classes) ------
_CURRENT: ContextVar[_Current] = ContextVar("tether_protocol")
"""What the agent run in progress brings to its compiled agent (LangGraph copies context
variables into the threads it runs nodes and tools in)."""


class _Current:
    """What one agent run brings to a shared compiled agent."""

    __slots__ = ("middleware", "model", "protocol", "tools")

    def __init__(
        self,
        protocol: ProtocolMiddleware,
        model: Any = None,
        tools: dict[str, Any] | None = None,
        middleware: tuple = (),
    ) -> None:
        self.protocol = protocol
        self.model = model
        """The run's model when the compiled graph was built with another one, else None."""
        self.tools = tools
        """The run's tools by name when the compiled graph holds other objects of the same
        shape (an earlier run's, bound to its own memory and workdir); else None."""
        self.middleware = middleware
        """The run's own middleware, which the graph's `_Forward` slots call."""


class _CurrentProtocol(AgentMiddleware):
    """The run in progress's `ProtocolMiddleware` and tools, so one compiled agent serves
    them all.

    Building and compiling a `create_agent` graph costs more than a fast model's whole run;
    the graph holds nothing of a run, only this forwarder does, through `_CURRENT`. A tool
    call reaches the run's own tool object (LangChain's way for tools a middleware
    provides: `request.override(tool=...)`), and a model call goes to the run's model,
    bound to the run's tool objects (`create_agent` binds at call time, from the request).
    """

    @property
    def name(self) -> str:
        return ProtocolMiddleware.__name__  # the graph's node names stay those of one run

    def wrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        current = _CURRENT.get()
        if current.model is not None:
            request = request.override(model=current.model)
        if current.tools is not None:
            tools = [current.tools.get(getattr(t, "name", None), t) for t in request.tools]
            request = request.override(tools=tools)
        return current.protocol.wrap_model_call(request, handler)

    def wrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        current = _CURRENT.get()
        if current.tools is not None:
            tool = current.tools.get(request.tool_call["name"])
            if tool is not None:
                request = request.override(tool=tool)
        return current.protocol.wrap_tool_call(request, handler)


# -- an agent's own middleware in a shared graph --------------------------------------------
_SYNC_HOOKS = ("before_agent", "before_model", "after_model", "after_agent")
_WRAP_HOOKS = ("wrap_model_call", "wrap_tool_call")
_ASYNC_HOOKS = (
    "abefore_agent", "abefore_model", "aafter_model", "aafter_agent",
    "awrap_model_call", "awrap_tool_call",
)  # fmt: skip


class _Forward(AgentMiddleware):
    """Slot `index` of a shared graph's middleware: each hook calls the same hook of the
    run's own middleware at that position (`_Current.middleware`)."""

    def __init__(self, index: int, name: str) -> None:
        super().__init__()
        self.index, self._name = index, name

    @property
    def name(self) -> str:
        return self._name


def _forward_hook(hook: str) -> Callable[..., Any]:
    if hook in _WRAP_HOOKS:

        def wrap(self: _Forward, request: Any, handler: Callable[[Any], Any]) -> Any:
            return getattr(_CURRENT.get().middleware[self.index], hook)(request, handler)

        return wrap

    def node(self: _Forward, state: Any, runtime: Any) -> Any:
        return getattr(_CURRENT.get().middleware[self.index], hook)(state, runtime)

    return node


_FORWARDS: dict[type, type[_Forward] | None] = {}


def _forward_class(middleware: Any) -> type[_Forward] | None:
    """A `_Forward` class with the hooks `middleware`'s class overrides; None when a shared
    graph could not stand in for it (async hooks, its own tools or state, jumps)."""
    base = AgentMiddleware
    own = (  # on the instance or its class: only a graph of its own knows them
        getattr(middleware, "tools", None)
        or getattr(middleware, "state_schema", base.state_schema) is not base.state_schema
        or getattr(middleware, "trace_policy", None) != getattr(base, "trace_policy", None)
    )
    if own:
        return None
    cls = type(middleware)
    if cls in _FORWARDS:
        return _FORWARDS[cls]
    hooks = [h for h in (*_SYNC_HOOKS, *_WRAP_HOOKS) if getattr(cls, h) is not getattr(base, h)]
    shareable = all(getattr(cls, h) is getattr(base, h) for h in _ASYNC_HOOKS) and not any(
        hasattr(getattr(cls, h), "__can_jump_to__") for h in hooks
    )
    forward = None
    if shareable:
        namespace = {h: _forward_hook(h) for h in hooks}
        forward = type(f"_Forward{cls.__name__}", (_Forward,), namespace)
    _FORWARDS[cls] = forward
    return forward


# -- the cache ------------------------------------------------------------------------------
_AGENTS: dict[tuple, tuple[tuple, Any]] = {}
_AGENTS_LOCK = threading.Lock()
_AGENTS_MAX = 64


def _shape(tool: Any) -> tuple:
    """What a compiled agent takes from a tool object: its class, name, description,
    arguments model (by identity; kept alive by the cache entry), and error handling."""
    return (
        type(tool),
        tool.name,
        tool.description,
        id(tool.args_schema),
        tool.return_direct,
        id(getattr(tool, "handle_tool_error", None)),
        id(getattr(tool, "handle_validation_error", None)),
        getattr(tool, "response_format", None),
    )


def _agent(
    model: Any, tools: tuple, final_tool: type[BaseModel], middleware: tuple
) -> tuple[Any, tuple[Any, dict[str, Any] | None]]:
    """`(agent, (model, tools))`: the compiled agent for these parts, and the run's model
    and tools by name where the agent was compiled with other objects (else None).

    Built once per (model class, final tool, tool shapes, middleware classes and names):
    the graph does not depend on the model object, which `create_agent` takes from each
    request, and its middleware slots call the run's own middleware. The objects it was
    built with are kept with it, so an arguments model's identity in the key is never
    reused meanwhile. Middleware a slot cannot stand in for gets a graph of its own.
    """

    def build(own_middleware: Sequence[Any]) -> Any:
        return create_agent(
            model,
            tools=[*tools, _final_tool_object(final_tool)],
            middleware=[*own_middleware, _CurrentProtocol()],
        )

    forwards = [_forward_class(m) for m in middleware]
    if not all(forwards):
        return build(middleware), (None, None)
    names = tuple(m.name for m in middleware)
    key = (type(model), final_tool, tuple(_shape(t) for t in tools), tuple(forwards), names)
    with _AGENTS_LOCK:
        hit = _AGENTS.get(key)
    if hit is None:
        agent = build([f(i, name) for i, (f, name) in enumerate(zip(forwards, names, strict=True))])
        with _AGENTS_LOCK:
            if len(_AGENTS) >= _AGENTS_MAX:
                _AGENTS.clear()
            _AGENTS[key] = ((model, tools), agent)
        return agent, (None, None)
    (built_model, built_tools), agent = hit
    same_tools = all(a is b for a, b in zip(built_tools, tools, strict=True))
    return agent, (
        None if built_model is model else model,
        None if same_tools else {t.name: t for t in tools},
    )


def _closing(message: Any) -> bool:
    """The empty reply `ProtocolMiddleware` ends an agent with (not a model call)."""
    return str(message.id or "").startswith("end-") and not message.tool_calls


def _has_after_model(middleware: Any) -> bool:
    cls = type(middleware)
    return (
        cls.after_model is not AgentMiddleware.after_model
        or cls.aafter_model is not AgentMiddleware.aafter_model
    )


def _transcript_tokens(transcript: list[Any]) -> int:
    return sum(
        int((getattr(m, "usage_metadata", None) or {}).get("total_tokens") or 0)
        for m in transcript
        if m.type == "ai"
    )


def _final_in(transcript: list[Any], final_tool: type[BaseModel]) -> BaseModel | None:
    """The accepted final answer of a (replayed) transcript, if it has one."""
    accepted = {
        m.tool_call_id
        for m in transcript
        if m.type == "tool" and m.name == final_tool.__name__ and m.status != "error"
    }
    for message in reversed(transcript):
        for call in getattr(message, "tool_calls", None) or []:
            if call.get("id") in accepted:
                try:
                    return final_tool.model_validate(call.get("args") or {})
                except ValidationError:
                    continue
    return None


def run_agent(
    model: Any,
    *,
    tools: Sequence[Any],
    final_tool: type[BaseModel],
    messages: list[Any],
    max_steps: int = 8,
    max_context_tokens: int = 16000,
    on_step: Callable[[int, int], None] | None = None,
    middleware: Sequence[Any] = (),
    retries: int = DEFAULT_RETRIES,
    initial_delay: float | None = None,
    stop: threading.Event | None = None,
    usage: UsageRatio | None = None,
    notify: Callable[[str], None] | None = None,
    watch_every: float = WATCH_EVERY,
) -> AgentResult:
    """Run a `create_agent` agent until it gives a valid `final_tool` answer.

    Args:
        model: a LangChain chat model supporting `bind_tools` (with `tool_choice`).
        tools: ordinary tools (`BaseTool`) the agent may call.
        final_tool: the protocol model whose call ends the run.
        messages: the starting conversation (system message first, then the user's).
        max_steps: model calls allowed before the final tool is forced.
        max_context_tokens: the agent's context window (estimated tokens).
        on_step: called with `(tokens_so_far, context_tokens)` after each call.
        middleware: more `AgentMiddleware` to run outside tether's protocol middleware.
        retries: retries of one failed model call (exponential backoff, `Retry-After`).
        initial_delay: the first retry's delay in seconds (default `$TETHER_RETRY_DELAY`,
            else 1).
        stop: once set, the agent raises `Stopped` before its next model call (or retry).
        usage: the run's reported/estimated token ratio (shared by its agents), which
            scales `max_context_tokens` into the provider's tokens.
        notify: receives a line for each retry and, every `watch_every` seconds, while a
            call waits.

    Raises:
        AgentLoopError: no valid final answer within the budget.
        ModelCallError: the model failed after its retries.
    """
    if initial_delay is None:
        initial_delay = float(os.environ.get(ENV_RETRY_DELAY) or DEFAULT_INITIAL_DELAY)
    protocol = ProtocolMiddleware(
        final_tool,
        max_steps=max_steps,
        max_context_tokens=max_context_tokens,
        on_step=on_step,
        retries=retries,
        initial_delay=initial_delay,
        stop=stop,
        usage=usage,
        jump=not any(_has_after_model(m) for m in middleware),
        notify=notify,
        watch_every=watch_every,
    )
    middleware = tuple(middleware)
    agent, (own_model, own_tools) = _agent(model, tuple(tools), final_tool, middleware)
    limit = 4 * (max_steps + 2) + 10
    token = _CURRENT.set(_Current(protocol, own_model, own_tools, middleware))
    try:
        state = agent.invoke({"messages": list(messages)}, {"recursion_limit": limit})
    except ModelCallError as exc:
        exc.tokens = protocol.result.tokens  # the failed agent's spend still counts
        raise
    except GraphRecursionError as exc:
        error = AgentLoopError(
            f"agent did not call {final_tool.__name__!r} within {max_steps} steps; "
            "raise the agent's max_steps in the workflow file"
        )
        error.tokens = protocol.result.tokens
        raise error from exc
    finally:
        _CURRENT.reset(token)
    result = protocol.result
    result.transcript = list(state.get("messages") or [])
    # inside a graph node the agent is a durable subgraph: on resume it continues from
    # its last completed step, so calls of the earlier process are only in the transcript
    result.tokens = max(result.tokens, _transcript_tokens(result.transcript))
    # replies of real calls (a lead's earlier turns, given back as text, and the closing
    # reply carry no provider metadata), also those of an earlier process (a resumed agent)
    replies = [
        m
        for m in result.transcript
        if m.type == "ai" and (m.usage_metadata or m.response_metadata) and not _closing(m)
    ]
    result.calls = max(result.calls, len(replies))
    result.input_tokens = max(
        result.input_tokens,
        sum(int((m.usage_metadata or {}).get("input_tokens") or 0) for m in replies),
    )
    if protocol.final is None:
        protocol.final = _final_in(result.transcript, final_tool)
    if protocol.final is None:
        error = AgentLoopError(
            f"agent did not call {final_tool.__name__!r} validly within {max_steps} steps; "
            "raise the agent's max_steps in the workflow file"
        )
        error.tokens = result.tokens
        raise error
    result.final = protocol.final
    return result
