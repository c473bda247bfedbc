"""A small tool-calling loop shared by the lead and the subagents.

The model is bound to the agent's ordinary tools plus one *final* protocol tool
(`PhasePlan` or `SubmitFindings`, see `orchestrator.protocol`). Each step sends the
conversation, runs every ordinary tool call and feeds the results back; the loop ends
when the model calls the final tool, whose arguments are validated and returned.

Invariants:
* bounded steps: after `max_steps` model calls without the final tool the agent is told
  to finish; if it still does not, `AgentLoopError` is raised (the caller marks the
  agent failed);
* bounded context: before each call the conversation is cut to `max_context_tokens`
  (estimated with LangChain's `count_tokens_approximately`): the system and first user
  message always stay, the oldest tool exchanges go first, and a single huge tool
  result is truncated with a note, so an agent never outgrows its window;
* a tool that raises becomes an error `ToolMessage` the model can react to, never a crash.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ValidationError

from orchestrator.errors import ModelCallError

TRUNCATION_NOTE = "\n[... truncated to fit the context window; use a narrower query ...]"


class AgentLoopError(ModelCallError):
    """The agent did not produce a valid final answer within its step budget."""


@dataclass
class AgentResult:
    """What one agent run produced."""

    final: BaseModel
    tokens: int = 0
    """Tokens used by all calls (reported usage when present, else estimated)."""
    context_tokens: list[int] = field(default_factory=list)
    """Estimated size of the context sent on each call."""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    """`{name, args}` of every ordinary tool call, in order."""
    transcript: list[Any] = field(default_factory=list)


def count_tokens(messages: Sequence[Any]) -> int:
    from langchain_core.messages.utils import count_tokens_approximately

    return int(count_tokens_approximately(list(messages)))


def usage_tokens(message: Any, fallback_context: int) -> int:
    """Tokens of one call: the model's `usage_metadata` when present, else an estimate."""
    usage = getattr(message, "usage_metadata", None)
    if usage and usage.get("total_tokens"):
        return int(usage["total_tokens"])
    return fallback_context + count_tokens([message])


def _truncate(message: Any, max_tokens: int) -> Any:
    text = message.content if isinstance(message.content, str) else str(message.content)
    keep = max(200, max_tokens * 4)
    if len(text) <= keep:
        return message
    return message.model_copy(update={"content": text[:keep] + TRUNCATION_NOTE})


def fit_context(messages: list[Any], max_tokens: int) -> list[Any]:
    """Cut `messages` to about `max_tokens`: keep the head (system + first user message)
    and the newest exchanges, dropping whole tool exchanges from the oldest end."""
    from langchain_core.messages import AIMessage, ToolMessage

    head = messages[:2]
    body = [
        _truncate(m, max_tokens // 3) if isinstance(m, ToolMessage) else m for m in messages[2:]
    ]
    while body and count_tokens(head + body) > max_tokens:
        # drop the oldest AI message together with the tool results that answer it
        drop = 1
        if isinstance(body[0], AIMessage):
            while drop < len(body) and isinstance(body[drop], ToolMessage):
                drop += 1
        if drop >= len(body):
            break  # keep at least the newest exchange
        body = body[drop:]
    return head + body


def _run_tool(tools_by_name: dict[str, Any], call: dict[str, Any]) -> Any:
    from langchain_core.messages import ToolMessage

    tool = tools_by_name.get(call["name"])
    if tool is None:
        content = f"Error: unknown tool {call['name']!r}; available: {sorted(tools_by_name)}"
    else:
        try:
            content = tool.invoke(call.get("args") or {})
        except Exception as exc:  # a failing tool is information for the model, not a crash
            content = f"Error: {type(exc).__name__}: {exc}"
    if not isinstance(content, str):
        content = str(content)
    return ToolMessage(
        content=content, tool_call_id=call.get("id") or call["name"], name=call["name"]
    )


def _step(
    reply: Any,
    final_tool: type[BaseModel],
    tools_by_name: dict[str, Any],
    conversation: list[Any],
    result: AgentResult,
) -> BaseModel | None:
    """Handle one reply: the parsed final answer, or run its tool calls (then None)."""
    from langchain_core.messages import HumanMessage

    final_name = final_tool.__name__
    calls = list(getattr(reply, "tool_calls", None) or [])
    final = next((c for c in calls if c["name"] == final_name), None)
    if final is not None:
        try:
            return final_tool.model_validate(final.get("args") or {})
        except ValidationError as exc:
            conversation.append(
                HumanMessage(
                    f"Your {final_name} call was invalid: {exc.errors()[:3]}; call it again."
                )
            )
            return None
    if not calls:
        conversation.append(HumanMessage(f"Use the tools, then finish by calling {final_name}."))
        return None
    for call in calls:
        result.tool_calls.append({"name": call["name"], "args": call.get("args") or {}})
        conversation.append(_run_tool(tools_by_name, call))
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
    bind: Callable[[Any, list[Any], type[BaseModel]], Any] | None = None,
) -> AgentResult:
    """Run the loop until the model calls `final_tool`.

    Args:
        model: a LangChain chat model supporting `bind_tools`.
        tools: ordinary tools (`BaseTool`) the agent may call.
        final_tool: the protocol model whose call ends the run.
        messages: the starting conversation (system message first, then the user's).
        max_steps: model calls allowed before the agent is told to finish.
        max_context_tokens: the agent's context window (estimated tokens).
        on_step: called with `(tokens_so_far, context_tokens)` after each call.
        bind: `(model, tools, final_tool) -> bound model`, e.g. a caching binder.

    Raises:
        AgentLoopError: no valid final call within the budget.
        ModelCallError: the model raised.
    """
    from langchain_core.messages import HumanMessage

    tools_by_name = {t.name: t for t in tools}
    bound = (
        bind(model, list(tools), final_tool)
        if bind is not None
        else model.bind_tools([*tools, final_tool])
    )
    result = AgentResult(final=None)  # type: ignore[arg-type]
    conversation = list(messages)
    final_name = final_tool.__name__
    for step in range(max_steps + 1):
        if step == max_steps:
            conversation.append(
                HumanMessage(f"Step budget exhausted: call {final_name} now with what you have.")
            )
        window = fit_context(conversation, max_context_tokens)
        context = count_tokens(window)
        result.context_tokens.append(context)
        try:
            reply = bound.invoke(window)
        except Exception as exc:
            raise ModelCallError(f"model call failed: {type(exc).__name__}: {exc}") from exc
        result.tokens += usage_tokens(reply, context)
        conversation.append(reply)
        if on_step:
            on_step(result.tokens, context)
        final = _step(reply, final_tool, tools_by_name, conversation, result)
        if final is not None:
            result.final, result.transcript = final, conversation
            return result
    raise AgentLoopError(
        f"agent did not call {final_name!r} within {max_steps} steps; "
        "raise the agent's max_steps in the workflow file"
    )
