"""`FinalAnswerMiddleware`: an agent ends with one valid call of its final protocol tool.

The final tool (`PhasePlan` for the lead, `SubmitFindings` for a subagent) is an ordinary
tool of the agent; this middleware makes the answer dependable:

* **every assistant tool call is answered**: a call whose arguments are not JSON (a
  provider's truncated reply lands in `invalid_tool_calls`) becomes a call the tool step
  answers with an error the model can correct; a final call with missing fields likewise;
  nothing is ever sent after an unanswered call, which the real APIs reject with HTTP 400;
* **any valid form is accepted**: the final tool's call, or the same JSON given as the
  message text; prose is answered by one more request with the final tool forced
  (`tool_choice`) while the step budget allows;
* **one super-step to end**: a reply whose only call is a valid final answer is answered
  ("accepted") in the model's own step and the agent ends there (a `jump_to: end`, or,
  when after-model middleware would not see a jump, a closing empty assistant message).

Invariant: once `final` is set, the agent makes no further model call.
"""

from __future__ import annotations

import functools
import json
import re
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from langchain.agents.middleware import AgentMiddleware, ExtendedModelResponse, ModelResponse
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import StructuredTool
from langgraph.types import Command
from pydantic import BaseModel, ValidationError

if TYPE_CHECKING:
    from langchain.agents.middleware import (
        ModelCallResult,
        ModelRequest,
        ModelResponse,
        ToolCallRequest,
    )
    from langchain_core.messages import ToolMessage

    from orchestrator.types import JsonObject

INVALID_ARGS_KEY = "__tether_invalid_arguments__"
CLOSING_PREFIX = "end-"
"""Id prefix of the empty assistant message that ends an agent without a jump."""

_FENCE = re.compile(r"```(?:json)?\s*(\{.*\})\s*```", re.DOTALL)


class CallCounter(Protocol):
    """Counts the agent's model calls (`protocol_middleware.UsageMiddleware`)."""

    calls: int


def json_answer(text: str, final_tool: type[BaseModel]) -> JsonObject | None:
    """The final tool's arguments when `text` is (or fences) a valid JSON answer."""
    text = (text or "").strip()
    fenced = _FENCE.search(text)
    candidates = [fenced.group(1)] if fenced else []
    if "{" in text:
        candidates.append(text[text.index("{") : text.rindex("}") + 1])
    for candidate in candidates:
        try:
            data = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(data, dict) and set(data) == {final_tool.__name__}:
            data = data[final_tool.__name__]
        if not isinstance(data, dict):
            continue
        try:
            return final_tool.model_validate(data).model_dump()
        except ValidationError:
            continue
    return None


@functools.lru_cache(maxsize=16)
def final_tool_object(final_tool: type[BaseModel]) -> StructuredTool:
    """The final tool as a tool object; one per protocol model (tools are stateless, and
    a model converts a tool it has seen before for free)."""
    return StructuredTool.from_function(
        func=lambda **_: "accepted",
        name=final_tool.__name__,
        description=(final_tool.__doc__ or final_tool.__name__).strip(),
        args_schema=final_tool,
    )


def is_closing(message: Any) -> bool:
    """The empty reply `FinalAnswerMiddleware` ends an agent with (not a model call)."""
    return str(message.id or "").startswith(CLOSING_PREFIX) and not message.tool_calls


def _validation_text(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors()[:5]:
        where = ".".join(str(p) for p in err.get("loc", ())) or "(root)"
        parts.append(f"{where}: {err.get('msg')}")
    return "; ".join(parts)


def _call_id() -> str:
    return "call_" + uuid.uuid4().hex[:20]


class FinalAnswerMiddleware(AgentMiddleware):
    """Accepts, repairs or asks again for the agent's final answer (module docstring).

    One instance serves one agent run and keeps its answer in `final`.

    Args:
        final_tool: the protocol model whose call ends the run.
        counter: the run's model-call count (a prose reply is asked again only while
            `counter.calls <= max_steps`).
        max_steps: the agent's step budget.
        jump: end with `jump_to: end`; False when after-model middleware (e.g.
            `HumanInTheLoopMiddleware`) routes the agent, where a jump is not seen: the
            agent then ends with a closing empty assistant message instead.
    """

    def __init__(
        self, final_tool: type[BaseModel], counter: CallCounter, *, max_steps: int, jump: bool
    ) -> None:
        super().__init__()
        self.final_tool = final_tool
        self.final_name = final_tool.__name__
        self.counter = counter
        self.max_steps = max_steps
        self.jump = jump
        self.final: BaseModel | None = None

    # -- model calls --------------------------------------------------------------------
    def wrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]
    ) -> ModelCallResult:
        # Checked here rather than in a `before_model` hook, which would be a super-step of
        # its own (a durable checkpoint) before every model call.
        if self.final is not None:  # accepted by the tool step: end without a model call
            return self._end(ModelResponse(result=[]))
        response = handler(request)
        message = self._normalise(response.result[-1])
        if not message.tool_calls:
            answer = json_answer(str(message.text), self.final_tool)
            if answer is not None:
                call = {"name": self.final_name, "args": answer, "id": _call_id(),
                        "type": "tool_call"}  # fmt: skip
                message = message.model_copy(update={"tool_calls": [call]})
            elif self.counter.calls <= self.max_steps:
                # prose: ask once more, with the final tool forced
                nudge = HumanMessage(
                    f"Answer by calling the {self.final_name} tool with the required fields now."
                )
                forced = request.override(
                    messages=[*request.messages, message, nudge], tool_choice=self.final_name
                )
                message = self._normalise(handler(forced).result[-1])
        result = ModelResponse(
            result=[*response.result[:-1], message],
            structured_response=getattr(response, "structured_response", None),
        )
        return self._finish_early(result, message)

    def _finish_early(self, result: Any, message: Any) -> Any:
        """A reply whose only tool call is a valid final answer ends the run in the model's
        own step: the call is answered there ("accepted") and the agent jumps to its end,
        instead of running a tool step and one more model step to end (each a durable
        super-step of the subgraph). Anything else goes through the tool node as before."""
        calls = getattr(message, "tool_calls", None) or []
        if self.final is not None or len(calls) != 1 or calls[0]["name"] != self.final_name:
            return result
        call = calls[0]
        args = call.get("args") or {}
        if INVALID_ARGS_KEY in args:
            return result
        try:
            self.final = self.final_tool.model_validate(args)
        except ValidationError:
            return result  # the tool node answers with what is wrong, and the model retries
        answer = ToolMessage(
            content="accepted", tool_call_id=call.get("id") or "", name=call["name"]
        )
        return self._end(
            ModelResponse(
                result=[*result.result, answer], structured_response=result.structured_response
            )
        )

    def _normalise(self, message: object) -> Any:
        """Invalid tool calls (arguments that are not JSON) become calls the tool
        node answers with an error, so no call is ever left unanswered."""
        invalid = list(getattr(message, "invalid_tool_calls", None) or [])
        if not isinstance(message, AIMessage) or not invalid:
            return message
        fixed = [
            {
                "name": c.get("name") or self.final_name,
                "args": {INVALID_ARGS_KEY: str(c.get("args") or "")[:2000]},
                "id": c.get("id") or _call_id(),
                "type": "tool_call",
            }
            for c in invalid
        ]
        return message.model_copy(
            update={"tool_calls": [*message.tool_calls, *fixed], "invalid_tool_calls": []}
        )

    def _end(self, response: Any) -> Any:
        """`response`, then the agent's end (no tool step, no further model call)."""
        if not self.jump:  # a reply without tool calls ends the agent loop wherever it routes
            closing = AIMessage(content="", id=f"{CLOSING_PREFIX}{_call_id()}")
            return ModelResponse(
                result=[*response.result, closing],
                structured_response=response.structured_response,
            )
        return ExtendedModelResponse(
            model_response=response, command=Command(update={"jump_to": "end"})
        )

    # -- tool calls ---------------------------------------------------------------------
    def wrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], ToolMessage | Command]
    ) -> ToolMessage | Command:
        call = request.tool_call
        name, args, call_id = call["name"], call.get("args") or {}, call.get("id") or ""
        if INVALID_ARGS_KEY in args:
            return ToolMessage(
                content=f"Error: the arguments of your {name} call were not valid JSON "
                f"(truncated?): {args[INVALID_ARGS_KEY][:200]!r}; call {name} again "
                "with complete JSON arguments.",
                tool_call_id=call_id,
                name=name,
                status="error",
            )
        if name == self.final_name:
            return self._accept(name, args, call_id)
        return handler(request)

    def _accept(self, name: str, args: JsonObject, call_id: str) -> Any:
        if self.final is not None:
            return ToolMessage(content="accepted", tool_call_id=call_id, name=name)
        try:
            self.final = self.final_tool.model_validate(args)
        except ValidationError as exc:
            return ToolMessage(
                content=f"Error: your {name} call was invalid ({_validation_text(exc)}); "
                f"call {name} again with every required field.",
                tool_call_id=call_id,
                name=name,
                status="error",
            )
        return ToolMessage(content="accepted", tool_call_id=call_id, name=name)
