"""`FinalAnswerMiddleware`: an agent ends with one valid call of its final protocol tool.

The final tool (`PhasePlan` or `SubmitAnswer` for the lead, `SubmitFindings` for a subagent) is an
ordinary tool of the agent; this middleware makes the answer dependable:

* **every assistant tool call is answered**: a call whose arguments are not JSON (a
  provider's truncated reply lands in `invalid_tool_calls`) becomes a call the tool step
  answers with an error the model can correct; a final call with missing fields likewise;
  nothing is ever sent after an unanswered call, which the real APIs reject with HTTP 400;
* **any valid form is accepted**: the final tool's call, or the same JSON given as the
  message text;
* **a reply without a tool call is answered, not ended on**: while steps remain it gets a
  nudge in words ("use a tool, or call the final tool"), up to `nudges` times in a run; the
  next one, or one at the step budget, gets the final tool forced (`tool_choice`);
* **a provider that ignores `tool_choice`** (llama.cpp's server reads a named choice as
  "auto"): a forced request answered by prose or by other calls is asked once more, in
  words, for the final call or its JSON (the other calls are answered "not run"); the step
  limit allows that one call (`GRACE_CALLS`);
* **one super-step to end**: a reply whose only call is a valid final answer is answered
  ("accepted") in the model's own step and the agent ends there (a `jump_to: end`, or,
  when after-model middleware would not see a jump, a closing empty assistant message).

The prose replies and the words that answered them stay in the conversation (a nudge or
an ask is a `HumanMessage` after the prose, whose ids say which: `NUDGE_PREFIX`,
`ASK_PREFIX`), so a resumed agent counts its nudges from its messages.

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

from orchestrator.config.defaults import DEFAULT_NUDGES

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
NUDGE_PREFIX = "nudge-"
"""Id prefix of the words that answer a reply without a tool call while steps remain."""
ASK_PREFIX = "ask-"
"""Id prefix of the words that ask for the final call (with the final tool forced)."""
GRACE_CALLS = 1
"""Model calls allowed after the forced one at the step budget: the final answer asked for
in words when the provider ignored `tool_choice` (or a corrected final call)."""

_FENCE = re.compile(r"```(?:json)?\s*(\{.*\})\s*```", re.DOTALL)


class CallCounter(Protocol):
    """Counts the agent's model calls (`protocol_middleware.UsageMiddleware`)."""

    calls: int
    tool_choice: Any
    """The `tool_choice` the last answered call was sent with (None: none)."""


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


def _has_prefix(message: Any, prefix: str) -> bool:
    return isinstance(message, HumanMessage) and str(message.id or "").startswith(prefix)


def _call_id() -> str:
    return "call_" + uuid.uuid4().hex[:20]


class FinalAnswerMiddleware(AgentMiddleware):
    """Accepts, repairs or asks again for the agent's final answer (module docstring).

    One instance serves one agent run and keeps its answer in `final`.

    Args:
        final_tool: the protocol model whose call ends the run.
        counter: the run's model-call count (a reply without a tool call is nudged only
            while `counter.calls < max_steps`, the final tool forced while
            `counter.calls <= max_steps`).
        max_steps: the agent's step budget.
        jump: end with `jump_to: end`; False when after-model middleware (e.g.
            `HumanInTheLoopMiddleware`) routes the agent, where a jump is not seen: the
            agent then ends with a closing empty assistant message instead.
        nudges: replies without a tool call answered by a nudge (not the final tool
            forced) in one run.
    """

    def __init__(
        self,
        final_tool: type[BaseModel],
        counter: CallCounter,
        *,
        max_steps: int,
        jump: bool,
        nudges: int = DEFAULT_NUDGES,
    ) -> None:
        super().__init__()
        self.final_tool = final_tool
        self.final_name = final_tool.__name__
        self.counter = counter
        self.max_steps = max_steps
        self.jump = jump
        self.nudges = nudges
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
        message = self._as_call(self._normalise(response.result[-1]))
        kept: list[Any] = []  # replies answered here, with what answered them
        asked = False  # a forced request's reply was asked again, in words
        while (again := self._again(message, [*request.messages, *kept], asked)) is not None:
            words, choice = again
            asked = asked or self.counter.tool_choice == self.final_name
            kept += [message, *self._not_run(message), words]
            retry = request.override(messages=[*request.messages, *kept], tool_choice=choice)
            response = handler(retry)
            message = self._as_call(self._normalise(response.result[-1]))
        result = ModelResponse(
            result=[*kept, *response.result[:-1], message],
            structured_response=getattr(response, "structured_response", None),
        )
        return self._finish_early(result, message)

    def _as_call(self, message: Any) -> Any:
        """A reply without tool calls whose text is a valid JSON answer, as the final call."""
        if getattr(message, "tool_calls", None):
            return message
        answer = json_answer(str(message.text), self.final_tool)
        if answer is None:
            return message
        call = {"name": self.final_name, "args": answer, "id": _call_id(), "type": "tool_call"}
        return message.model_copy(update={"tool_calls": [call]})

    def _again(
        self, message: Any, history: list[Any], asked: bool
    ) -> tuple[HumanMessage, Any] | None:
        """What a reply that is no final call is answered with before the agent goes on:
        `(words, tool_choice)`, or None (the reply stands: its calls run, or prose ends the
        agent).

        A reply to a forced request (the provider ignored `tool_choice`) is asked once more
        (`asked`: already), in words, for the final call; prose while steps remain is
        nudged (`nudges` times in a run), then, and at the step budget, answered with the
        final tool forced.
        """
        calls = getattr(message, "tool_calls", None) or []
        if any(c["name"] == self.final_name for c in calls):
            return None
        calls_made = self.counter.calls
        if self.counter.tool_choice == self.final_name:  # the provider did not force it
            if asked or calls_made > self.max_steps + GRACE_CALLS:
                return None  # asked once more already (or no call left): the reply stands
            return self._ask(), self.final_name
        if calls:
            return None  # ordinary tool calls: the tool step runs them
        nudged = sum(1 for m in history if _has_prefix(m, NUDGE_PREFIX))
        if calls_made < self.max_steps and nudged < self.nudges:
            nudge = HumanMessage(
                f"Your reply called no tool. Use one of your tools to go on, or call "
                f"{self.final_name} to finish.",
                id=f"{NUDGE_PREFIX}{_call_id()}",
            )
            return nudge, None
        if calls_made <= self.max_steps:
            return self._ask(), self.final_name
        return None

    def _ask(self) -> HumanMessage:
        """The words asking for the final call (sent with the final tool forced), with the
        JSON form a model without working tool calls can give instead."""
        fields = [
            f"{name} (required)" if field.is_required() else name
            for name, field in self.final_tool.model_fields.items()
        ]
        return HumanMessage(
            f"Answer by calling the {self.final_name} tool with the required fields now. "
            f"If you cannot call it, reply with only a JSON object of its arguments: "
            f"{', '.join(fields)}.",
            id=f"{ASK_PREFIX}{_call_id()}",
        )

    def _not_run(self, message: Any) -> list[ToolMessage]:
        """Answers to the calls of a reply that is asked again (every call is answered)."""
        return [
            ToolMessage(
                content=f"Error: not run; this reply had to call {self.final_name}.",
                tool_call_id=c.get("id") or "",
                name=c["name"],
                status="error",
            )
            for c in getattr(message, "tool_calls", None) or []
        ]

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
