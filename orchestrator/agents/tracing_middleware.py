"""OpenTelemetry spans of one agent's model and tool calls (`TracingMiddleware`).

Each model call is a `chat {model}` span and each tool call an `execute_tool {tool}` span,
children of the agent's own span, with the attributes of OpenTelemetry's GenAI semantic
conventions (`gen_ai.operation.name`, `gen_ai.provider.name`, `gen_ai.request.model`,
`gen_ai.response.model`, `gen_ai.usage.input_tokens`, `gen_ai.usage.output_tokens`,
`gen_ai.tool.name`, `gen_ai.tool.call.id`) and tether's (`tether.task.id`, `tether.agent`,
`tether.subtask.key`). Messages, tool arguments and results are never recorded: a trace
leaves the machine, the memory keeps the content.

The agent's span belongs to whoever traces the run (`orchestrator.graph.tracing.Tracing`):
the middleware asks for it (`agent_span`, None: nothing is traced) and says when the agent
ended (`ended`: after the agent's last step, or with the exception that ended it). A span is
made current while its call runs, so spans of other instrumentation (an HTTP client's)
nest under it.

Invariant: tracing never changes what a call returns or raises. The middleware is built
only when tracing is on; OpenTelemetry is imported by its hooks, never at import time.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import AIMessage
from langgraph.errors import GraphBubbleUp

if TYPE_CHECKING:
    from langchain.agents.middleware import (
        AgentState,
        ModelCallResult,
        ModelRequest,
        ModelResponse,
        ToolCallRequest,
    )
    from langchain_core.messages import ToolMessage
    from langgraph.runtime import Runtime
    from langgraph.types import Command


def model_attributes(model: Any) -> dict[str, str]:
    """The GenAI attributes naming `model`: its provider and name, as LangChain gives
    them to its own tracing (`_get_ls_params`), else its class name."""
    try:
        params = model._get_ls_params()
    except Exception:  # not a LangChain chat model, or one without LangSmith parameters
        params = {}
    provider = str(params.get("ls_provider") or type(model).__name__.lower())
    name = str(params.get("ls_model_name") or getattr(model, "model_name", "") or provider)
    return {
        "gen_ai.provider.name": provider,
        "gen_ai.system": provider,  # the attribute's name before semconv 1.37
        "gen_ai.request.model": name,
    }


def reply_attributes(reply: AIMessage) -> dict[str, Any]:
    """The GenAI attributes of a model's reply: reported tokens, model, finish reason."""
    out: dict[str, Any] = {}
    usage = reply.usage_metadata or {}
    for ours, theirs in (("input_tokens", "input_tokens"), ("output_tokens", "output_tokens")):
        if usage.get(theirs) is not None:
            out[f"gen_ai.usage.{ours}"] = int(usage[theirs])
    meta = reply.response_metadata or {}
    if meta.get("model_name"):
        out["gen_ai.response.model"] = str(meta["model_name"])
    reason = meta.get("finish_reason") or meta.get("stop_reason")
    if reason:
        out["gen_ai.response.finish_reasons"] = [str(reason)]
    if reply.id:
        out["gen_ai.response.id"] = str(reply.id)
    return out


class TracingMiddleware(AgentMiddleware):
    """Spans of one agent's model and tool calls under its agent span (module docstring).

    Args:
        tracer: an OpenTelemetry `Tracer`.
        agent_span: the agent's span, opened on first use (None: not traced).
        ended: told that the agent ended, with the exception that ended it (or None).
        attributes: tether's attributes every span of the agent carries.
    """

    def __init__(
        self,
        tracer: Any,
        agent_span: Callable[[], Any],
        ended: Callable[[BaseException | None], None],
        attributes: dict[str, Any],
    ) -> None:
        super().__init__()
        self.tracer = tracer
        self.agent_span = agent_span
        self.ended = ended
        self.attributes = attributes

    def _parent(self) -> Any:
        from opentelemetry import trace

        span = self.agent_span()
        return None if span is None else trace.set_span_in_context(span)

    def wrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]
    ) -> ModelCallResult:
        parent = self._parent()
        if parent is None:
            return handler(request)
        from opentelemetry.trace import SpanKind

        model = model_attributes(request.model)
        attributes = {**self.attributes, "gen_ai.operation.name": "chat", **model}
        try:
            with self.tracer.start_as_current_span(
                f"chat {model['gen_ai.request.model']}",
                context=parent,
                kind=SpanKind.CLIENT,
                attributes=attributes,
            ) as span:
                response = handler(request)
                reply = next((m for m in response.result if isinstance(m, AIMessage)), None)
                if reply is not None:
                    span.set_attributes(reply_attributes(reply))
        except GraphBubbleUp:  # an interrupt: the agent waits, it has not failed
            raise
        except BaseException as exc:  # the call's failure ends the agent, after the call
            self.ended(exc)
            raise
        return response

    def wrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], ToolMessage | Command]
    ) -> ToolMessage | Command:
        parent = self._parent()
        if parent is None:
            return handler(request)
        from opentelemetry.trace import SpanKind, Status, StatusCode

        call = request.tool_call
        attributes = {
            **self.attributes,
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": str(call["name"]),
            "gen_ai.tool.type": "function",
        }
        if call.get("id"):
            attributes["gen_ai.tool.call.id"] = str(call["id"])
        with self.tracer.start_as_current_span(
            f"execute_tool {call['name']}",
            context=parent,
            kind=SpanKind.INTERNAL,
            attributes=attributes,
        ) as span:
            result = handler(request)
            if getattr(result, "status", None) == "error":  # answered, as an error
                span.set_status(Status(StatusCode.ERROR, "the tool answered with an error"))
        return result

    def after_agent(self, state: AgentState, runtime: Runtime) -> dict[str, Any] | None:
        self.ended(None)
        return None
