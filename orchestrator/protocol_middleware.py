"""`ProtocolMiddleware`: tether's agent protocol on top of LangChain's `create_agent`.

What it adds to the stock middleware is listed in `orchestrator.agent_loop`, which builds
the agents; this module holds the middleware, the final-answer parsing and `AgentResult`.
"""

from __future__ import annotations

import functools
import json
import re
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from langchain.agents.middleware import AgentMiddleware, ModelResponse
from langchain.agents.middleware.types import ExtendedModelResponse
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import StructuredTool
from langgraph.types import Command
from pydantic import BaseModel, ValidationError

from orchestrator.errors import (
    AgentLoopError,
    ContextOverflowError,
    ModelCallError,
    ProviderUnreachableError,
    Stopped,
)
from orchestrator.gauge import UsageRatio
from orchestrator.models import context_window
from orchestrator.provider import (
    approx_tokens,
    describe,
    endpoint,
    fit_context,
    is_context_overflow,
    is_retryable,
    is_unreachable,
    reason,
    request_tokens,
    retry_after,
    tool_tokens,
    usage_tokens,
)

INVALID_ARGS_KEY = "__tether_invalid_arguments__"
DEFAULT_RETRIES = 4
DEFAULT_INITIAL_DELAY = 1.0
ENV_RETRY_DELAY = "TETHER_RETRY_DELAY"
"""Seconds before the first retry (doubling each time); default 1."""
MAX_DELAY = 60.0
MAX_SHRINKS = 4
"""Times a request the provider refused as too long is cut (to half, each time) and sent
again, down to the head and the newest exchange."""
MIN_CONTEXT = 1000
WINDOW_SHARE = 0.8
"""Share of the model's context window (its LangChain profile) an agent's request may fill."""
WATCH_EVERY = 30.0
"""Seconds between the "still waiting" lines of a model call in flight."""


def model_label(model: Any) -> str:
    """`model-name at https://endpoint` for messages about a provider."""
    name = getattr(model, "model_name", None) or getattr(model, "model", None) or ""
    where = endpoint(model)
    return f"{name} at {where}" if name else where


class _Watch:
    """Calls `notify` every `every` seconds while a model call is in flight."""

    def __init__(self, notify: Callable[[str], None] | None, label: str, every: float) -> None:
        self.notify, self.label, self.every = notify, label, every
        self.done = threading.Event()
        self.thread: threading.Thread | None = None

    def __enter__(self) -> _Watch:
        if self.notify is not None:
            self.thread = threading.Thread(target=self._run, daemon=True, name="tether-watch")
            self.thread.start()
        return self

    def _run(self) -> None:
        start = time.monotonic()
        while not self.done.wait(self.every):
            waited = time.monotonic() - start
            try:
                self.notify(f"still waiting for {self.label}: {waited:.0f} s")  # type: ignore[misc]
            except Exception:  # noqa: BLE001 - a broken view must not break the call
                return

    def __exit__(self, *exc: object) -> None:
        self.done.set()


@dataclass
class AgentResult:
    """What one agent run produced."""

    final: BaseModel
    tokens: int = 0
    """Tokens used by all calls (reported usage when present, else estimated)."""
    context_tokens: list[int] = field(default_factory=list)
    """Input tokens of each call (as the provider reported them, else estimated)."""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    """`{name, args}` of every ordinary tool call, in order."""
    transcript: list[Any] = field(default_factory=list)
    estimated: bool = False
    """True when some call reported no usage and its tokens were estimated."""
    calls: int = 0
    """Model calls made (retries not counted; a repeated call after a refusal is)."""
    input_tokens: int = 0
    """Prompt tokens of all calls (reported usage when present, else estimated)."""


# -- final answers --------------------------------------------------------------------------

_FENCE = re.compile(r"```(?:json)?\s*(\{.*\})\s*```", re.DOTALL)


def json_answer(text: str, final_tool: type[BaseModel]) -> dict[str, Any] | None:
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
def _final_tool_object(final_tool: type[BaseModel]) -> StructuredTool:
    """The final tool as a tool object; one per protocol model (tools are stateless, and
    a model converts a tool it has seen before for free)."""
    return StructuredTool.from_function(
        func=lambda **_: "accepted",
        name=final_tool.__name__,
        description=(final_tool.__doc__ or final_tool.__name__).strip(),
        args_schema=final_tool,
    )


def _validation_text(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors()[:5]:
        where = ".".join(str(p) for p in err.get("loc", ())) or "(root)"
        parts.append(f"{where}: {err.get('msg')}")
    return "; ".join(parts)


class ProtocolMiddleware(AgentMiddleware):
    """tether's protocol on top of `create_agent` (see the module docstring).

    One instance serves one agent run: it counts the run's calls and keeps its result.
    """

    def __init__(
        self,
        final_tool: type[BaseModel],
        *,
        max_steps: int,
        max_context_tokens: int,
        on_step: Callable[[int, int], None] | None,
        retries: int = DEFAULT_RETRIES,
        initial_delay: float = DEFAULT_INITIAL_DELAY,
        sleep: Callable[[float], None] = time.sleep,
        stop: threading.Event | None = None,
        usage: UsageRatio | None = None,
        jump: bool = True,
        notify: Callable[[str], None] | None = None,
        watch_every: float = WATCH_EVERY,
    ) -> None:
        super().__init__()
        self.notify = notify
        """Receives a line for each retry and while a call waits (none: silent)."""
        self.watch_every = watch_every
        self.jump = jump
        """End the agent with a `jump_to: end` (one super-step). An agent with `after_model`
        middleware (e.g. `HumanInTheLoopMiddleware`) routes after that middleware, where
        the jump is not seen; it ends with a closing empty assistant message instead."""
        self.stop = stop
        self.usage = usage if usage is not None else UsageRatio()
        self.final_tool = final_tool
        self.final_name = final_tool.__name__
        self.max_steps = max_steps
        self.max_context_tokens = max_context_tokens
        self.on_step = on_step
        self.retries = retries
        self.initial_delay = initial_delay
        self.sleep = sleep
        self.calls = 0
        self.final: BaseModel | None = None
        self.result = AgentResult(final=None)  # type: ignore[arg-type]

    # -- model calls --------------------------------------------------------------------
    def wrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        # Checked here rather than in a `before_model` hook, which would be a super-step of
        # its own (a durable checkpoint) before every model call.
        if self.final is not None:  # accepted by the tool step: end without a model call
            return self._end(ModelResponse(result=[]))
        self._check_stop()
        if self.calls > self.max_steps:
            raise AgentLoopError(
                f"agent did not call {self.final_name!r} validly within "
                f"{self.max_steps} steps; raise the agent's max_steps in the workflow file"
            )
        # the budget holds in the provider's tokens (scale the estimate by what it reports)
        # and never exceeds the model's window (tool schemas take the rest)
        limit = self.max_context_tokens
        window = context_window(request.model)
        if window:
            tools = self.usage.tokens(tool_tokens(request.tools or ()))
            limit = min(limit, int(window * WINDOW_SHARE) - tools)
        budget = max(MIN_CONTEXT, int(limit / self.usage.value))
        window = fit_context(list(request.messages), budget)
        if self.calls >= self.max_steps:
            request = request.override(tool_choice=self.final_name)
        response = self._call(request.override(messages=window), handler)
        message = self._normalise(response.result[-1])
        if not message.tool_calls and self.final is None:
            answer = json_answer(str(message.text), self.final_tool)
            if answer is not None:
                call = {
                    "name": self.final_name,
                    "args": answer,
                    "id": _call_id(),
                    "type": "tool_call",
                }
                message = message.model_copy(update={"tool_calls": [call]})
            elif self.calls <= self.max_steps:
                # prose: ask once more, with the final tool forced
                nudge = HumanMessage(
                    f"Answer by calling the {self.final_name} tool with the required fields now."
                )
                forced = request.override(
                    messages=[*window, message, nudge], tool_choice=self.final_name
                )
                message = self._normalise(self._call(forced, handler).result[-1])
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

    def _call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        """One model call with retries, overflow handling and token accounting."""
        attempt, shrinks = 0, 0
        label = model_label(request.model)
        while True:
            try:
                with _Watch(self.notify, label, self.watch_every):
                    response = handler(request)
                break
            except Exception as exc:
                if is_context_overflow(exc):
                    request = self._shrunk(request, exc, shrinks)
                    shrinks += 1
                    continue
                if not is_retryable(exc) or attempt >= self.retries:
                    if is_unreachable(exc):
                        raise ProviderUnreachableError(
                            f"the provider could not be reached: {label} ({reason(exc)}) "
                            f"after {attempt + 1} attempt(s); check the endpoint and the "
                            "network, then resume the task"
                        ) from exc
                    raise ModelCallError(
                        f"model call failed after {attempt + 1} attempt(s): {describe(exc)}"
                    ) from exc
                delay = min(MAX_DELAY, self.initial_delay * (2**attempt))
                delay = max(delay, min(MAX_DELAY, retry_after(exc) or 0.0))
                if self.notify is not None:
                    self.notify(
                        f"model call to {label} failed ({reason(exc)}); retrying in "
                        f"{delay:.3g} s (retry {attempt + 1} of {self.retries})"
                    )
                if self.stop is None:
                    self.sleep(delay)
                elif self.stop.wait(delay):  # Ctrl-C during the back-off ends it
                    self._check_stop()
                attempt += 1
        self._account(request, response.result[-1])
        return response

    def _shrunk(self, request: Any, exc: Exception, shrinks: int) -> Any:
        """The request cut to half after the provider refused it as too long.

        Raises:
            ModelCallError: it was cut `MAX_SHRINKS` times, or cannot be cut further (the
                head and the newest exchange alone are too long).
        """
        before = approx_tokens(request.messages)
        half = max(MIN_CONTEXT, before // 2)
        cut = fit_context(request.messages, half)
        if shrinks >= MAX_SHRINKS or approx_tokens(cut) >= before:
            raise ContextOverflowError(
                f"the request does not fit the model's context window even cut to "
                f"~{approx_tokens(cut)} estimated tokens ({describe(exc)}); lower "
                "thresholds.tool_result_tokens or the subagent_context_tokens budget"
            ) from exc
        return request.override(messages=cut)

    def _check_stop(self) -> None:
        if self.stop is not None and self.stop.is_set():
            raise Stopped("stopped by Ctrl-C before the next model call")

    def _account(self, request: Any, reply: Any) -> None:
        self.calls += 1
        self.result.calls += 1
        usage = getattr(reply, "usage_metadata", None) or {}
        context = int(usage.get("input_tokens") or 0)
        if not context:
            context = approx_tokens(request.messages)
            self.result.estimated = True
        else:
            self.usage.observe(request_tokens(request), context)
        self.result.input_tokens += context
        self.result.context_tokens.append(context)
        self.result.tokens += usage_tokens(reply, context)
        if self.on_step:
            self.on_step(self.result.tokens, context)

    def _normalise(self, message: Any) -> Any:
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

    # -- tool calls ---------------------------------------------------------------------
    def wrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
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
        self.result.tool_calls.append({"name": name, "args": args})
        try:
            return handler(request)
        except Exception as exc:  # a failing tool is information for the model
            return ToolMessage(
                content=f"Error: {type(exc).__name__}: {exc}",
                tool_call_id=call_id,
                name=name,
                status="error",
            )

    def _accept(self, name: str, args: dict[str, Any], call_id: str) -> Any:
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

    def _end(self, response: Any) -> Any:
        """`response`, then the agent's end (no tool step, no further model call)."""
        if not self.jump:  # a reply without tool calls ends the agent loop wherever it routes
            closing = AIMessage(content="", id=f"end-{_call_id()}")
            return ModelResponse(
                result=[*response.result, closing],
                structured_response=response.structured_response,
            )
        return ExtendedModelResponse(
            model_response=response, command=Command(update={"jump_to": "end"})
        )


def _call_id() -> str:
    return "call_" + uuid.uuid4().hex[:20]
