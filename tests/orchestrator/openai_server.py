"""A scripted OpenAI-compatible chat server (standard library only) for real-client tests.

`ScriptedOpenAI` serves `POST /v1/chat/completions` on 127.0.0.1 and is as strict as the
real API where tether has gone wrong before:

* an assistant message with `tool_calls` must be followed by a tool message for each
  call id, else HTTP 400 (the real API's wording);
* the prompt's tokens (about 4 characters a token, tool schemas included) above `window`
  give HTTP 400 with code `context_length_exceeded`.

Each request is answered by the next scripted step, else by `responder(body)` (default:
tether's offline `ResearchPolicy`, so whole orchestrator runs work through the real
client). A step is a dict:

* `{"status": 500}` / `{"status": 429, "retry_after": 1}`: an error response;
* `{"hang": seconds}`: sleep before answering (a timeout for the client);
* `{"body": "not json"}`: a 200 response whose body is not JSON;
* `{"tool": NAME, "args": {...}}` or `{"tool": NAME, "raw": "{truncated"}`: a tool call;
* `{"calls": [{"tool": NAME, "args": {...}}, ...]}`: several tool calls in one reply;
* `{"text": "..."}`: a plain assistant message.

In a tool call's string arguments, `{subtask}` is replaced by the subtask id of the
conversation (its `Subtask: ID` line), so one script serves several subtasks.
`call_ids="position"` numbers each reply's calls `call_0`, `call_1`, ... as some providers
do (ids then repeat across replies, agents and tasks); the default is a random id per call.

`tool_choice="ignore"` serves like llama.cpp's own server, which reads a named
`tool_choice` (an object) as "auto": the responder sees `"auto"` where the client named a
tool (`requests` keeps what the client sent). The default, `"honour"`, passes it on.

`usage` (a callable `prompt_tokens -> prompt_tokens to report`, or None for no usage
block) sets what the server reports. `scale` makes the server's tokenizer count `scale`
times more tokens than 4 characters a token (as a real tokenizer does on code or other
scripts): both the window check and the reported usage use the scaled count. Every request
body is kept in `requests`, with the HTTP status it got in `statuses`.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

UNANSWERED = (
    "An assistant message with 'tool_calls' must be followed by tool messages responding "
    "to each 'tool_call_id'. The following tool_call_ids did not have response messages: {ids}"
)


def prompt_tokens(body: dict[str, Any]) -> int:
    """About 4 characters a token, over the messages and the tool schemas."""
    return (
        len(json.dumps(body.get("messages", []))) // 4 + len(json.dumps(body.get("tools", []))) // 4
    )


def unanswered_calls(messages: list[dict[str, Any]]) -> list[str]:
    """Ids of assistant tool calls not followed by their tool messages."""
    missing: list[str] = []
    for i, m in enumerate(messages):
        if m.get("role") != "assistant" or not m.get("tool_calls"):
            continue
        answered = set()
        for later in messages[i + 1 :]:
            if later.get("role") != "tool":
                break
            answered.add(later.get("tool_call_id"))
        missing += [c["id"] for c in m["tool_calls"] if c["id"] not in answered]
    return missing


def policy_responder(body: dict[str, Any]) -> dict[str, Any]:
    """Answer like tether's offline model would (ResearchPolicy over the same messages)."""
    from langchain_openai.chat_models.base import _convert_dict_to_message

    from orchestrator.offline import ResearchPolicy

    messages = [_convert_dict_to_message(m) for m in body.get("messages", [])]
    tools = list(body.get("tools") or [])
    choice = body.get("tool_choice")
    if isinstance(choice, dict):
        name = choice.get("function", {}).get("name")
        tools = [t for t in tools if t["function"]["name"] == name] or tools
    reply = ResearchPolicy()(messages, tools)
    if reply.tool_calls:
        call = reply.tool_calls[0]
        return {"tool": call["name"], "args": call["args"]}
    return {"text": str(reply.content)}


class ScriptedOpenAI:
    """The server; use as a context manager, `base_url` for the client."""

    def __init__(
        self,
        steps: list[dict[str, Any]] | None = None,
        *,
        responder: Callable[[dict[str, Any]], dict[str, Any]] | None = policy_responder,
        window: int = 1_000_000,
        usage: Callable[[int], int] | None = lambda n: n,
        scale: float = 1.0,
        call_ids: str = "random",
        tool_choice: str = "honour",
    ):
        if tool_choice not in ("honour", "ignore"):
            raise ValueError(f"tool_choice is 'honour' or 'ignore', not {tool_choice!r}")
        self.tool_choice = tool_choice
        self.scale = scale
        self.call_ids = call_ids
        self.steps: deque = deque(steps or [])
        self.responder = responder
        self.window = window
        self.usage = usage
        self.requests: list[dict[str, Any]] = []
        self.statuses: list[int] = []
        #: One record per answered request: `{"arrived", "done"}` (monotonic seconds) and
        #: `total`, the prompt plus completion tokens reported for it.
        self.log: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> ScriptedOpenAI:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.shutdown()
        self._server.server_close()

    def add(self, *steps: dict[str, Any]) -> None:
        with self._lock:
            self.steps.extend(steps)

    # -- answering ------------------------------------------------------------------------
    def answer(self, body: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
        arrived = time.monotonic()
        with self._lock:
            self.requests.append(body)
            step = self.steps.popleft() if self.steps else None
        missing = unanswered_calls(body.get("messages", []))
        if missing:
            return _error(400, UNANSWERED.format(ids=missing), "invalid_request_error")
        tokens = int(prompt_tokens(body) * self.scale)
        if tokens > self.window:
            return _error(
                400,
                f"This model's maximum context length is {self.window} tokens. However, your "
                f"messages resulted in {tokens} tokens.",
                "invalid_request_error",
                code="context_length_exceeded",
            )
        if step is None:
            if self.responder is None:
                return _error(500, "script exhausted", "server_error")
            step = self.responder(self._as_read(body))
        if "hang" in step:
            time.sleep(step["hang"])
            step = self.responder(self._as_read(body)) if self.responder else {"text": "late"}
        if "status" in step:
            headers = {"retry-after": str(step["retry_after"])} if "retry_after" in step else {}
            status, head, data = _error(step["status"], "scripted fault", "server_error")
            return status, {**head, **headers}, data
        if "body" in step:
            return 200, {"content-type": "application/json"}, step["body"].encode()
        return (
            200,
            {"content-type": "application/json"},
            self._completion(body, step, tokens, arrived),
        )

    def _as_read(self, body: dict[str, Any]) -> dict[str, Any]:
        """The request as this server reads it (`tool_choice="ignore"`: a named choice is
        "auto")."""
        if self.tool_choice == "ignore" and isinstance(body.get("tool_choice"), dict):
            return {**body, "tool_choice": "auto"}
        return body

    def _completion(self, body: dict, step: dict, tokens: int, arrived: float = 0.0) -> bytes:
        message: dict[str, Any] = {"role": "assistant", "content": step.get("text")}
        finish = "stop"
        calls = step.get("calls") or ([step] if "tool" in step else [])
        if calls:
            subtask = _subtask_of(body)
            message["content"] = None
            message["tool_calls"] = [
                {
                    "id": f"call_{i}" if self.call_ids == "position" else _random_id(),
                    "type": "function",
                    "function": {"name": call["tool"], "arguments": _arguments(call, subtask)},
                }
                for i, call in enumerate(calls)
            ]
            finish = "tool_calls"
        completion_tokens = len(json.dumps(message)) // 4
        data: dict[str, Any] = {
            "id": "chatcmpl-" + uuid.uuid4().hex[:12],
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "scripted"),
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        }
        if self.usage is not None:
            reported = int(self.usage(tokens))
            data["usage"] = {
                "prompt_tokens": reported,
                "completion_tokens": completion_tokens,
                "total_tokens": reported + completion_tokens,
            }
            with self._lock:
                self.log.append(
                    {"arrived": arrived, "done": time.monotonic(),
                     "total": reported + completion_tokens}
                )  # fmt: skip
        return json.dumps(data).encode()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                status, headers, data = server.answer(body)
                with server._lock:
                    server.statuses.append(status)
                try:
                    self.send_response(status)
                    for k, v in headers.items():
                        self.send_header(k, v)
                    self.send_header("content-length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:  # the client gave up (timeout)
                    pass

        return Handler


def _random_id() -> str:
    return "call_" + uuid.uuid4().hex[:16]


def _subtask_of(body: dict[str, Any]) -> str:
    """The `Subtask: ID` of a subagent's conversation (empty for the lead's)."""
    for m in body.get("messages", []):
        content = m.get("content")
        if m.get("role") == "user" and isinstance(content, str):
            for line in content.splitlines():
                if line.startswith("Subtask: "):
                    return line.removeprefix("Subtask: ").strip()
    return ""


def _arguments(call: dict[str, Any], subtask: str) -> str:
    """A scripted call's arguments as JSON, `{subtask}` in its strings filled in."""
    if "raw" in call:
        return call["raw"]

    def fill(value: Any) -> Any:
        if isinstance(value, str):
            return value.replace("{subtask}", subtask)
        if isinstance(value, dict):
            return {k: fill(v) for k, v in value.items()}
        if isinstance(value, list):
            return [fill(v) for v in value]
        return value

    return json.dumps(fill(call.get("args") or {}))


def _error(
    status: int, message: str, kind: str, code: str | None = None
) -> tuple[int, dict[str, str], bytes]:
    body = {"error": {"message": message, "type": kind, "param": None, "code": code}}
    return status, {"content-type": "application/json"}, json.dumps(body).encode()
