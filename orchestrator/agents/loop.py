"""The agents of tether (lead and subagents), built with LangChain's `create_agent`.

`run_agent` runs a `langchain.agents.create_agent` agent with the model, the agent's
ordinary tools and one *final* protocol tool (`PhasePlan` or `SubmitFindings`, see
`orchestrator.types`). Its middleware list is the agent's own middleware, then tether's
protocol, one job per class (`orchestrator.agents.protocol_middleware`): the final answer
(`orchestrator.agents.final_answer`), Ctrl-C, the step limit, the context budget, provider
retries, token accounting, and LangChain's `ToolErrorMiddleware` for failing tools.

The compiled graph is shared by runs of the same shape (`orchestrator.agents._cache`); each
run's middleware, model and tool objects reach it through a context variable.
Token counts, context fitting and the reading of provider failures are in
`orchestrator.agents.provider`.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from langchain.agents.middleware import AgentMiddleware
from langgraph.errors import GraphRecursionError
from pydantic import BaseModel, ValidationError

from orchestrator.agents._cache import CURRENT, compiled_agent
from orchestrator.agents.final_answer import is_closing
from orchestrator.agents.gauge import UsageRatio
from orchestrator.agents.protocol_middleware import (
    DEFAULT_INITIAL_DELAY,
    DEFAULT_RETRIES,
    ENV_RETRY_DELAY,
    MAX_STEPS_HINT,
    WATCH_EVERY,
    AgentResult,
    protocol_middleware,
)
from orchestrator.config.defaults import DEFAULT_NUDGES
from orchestrator.errors import AgentLoopError, ModelCallError

if TYPE_CHECKING:
    from langchain_core.messages import BaseMessage

__all__ = ["AgentResult", "run_agent"]


def _has_after_model(middleware: Any) -> bool:
    cls = type(middleware)
    return (
        cls.after_model is not AgentMiddleware.after_model
        or cls.aafter_model is not AgentMiddleware.aafter_model
    )


def _transcript_tokens(transcript: list[BaseMessage]) -> int:
    return sum(
        int((getattr(m, "usage_metadata", None) or {}).get("total_tokens") or 0)
        for m in transcript
        if m.type == "ai"
    )


def _final_in(transcript: list[BaseMessage], final_tool: type[BaseModel]) -> BaseModel | None:
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
    on_step: Callable[[int, int, str | None], None] | None = None,
    middleware: Sequence[Any] = (),
    retries: int = DEFAULT_RETRIES,
    initial_delay: float | None = None,
    stop: threading.Event | None = None,
    usage: UsageRatio | None = None,
    notify: Callable[[str], None] | None = None,
    watch_every: float = WATCH_EVERY,
    steps_hint: str = MAX_STEPS_HINT,
    nudges: int = DEFAULT_NUDGES,
    journal: Any = None,
    max_tokens: int | None = None,
) -> AgentResult:
    """Run a `create_agent` agent until it gives a valid `final_tool` answer.

    Args:
        model: a LangChain chat model supporting `bind_tools` (with `tool_choice`).
        tools: ordinary tools (`BaseTool`) the agent may call.
        final_tool: the protocol model whose call ends the run.
        messages: the starting conversation (system message first, then the user's).
        max_steps: model calls allowed before the final tool is forced.
        max_context_tokens: the agent's context window (estimated tokens).
        on_step: called with `(tokens_so_far, context_tokens, tool)` after each call
            (`tool`: the first tool its reply calls, or None).
        middleware: more `AgentMiddleware` to run outside tether's protocol middleware.
        retries: retries of one failed model call (exponential backoff, `Retry-After`).
        initial_delay: the first retry's delay in seconds (default `$TETHER_RETRY_DELAY`,
            else 1).
        stop: once set, the agent raises `Stopped` before its next model call (or retry).
        usage: the run's reported/estimated token ratio (shared by its agents), which
            scales `max_context_tokens` into the provider's tokens.
        notify: receives a line for each retry and, every `watch_every` seconds, while a
            call waits.
        steps_hint: what the error of an agent out of steps tells the user to do.
        nudges: replies without a tool call answered by a nudge ("use a tool, or call the
            final tool") before the final tool is forced.
        journal: where each call is recorded durably, as sent and as answered (the task's
            usage journal, `orchestrator.artifacts.usage.CallRecorder`); None: nowhere.
        max_tokens: the agent's token cap (None: none): once its calls reach it, the final
            tool is forced at the next call and the result is marked `capped`.

    Raises:
        AgentLoopError: no valid final answer within the budget (`TokenCapReached`: none
            when asked at the token cap).
        ModelCallError: the model failed after its retries.
    """
    if initial_delay is None:
        initial_delay = float(os.environ.get(ENV_RETRY_DELAY) or DEFAULT_INITIAL_DELAY)
    protocol = protocol_middleware(
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
        steps_hint=steps_hint,
        nudges=nudges,
        journal=journal,
        max_tokens=max_tokens,
    )
    everything = (*middleware, *protocol.middleware)
    agent, current = compiled_agent(model, tuple(tools), final_tool, everything)
    limit = 4 * (max_steps + 3) + 10
    token = CURRENT.set(current)
    try:
        state = agent.invoke({"messages": list(messages)}, {"recursion_limit": limit})
    except ModelCallError as exc:
        exc.tokens = protocol.usage.result.tokens  # the failed agent's spend still counts
        raise
    except GraphRecursionError as exc:
        error = AgentLoopError(
            f"agent did not call {final_tool.__name__!r} within {max_steps} steps; " + steps_hint
        )
        error.tokens = protocol.usage.result.tokens
        raise error from exc
    finally:
        CURRENT.reset(token)
    result = protocol.usage.result
    result.transcript = list(state.get("messages") or [])
    # inside a graph node the agent is a durable subgraph: on resume it continues from
    # its last completed step, so calls of the earlier process are only in the transcript
    result.tokens = max(result.tokens, _transcript_tokens(result.transcript))
    # replies of real calls (a lead's earlier turns, given back as text, and the closing
    # reply carry no provider metadata), also those of an earlier process (a resumed agent)
    replies = [
        m
        for m in result.transcript
        if m.type == "ai" and (m.usage_metadata or m.response_metadata) and not is_closing(m)
    ]
    result.calls = max(result.calls, len(replies))
    result.input_tokens = max(
        result.input_tokens,
        sum(int((m.usage_metadata or {}).get("input_tokens") or 0) for m in replies),
    )
    final = protocol.final.final
    if final is None:
        final = _final_in(result.transcript, final_tool)
    if final is None:
        error = AgentLoopError(
            f"agent did not call {final_tool.__name__!r} validly within {max_steps} steps; "
            + steps_hint
        )
        error.tokens = result.tokens
        raise error
    result.final = final
    return result
