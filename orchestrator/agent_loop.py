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
"""

from __future__ import annotations

import functools
import json
import os
import re
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, ModelResponse
from langchain.agents.middleware.types import ExtendedModelResponse
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.tools import StructuredTool
from langgraph.errors import GraphBubbleUp
from langgraph.types import Command
from pydantic import BaseModel, ValidationError

from orchestrator.errors import (
    AgentLoopError,
    ModelCallError,
    Stopped,
)

TRUNCATION_NOTE = "\n[... truncated to fit the context window; use a narrower query ...]"
INVALID_ARGS_KEY = "__tether_invalid_arguments__"
#: HTTP statuses that say the request itself is wrong: retrying cannot help.
NO_RETRY_STATUS = frozenset({400, 401, 403, 404, 405, 409, 413, 422})
DEFAULT_RETRIES = 4
DEFAULT_INITIAL_DELAY = 1.0
ENV_RETRY_DELAY = "TETHER_RETRY_DELAY"
"""Seconds before the first retry (doubling each time); default 1."""
MAX_DELAY = 60.0


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


def approx_tokens(messages: Sequence[Any]) -> int:
    """LangChain's estimate of the tokens of `messages`."""
    return int(count_tokens_approximately(list(messages)))


def usage_tokens(message: Any, fallback_context: int) -> int:
    """Tokens of one call: the model's `usage_metadata` when present, else an estimate."""
    usage = getattr(message, "usage_metadata", None)
    if usage and usage.get("total_tokens"):
        return int(usage["total_tokens"])
    return fallback_context + approx_tokens([message])


def _truncate(message: Any, max_tokens: int) -> Any:
    text = message.content if isinstance(message.content, str) else str(message.content)
    keep = max(200, max_tokens * 4)
    if len(text) <= keep:
        return message
    return message.model_copy(update={"content": text[:keep] + TRUNCATION_NOTE})


def fit_context(messages: list[Any], max_tokens: int) -> list[Any]:
    """Cut `messages` to about `max_tokens`: keep the head (system + first user message)
    and the newest exchanges, dropping whole tool exchanges from the oldest end."""
    head = messages[:2]
    body = [
        _truncate(m, max_tokens // 3) if isinstance(m, ToolMessage) else m for m in messages[2:]
    ]
    while body and approx_tokens(head + body) > max_tokens:
        # drop the oldest AI message together with the tool results that answer it
        drop = 1
        if isinstance(body[0], AIMessage):
            while drop < len(body) and isinstance(body[drop], ToolMessage):
                drop += 1
        if drop >= len(body):
            break  # keep at least the newest exchange
        body = body[drop:]
    while body and isinstance(body[0], ToolMessage):
        body = body[1:]  # a tool result whose call was cut would be rejected
    return head + body


# -- provider faults ------------------------------------------------------------------------


def _status(exc: BaseException) -> int | None:
    status = getattr(exc, "status_code", None)
    if status is None:
        status = getattr(getattr(exc, "response", None), "status_code", None)
    return status if isinstance(status, int) else None


def is_context_overflow(exc: BaseException) -> bool:
    """A provider's "prompt too long" error (`context_length_exceeded` and the like)."""
    text = f"{getattr(exc, 'code', '')} {exc}".lower()
    return _status(exc) in (400, 413) and (
        "context_length" in text or "maximum context" in text or "too many tokens" in text
    )


def is_retryable(exc: BaseException) -> bool:
    """Retry everything except request errors (4xx other than 408/429) and interrupts."""
    if not isinstance(exc, Exception) or isinstance(exc, AgentLoopError):
        return False
    if isinstance(exc, GraphBubbleUp):  # LangGraph's own control flow, e.g. an interrupt
        return False
    return _status(exc) not in NO_RETRY_STATUS


def retry_after(exc: BaseException) -> float | None:
    """Seconds from a `Retry-After` (or `retry-after-ms`) header of the failed response."""
    headers = getattr(getattr(exc, "response", None), "headers", None) or {}
    try:
        if headers.get("retry-after-ms"):
            return float(headers["retry-after-ms"]) / 1000
        if headers.get("retry-after"):
            return float(headers["retry-after"])
    except (TypeError, ValueError):
        return None
    return None


def describe(exc: BaseException) -> str:
    """One line naming a model failure: type, HTTP status when there is one, message."""
    status = _status(exc)
    text = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
    return f"{type(exc).__name__}{f' (HTTP {status})' if status else ''}: {text}"


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
    ) -> None:
        super().__init__()
        self.stop = stop
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
            return _end(ModelResponse(result=[]))
        self._check_stop()
        if self.calls > self.max_steps:
            raise AgentLoopError(
                f"agent did not call {self.final_name!r} validly within "
                f"{self.max_steps} steps; raise the agent's max_steps in the workflow file"
            )
        window = fit_context(list(request.messages), self.max_context_tokens)
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
        return _end(
            ModelResponse(
                result=[*result.result, answer], structured_response=result.structured_response
            )
        )

    def _call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        """One model call with retries, overflow handling and token accounting."""
        attempt, shrunk = 0, False
        while True:
            try:
                response = handler(request)
                break
            except Exception as exc:
                if is_context_overflow(exc) and not shrunk:
                    shrunk = True
                    half = max(1000, approx_tokens(request.messages) // 2)
                    request = request.override(messages=fit_context(request.messages, half))
                    continue
                if not is_retryable(exc) or attempt >= self.retries:
                    raise ModelCallError(
                        f"model call failed after {attempt + 1} attempt(s): {describe(exc)}"
                    ) from exc
                delay = min(MAX_DELAY, self.initial_delay * (2**attempt))
                delay = max(delay, min(MAX_DELAY, retry_after(exc) or 0.0))
                if self.stop is None:
                    self.sleep(delay)
                elif self.stop.wait(delay):  # Ctrl-C during the back-off ends it
                    self._check_stop()
                attempt += 1
        self._account(request.messages, response.result[-1])
        return response

    def _check_stop(self) -> None:
        if self.stop is not None and self.stop.is_set():
            raise Stopped("stopped by Ctrl-C before the next model call")

    def _account(self, sent: list[Any], reply: Any) -> None:
        self.calls += 1
        usage = getattr(reply, "usage_metadata", None) or {}
        context = int(usage.get("input_tokens") or 0)
        if not context:
            context = approx_tokens(sent)
            self.result.estimated = True
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


# -- one compiled agent per (model, tools, final tool) --------------------------------------
_CURRENT: ContextVar[ProtocolMiddleware] = ContextVar("tether_protocol")
"""The protocol state of the agent run in progress (LangGraph copies context variables
into the threads it runs nodes and tools in)."""


def _end(response: Any) -> Any:
    """`response`, then the agent's end (no tool step, no further model call)."""
    return ExtendedModelResponse(
        model_response=response, command=Command(update={"jump_to": "end"})
    )


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


def _call_id() -> str:
    return "call_" + uuid.uuid4().hex[:20]


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
