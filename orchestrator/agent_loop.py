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

The compiled agent graph holds no state of a run, so runs with the same model, tools and
final tool (the subagents of a run) share one; each run's `ProtocolMiddleware` reaches it
through a context variable.

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
from pydantic import BaseModel, ValidationError

from orchestrator.errors import AgentLoopError, ModelCallError
from orchestrator.protocol_middleware import (
    DEFAULT_INITIAL_DELAY,
    DEFAULT_RETRIES,
    ENV_RETRY_DELAY,
    AgentResult,
    ProtocolMiddleware,
    _final_tool_object,
)

__all__ = ["AgentResult", "run_agent"]

# -- one compiled agent per (model, tools, final tool) --------------------------------------
_CURRENT: ContextVar[ProtocolMiddleware] = ContextVar("tether_protocol")
"""The protocol state of the agent run in progress (LangGraph copies context variables
into the threads it runs nodes and tools in)."""


class _CurrentProtocol(AgentMiddleware):
    """`ProtocolMiddleware` of the run in progress, so one compiled agent serves them all.

    Building and compiling a `create_agent` graph costs more than a fast model's whole run;
    the graph holds nothing of a run, only this forwarder does, through `_CURRENT`.
    """

    @property
    def name(self) -> str:
        return ProtocolMiddleware.__name__  # the graph's node names stay those of one run

    def wrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        return _CURRENT.get().wrap_model_call(request, handler)

    def wrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        return _CURRENT.get().wrap_tool_call(request, handler)


_AGENTS: dict[tuple, tuple[Any, Any]] = {}
_AGENTS_LOCK = threading.Lock()
_AGENTS_MAX = 64


def _agent(model: Any, tools: tuple, final_tool: type[BaseModel], middleware: tuple) -> Any:
    """The compiled agent for these parts; built once when `middleware` is empty.

    Keyed by the objects' identities (a run's tools and models are built once per run);
    the key's objects are kept with the agent so an identity is never reused meanwhile.
    """
    parts = (model, tools, final_tool)

    def build() -> Any:
        return create_agent(
            model,
            tools=[*tools, _final_tool_object(final_tool)],
            middleware=[*middleware, _CurrentProtocol()],
        )

    if middleware:  # an agent's own middleware holds state of its run: never shared
        return build()
    key = (id(model), tuple(id(t) for t in tools), final_tool)
    with _AGENTS_LOCK:
        hit = _AGENTS.get(key)
    if (
        hit is not None
        and hit[0][0] is model
        and all(a is b for a, b in zip(hit[0][1], tools, strict=True))
    ):
        return hit[1]
    agent = build()
    with _AGENTS_LOCK:
        if len(_AGENTS) >= _AGENTS_MAX:
            _AGENTS.clear()
        _AGENTS[key] = (parts, agent)
    return agent


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
    )
    agent = _agent(model, tuple(tools), final_tool, tuple(middleware))
    limit = 4 * (max_steps + 2) + 10
    token = _CURRENT.set(protocol)
    try:
        state = agent.invoke({"messages": list(messages)}, {"recursion_limit": limit})
    except ModelCallError as exc:
        exc.tokens = protocol.result.tokens  # the failed agent's spend still counts
        raise
    except Exception as exc:
        if type(exc).__name__ != "GraphRecursionError":
            raise
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
