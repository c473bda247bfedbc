"""What a provider's replies and failures mean to an agent loop.

* token counts: `approx_tokens` (LangChain's estimate), `usage_tokens` (the reported usage
  of one call, else an estimate);
* `fit_context`: a conversation cut to a token budget without breaking a tool exchange;
* failures: `is_context_overflow` (`context_length_exceeded` and the like),
  `is_retryable` (everything but request errors), `retry_after` (the `Retry-After`
  header), `describe` (one line naming the failure).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.messages.utils import count_tokens_approximately
from langgraph.errors import GraphBubbleUp

from memory.backends.urls import redact, redact_text
from orchestrator.errors import AgentLoopError

if TYPE_CHECKING:
    from langchain.agents.middleware import ModelRequest
    from langchain_core.messages import BaseMessage

TRUNCATION_NOTE = "\n[... truncated to fit the context window; use a narrower query ...]"
#: HTTP statuses that say the request itself is wrong: retrying cannot help.
NO_RETRY_STATUS = frozenset({400, 401, 403, 404, 405, 409, 413, 422})


def approx_tokens(messages: Sequence[BaseMessage]) -> int:
    """LangChain's estimate of the tokens of `messages`."""
    return int(count_tokens_approximately(list(messages)))


_TOOL_TOKENS: dict[int, tuple[Any, int]] = {}


def tool_tokens(tools: Sequence[Any]) -> int:
    """Estimated tokens of the tool schemas sent with a request (each tool counted once
    per process: converting a schema is costly, and a tool's schema does not change)."""
    total = 0
    for tool in tools or ():
        hit = _TOOL_TOKENS.get(id(tool))
        if hit is None or hit[0] is not tool:
            try:
                n = count_tokens_approximately([], tools=[tool])
            except Exception:  # a tool LangChain cannot describe: it cannot be sent either
                n = 0
            if len(_TOOL_TOKENS) > 4096:
                _TOOL_TOKENS.clear()
            hit = _TOOL_TOKENS[id(tool)] = (tool, int(n))
        total += hit[1]
    return total


def request_tokens(request: ModelRequest) -> int:
    """Estimated tokens of a model request: system message, messages and tool schemas
    (what a provider counts as input)."""
    system = getattr(request, "system_message", None)
    messages = [system, *request.messages] if system is not None else list(request.messages)
    return approx_tokens(messages) + tool_tokens(getattr(request, "tools", None) or ())


def usage_tokens(message: BaseMessage, fallback_context: int) -> int:
    """Tokens of one call: the model's `usage_metadata` when present, else an estimate."""
    usage = getattr(message, "usage_metadata", None)
    if usage and usage.get("total_tokens"):
        return int(usage["total_tokens"])
    return fallback_context + approx_tokens([message])


def _truncate(message: object, max_tokens: int) -> Any:
    text = message.content if isinstance(message.content, str) else str(message.content)
    keep = max(200, max_tokens * 4)
    if len(text) <= keep:
        return message
    return message.model_copy(update={"content": text[:keep] + TRUNCATION_NOTE})


def fit_context(messages: list[BaseMessage], max_tokens: int) -> list[BaseMessage]:
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


#: Exception types that mean the provider was not reached (no connection, or no answer in
#: time), by module. Looked up among the modules already imported: an exception of a module
#: that was never imported cannot have been raised.
_UNREACHABLE: dict[str, tuple[str, ...]] = {
    "builtins": ("ConnectionError", "TimeoutError"),
    "openai": ("APIConnectionError",),  # APITimeoutError is one
    "anthropic": ("APIConnectionError",),
    "groq": ("APIConnectionError",),
    "httpx": ("ConnectError", "TimeoutException"),
    "httpcore": ("ConnectError", "TimeoutException"),
    "requests.exceptions": ("ConnectionError", "Timeout"),
    "urllib3.exceptions": ("NewConnectionError", "TimeoutError"),
}
#: The ones among them that mean "no answer in time".
_TIMEOUTS: dict[str, tuple[str, ...]] = {
    "builtins": ("TimeoutError",),
    "openai": ("APITimeoutError",),
    "anthropic": ("APITimeoutError",),
    "groq": ("APITimeoutError",),
    "httpx": ("TimeoutException",),
    "httpcore": ("TimeoutException",),
    "requests.exceptions": ("Timeout",),
    "urllib3.exceptions": ("TimeoutError",),
}


def _loaded(names: dict[str, tuple[str, ...]]) -> tuple[type[BaseException], ...]:
    """The exception classes `names` lists, from the modules imported so far."""
    found: list[type[BaseException]] = []
    for module, attrs in names.items():
        loaded = sys.modules.get(module)
        for attr in attrs:
            cls = getattr(loaded, attr, None)
            if isinstance(cls, type) and issubclass(cls, BaseException):
                found.append(cls)
    return tuple(found)


def is_unreachable(exc: BaseException) -> bool:
    """The provider could not be reached at all: no connection (refused, DNS, reset) or
    no answer before the timeout, as opposed to an answer that says what went wrong."""
    if isinstance(exc, _loaded(_UNREACHABLE)):
        return _status(exc) is None
    cause = exc.__cause__ or exc.__context__
    return cause is not None and cause is not exc and is_unreachable(cause)


def spent_nothing(exc: BaseException) -> bool:
    """Whether a failed call cost nothing: the provider answered with an error (an HTTP
    status), or was never reached (no connection). A timeout may have been worked on."""
    if _status(exc) is not None:
        return True
    return is_unreachable(exc) and not _is_timeout(exc)


def _is_timeout(exc: BaseException) -> bool:
    timeouts = _loaded(_TIMEOUTS)
    chain, seen = exc, set()
    while chain is not None and id(chain) not in seen:
        seen.add(id(chain))
        if isinstance(chain, timeouts):
            return True
        chain = chain.__cause__ or chain.__context__
    return False


def reason(exc: BaseException) -> str:
    """What went wrong, in a few words ("connection refused", "timed out", "HTTP 503")."""
    status = _status(exc)
    if status:
        return f"HTTP {status}"
    timeouts = _loaded(_TIMEOUTS)
    chain, seen = exc, set()
    while chain is not None and id(chain) not in seen:
        seen.add(id(chain))
        text = str(chain).lower()
        for words in ("connection refused", "timed out", "name or service not known",
                      "connection reset", "no route to host"):  # fmt: skip
            if words in text:
                return words
        if isinstance(chain, timeouts):
            return "timed out"
        chain = chain.__cause__ or chain.__context__
    return type(exc).__name__


def endpoint(model: object) -> str:
    """Where a chat model sends its requests (its base URL, without credentials:
    `memory.backends.urls.redact`), or its provider's name."""
    for attr in ("openai_api_base", "base_url", "anthropic_api_url", "api_base", "endpoint"):
        value = getattr(model, attr, None)
        if isinstance(value, str) and value:
            return redact(value)
    client = getattr(model, "root_client", None) or getattr(model, "_client", None)
    url = getattr(client, "base_url", None)  # an SDK client (e.g. from OPENAI_BASE_URL)
    if url:
        return redact(str(url).rstrip("/"))
    name = type(model).__name__
    if name in ("ChatOpenAI", "AzureChatOpenAI"):
        return "https://api.openai.com/v1"
    return name


def describe(exc: BaseException) -> str:
    """One line naming a model failure: type, HTTP status when there is one, message."""
    status = _status(exc)
    text = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
    return f"{type(exc).__name__}{f' (HTTP {status})' if status else ''}: {redact_text(text)}"
