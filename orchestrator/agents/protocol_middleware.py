"""tether's agent protocol as `create_agent` middleware, each class one job.

`protocol_middleware()` returns them in the order they wrap a model call (outermost
first), after the agent's own middleware:

1. `FinalAnswerMiddleware` (`orchestrator.agents.final_answer`): accepts, repairs or asks again
   for the final answer (a reply without a tool call is nudged while steps remain, then
   the final tool forced; a forced request the provider did not force is asked again in
   words); answers every assistant tool call;
2. `StopMiddleware`: Ctrl-C (a `stop` event set by the main thread) ends the agent with
   `Stopped` before its next model call;
3. `StepLimitMiddleware`: after `max_steps` model calls the final tool is forced with
   `tool_choice`; one more call (`GRACE_CALLS`: the final answer asked for in words) is
   allowed, a call beyond that is an `AgentLoopError`; likewise once the agent's tokens
   reach its cap (`max_tokens`), after which one more call is `TokenCapReached`;
4. `ContextBudgetMiddleware`: the conversation is cut to the agent's budget before each
   call, and cut to half when the provider answers `context_length_exceeded`;
5. `ProviderRetryMiddleware`: transient provider failures are retried with exponential
   backoff honouring `Retry-After`; the last failure is a `ModelCallError`; a call in
   flight is abandoned once `stop` is set (`abandoned_on_stop`);
6. `UsageMiddleware`: counts calls and tokens (the provider's `usage_metadata`, else an
   estimate) and records the agent's tool calls in its `AgentResult`; with the task's usage
   journal (`orchestrator.artifacts.usage`) it records each call durably as sent before
   the request and as answered after it (each retry is a call of its own);
7. `CleanToolResultsMiddleware`: a tool result's text holds no lone surrogate (a file
   name or output that is not UTF-8), which no provider request could encode;
8. LangChain's `ToolErrorMiddleware`: a failing tool is answered by an error tool message.

Invariant: one set of instances serves one agent run; they share its `UsageMiddleware`
(the call count) and nothing else.
"""

from __future__ import annotations

import contextvars
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from langchain.agents.middleware import AgentMiddleware, ToolErrorMiddleware
from langchain_core.messages import HumanMessage, ToolMessage
from langgraph.errors import GraphBubbleUp
from pydantic import BaseModel

from orchestrator.agents.chat_models import context_window
from orchestrator.agents.final_answer import GRACE_CALLS, FinalAnswerMiddleware
from orchestrator.agents.gauge import UsageRatio
from orchestrator.agents.provider import (
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
    spent_nothing,
    tool_tokens,
    usage_tokens,
)
from orchestrator.config.defaults import DEFAULT_NUDGES
from orchestrator.errors import (
    AgentLoopError,
    ContextOverflowError,
    ModelCallError,
    OrchestratorError,
    ProviderUnreachableError,
    Stopped,
)
from orchestrator.faults import fault

if TYPE_CHECKING:
    from langchain.agents.middleware import (
        ModelCallResult,
        ModelRequest,
        ModelResponse,
        ToolCallRequest,
    )
    from langgraph.types import Command

    from orchestrator.artifacts.usage import CallRecorder as CallJournal

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


MAX_STEPS_HINT = "raise the agent's max_steps in the workflow file"
"""What an agent out of steps tells the user to do (a run whose steps no setting reaches,
such as the answer's, says what applies instead: `run_agent`'s `steps_hint`)."""


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
    capped: bool = False
    """It reached its token cap (`max_tokens`) and was asked to submit what it has."""


class TokenCapReached(AgentLoopError):
    """An agent at its token cap gave no valid final answer when asked: what it did is in
    `result` (its tool calls), its conversation in `messages`."""

    def __init__(self, message: str, result: AgentResult, messages: list[Any]) -> None:
        super().__init__(message)
        self.result = result
        self.messages = messages
        self.tokens = result.tokens


def model_label(model: object) -> str:
    """`model-name at https://endpoint` for messages about a provider."""
    name = getattr(model, "model_name", None) or getattr(model, "model", None) or ""
    where = endpoint(model)
    return f"{name} at {where}" if name else where


def tool_error_text(exc: Exception, request: Any) -> str:
    """What the model is told when one of its tools raised (`ToolErrorMiddleware`)."""
    return f"Error: {type(exc).__name__}: {exc}"


class StopMiddleware(AgentMiddleware):
    """Raises `Stopped` before a model call once `stop` is set (Ctrl-C reaches agents in
    worker threads this way)."""

    def __init__(self, stop: threading.Event | None) -> None:
        super().__init__()
        self.stop = stop

    def wrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]
    ) -> ModelCallResult:
        if self.stop is not None and self.stop.is_set():
            raise Stopped("stopped by Ctrl-C before the next model call")
        return handler(request)


CAP_NUDGE = (
    "You have reached your token cap. Stop working and call {name} now with what you have "
    "found so far (status: partial)."
)


class StepLimitMiddleware(AgentMiddleware):
    """Forces the final tool once `max_steps` calls are made; after the forced call and
    `GRACE_CALLS` more (the answer asked for in words), one more is an error. So too at
    the token cap (`max_tokens`, None: none): one call forced with a nudge, and a call
    after it is `TokenCapReached`.

    LangChain's `ModelCallLimitMiddleware` ends or fails at the limit; tether first asks
    for the answer with `tool_choice`, and counts in the run (no state, no extra step).
    """

    def __init__(
        self,
        final_name: str,
        counter: UsageMiddleware,
        max_steps: int,
        steps_hint: str = MAX_STEPS_HINT,
        max_tokens: int | None = None,
    ) -> None:
        super().__init__()
        self.final_name = final_name
        self.counter = counter
        self.max_steps = max_steps
        self.steps_hint = steps_hint
        self.max_tokens = max_tokens

    def wrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]
    ) -> ModelCallResult:
        calls = self.counter.calls
        if calls > self.max_steps + GRACE_CALLS:
            raise AgentLoopError(
                f"agent did not call {self.final_name!r} validly within "
                f"{self.max_steps} steps; {self.steps_hint}"
            )
        if calls >= self.max_steps:
            request = request.override(tool_choice=self.final_name)
        result = self.counter.result
        if self.max_tokens is not None and result.tokens >= self.max_tokens:
            if result.capped:  # asked once already, and no answer was accepted
                messages = list((request.state or {}).get("messages") or request.messages)
                raise TokenCapReached(
                    f"agent reached its token cap ({result.tokens:,} of {self.max_tokens:,} "
                    f"tokens) and did not call {self.final_name!r} validly when asked",
                    result,
                    messages,
                )
            result.capped = True
            nudge = HumanMessage(CAP_NUDGE.format(name=self.final_name))
            request = request.override(
                messages=[*request.messages, nudge], tool_choice=self.final_name
            )
        return handler(request)


class ContextBudgetMiddleware(AgentMiddleware):
    """Cuts each request to the agent's context budget (`provider.fit_context`: the head
    stays, the oldest tool exchanges go first), and to half again when the provider
    refuses it as too long.

    Args:
        max_context_tokens: the budget, in estimated tokens.
        usage: the run's reported/estimated token ratio, which turns the estimate into the
            provider's tokens; the budget never exceeds `WINDOW_SHARE` of the model's
            window (tool schemas take the rest).
    """

    def __init__(self, max_context_tokens: int, usage: UsageRatio) -> None:
        super().__init__()
        self.max_context_tokens = max_context_tokens
        self.usage = usage

    def wrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]
    ) -> ModelCallResult:
        limit = self.max_context_tokens
        window = context_window(request.model)
        if window:
            tools = self.usage.tokens(tool_tokens(request.tools or ()))
            limit = min(limit, int(window * WINDOW_SHARE) - tools)
        budget = max(MIN_CONTEXT, int(limit / self.usage.value))
        request = request.override(messages=fit_context(list(request.messages), budget))
        shrinks = 0
        while True:
            try:
                return handler(request)
            except Exception as exc:
                if not is_context_overflow(exc):
                    raise
                request = self._shrunk(request, exc, shrinks)
                shrinks += 1

    @staticmethod
    def _shrunk(request: Any, exc: Exception, shrinks: int) -> Any:
        """The request cut to half after the provider refused it as too long.

        Raises:
            ContextOverflowError: it was cut `MAX_SHRINKS` times, or cannot be cut further
                (the head and the newest exchange alone are too long).
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


class _Watch:
    """Calls `notify` every `every` seconds while a model call is in flight."""

    def __init__(self, notify: Callable[[str], None] | None, label: str, every: float) -> None:
        self.notify, self.label, self.every = notify, label, every
        self.done = threading.Event()

    def __enter__(self) -> _Watch:
        if self.notify is not None:
            threading.Thread(target=self._run, daemon=True, name="tether-watch").start()
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


STOP_POLL = 0.2
"""Seconds between two looks at `stop` while a model call is in flight."""
STOP_GRACE = 2.0
"""Seconds a call in flight may still take once `stop` is set before it is abandoned (a
call that comes back is kept: a resume does not send it again)."""


def abandoned_on_stop(
    handler: Callable[[Any], Any], request: Any, stop: threading.Event | None
) -> Any:
    """`handler(request)`, given up once `stop` is set (Ctrl-C, SIGTERM): the call runs in
    a daemon thread (with the caller's context variables), and the caller waits for it or
    for `stop` and `STOP_GRACE` seconds more, so a provider that sits on a request for
    minutes cannot hold a stop back.
    An abandoned call finishes on its own (its usage is recorded if it does) or dies with
    the process; the usage journal counts it as sent either way.

    Raises:
        Stopped: `stop` was set before the call came back.
    """
    if stop is None:
        return handler(request)
    done = threading.Event()
    outcome: dict[str, Any] = {}
    context = contextvars.copy_context()

    def call() -> None:
        try:
            outcome["value"] = context.run(handler, request)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller as it is
            outcome["error"] = exc
        finally:
            done.set()

    threading.Thread(target=call, daemon=True, name="tether-model-call").start()
    while not done.wait(STOP_POLL):
        if stop.is_set() and not done.wait(STOP_GRACE):
            raise Stopped("stopped by Ctrl-C during a model call (the request was abandoned)")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


class ProviderRetryMiddleware(AgentMiddleware):
    """Retries a failed model call with exponential backoff (at least `Retry-After`),
    saying so through `notify`, and turns the last failure into `ModelCallError`
    (`ProviderUnreachableError` when the provider could not be reached at all).

    LangChain's `ModelRetryMiddleware` waits a fixed schedule with `time.sleep`: it cannot
    honour `Retry-After`, be cut short by Ctrl-C (`stop`), or report each retry.
    tether's own errors, LangGraph's control flow and a context overflow (the concern of
    `ContextBudgetMiddleware`) pass through untouched.
    """

    def __init__(
        self,
        *,
        retries: int = DEFAULT_RETRIES,
        initial_delay: float = DEFAULT_INITIAL_DELAY,
        sleep: Callable[[float], None] = time.sleep,
        stop: threading.Event | None = None,
        notify: Callable[[str], None] | None = None,
        watch_every: float = WATCH_EVERY,
    ) -> None:
        super().__init__()
        self.retries = retries
        self.initial_delay = initial_delay
        self.sleep = sleep
        self.stop = stop
        self.notify = notify
        """Receives a line for each retry and while a call waits (none: silent)."""
        self.watch_every = watch_every

    def wrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]
    ) -> ModelCallResult:
        attempt = 0
        label = model_label(request.model)
        while True:
            try:
                with _Watch(self.notify, label, self.watch_every):
                    return abandoned_on_stop(handler, request, self.stop)
            except (OrchestratorError, GraphBubbleUp):
                raise
            except Exception as exc:
                if is_context_overflow(exc):
                    raise
                if not is_retryable(exc) or attempt >= self.retries:
                    failure = self._failure(exc, label, attempt + 1)
                    # the conversation so far (its tool calls done): a retry continues it
                    failure.messages = list((request.state or {}).get("messages") or [])
                    raise failure from exc
                self._wait(exc, label, attempt)
                attempt += 1

    def _wait(self, exc: Exception, label: str, attempt: int) -> None:
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
            raise Stopped("stopped by Ctrl-C before the next model call")

    @staticmethod
    def _failure(exc: Exception, label: str, attempts: int) -> ModelCallError:
        if is_unreachable(exc):
            return ProviderUnreachableError(
                f"the provider could not be reached: {label} ({reason(exc)}) "
                f"after {attempts} attempt(s); check the endpoint and the "
                "network, then resume the task"
            )
        return ModelCallError(f"model call failed after {attempts} attempt(s): {describe(exc)}")


class UsageMiddleware(AgentMiddleware):
    """The run's record (`result`): each answered model call with its tokens (reported
    usage, else an estimate, marked), and each ordinary tool call.

    Args:
        on_step: called with `(tokens_so_far, context_tokens, tool)` after each call (`tool`:
            the first tool the reply calls, or None), so the tokens of an agent that fails
            later still count.
        usage: the run's reported/estimated token ratio, updated by each reported call.
    """

    def __init__(
        self,
        on_step: Callable[[int, int, str | None], None] | None = None,
        usage: UsageRatio | None = None,
        journal: CallJournal | None = None,
    ) -> None:
        super().__init__()
        self.on_step = on_step
        self.usage = usage if usage is not None else UsageRatio()
        self.journal = journal
        self.calls = 0
        self.tool_choice: Any = None
        """The `tool_choice` the last answered call was sent with."""
        self.result = AgentResult(final=None)  # type: ignore[arg-type]

    def wrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]
    ) -> ModelCallResult:
        if self.journal is None:
            response = handler(request)
            self.tool_choice = request.tool_choice
            self._account(request, response.result[-1])
            return response
        # durable before the request leaves: a call cut by a stop or a kill still counts
        ident = self.journal.sent(self.usage.tokens(request_tokens(request)))
        try:
            response = handler(request)
        except Exception as exc:
            if spent_nothing(exc):
                self.journal.failed(ident)
            raise
        self.tool_choice = request.tool_choice
        context, tokens, estimated = self._account(request, response.result[-1])
        self.journal.answered(ident, context, tokens, estimated)
        fault("agent_after_call")
        return response

    def _account(self, request: Any, reply: Any) -> tuple[int, int, bool]:
        """Count one answered call; returns its prompt and total tokens, and whether
        they are estimated."""
        self.calls += 1
        self.result.calls += 1
        usage = getattr(reply, "usage_metadata", None) or {}
        context = int(usage.get("input_tokens") or 0)
        estimated = not context
        if estimated:
            context = approx_tokens(request.messages)
            self.result.estimated = True
        else:
            self.usage.observe(request_tokens(request), context)
        self.result.input_tokens += context
        self.result.context_tokens.append(context)
        tokens = usage_tokens(reply, context)
        self.result.tokens += tokens
        if self.on_step:
            calls = getattr(reply, "tool_calls", None) or [{}]
            self.on_step(self.result.tokens, context, calls[0].get("name"))
        return context, tokens, estimated or not (usage.get("total_tokens"))

    def wrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], ToolMessage | Command]
    ) -> ToolMessage | Command:
        call = request.tool_call
        self.result.tool_calls.append({"name": call["name"], "args": call.get("args") or {}})
        return handler(request)


_SURROGATES = re.compile("[\ud800-\udfff]")


def clean_text(text: str) -> str:
    """`text` with each lone surrogate replaced by U+FFFD (a JSON request, a log line and
    a provider can all encode it)."""
    return _SURROGATES.sub("\ufffd", text) if _SURROGATES.search(text) else text


class CleanToolResultsMiddleware(AgentMiddleware):
    """A tool's answer is cleaned where it comes back (`clean_text`): otherwise every later
    model call of the agent fails to encode its request, which reads as a provider failure
    and fails the agent on every resume."""

    def wrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], ToolMessage | Command]
    ) -> ToolMessage | Command:
        result = handler(request)
        if isinstance(result, ToolMessage):
            if isinstance(result.content, str):
                result.content = clean_text(result.content)
            elif isinstance(result.content, list):
                result.content = [
                    clean_text(p) if isinstance(p, str) else _clean_part(p) for p in result.content
                ]
        return result


def _clean_part(part: object) -> Any:
    if isinstance(part, dict) and isinstance(part.get("text"), str):
        return {**part, "text": clean_text(part["text"])}
    return part


@dataclass
class Protocol:
    """One agent run's protocol middleware (`middleware`, in order) and the two that keep
    what the run produced."""

    final: FinalAnswerMiddleware
    usage: UsageMiddleware
    middleware: tuple[AgentMiddleware, ...]


def protocol_middleware(
    final_tool: type[BaseModel],
    *,
    max_steps: int,
    max_context_tokens: int,
    on_step: Callable[[int, int, str | None], None] | None = None,
    retries: int = DEFAULT_RETRIES,
    initial_delay: float = DEFAULT_INITIAL_DELAY,
    sleep: Callable[[float], None] = time.sleep,
    stop: threading.Event | None = None,
    usage: UsageRatio | None = None,
    jump: bool = True,
    notify: Callable[[str], None] | None = None,
    watch_every: float = WATCH_EVERY,
    steps_hint: str = MAX_STEPS_HINT,
    nudges: int = DEFAULT_NUDGES,
    journal: CallJournal | None = None,
    max_tokens: int | None = None,
) -> Protocol:
    """The protocol middleware of one agent run (see the module docstring for the order;
    the arguments are those of `orchestrator.agents.loop.run_agent`)."""
    ratio = usage if usage is not None else UsageRatio()
    counter = UsageMiddleware(on_step, ratio, journal)
    final = FinalAnswerMiddleware(
        final_tool, counter, max_steps=max_steps, jump=jump, nudges=nudges
    )
    retry = ProviderRetryMiddleware(
        retries=retries, initial_delay=initial_delay, sleep=sleep, stop=stop, notify=notify,
        watch_every=watch_every,
    )  # fmt: skip
    middleware = (
        final,
        StopMiddleware(stop),
        StepLimitMiddleware(final_tool.__name__, counter, max_steps, steps_hint, max_tokens),
        ContextBudgetMiddleware(max_context_tokens, ratio),
        retry,
        counter,
        CleanToolResultsMiddleware(),
        ToolErrorMiddleware(tool_error_text),
    )
    return Protocol(final=final, usage=counter, middleware=middleware)
