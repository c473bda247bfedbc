"""LangGraph Server as a remote agent (`orchestrator.agents.remote.RemoteAgent`), through
`langgraph-sdk`.

tether speaks LangGraph Server's own protocol (threads, runs, join, a thread's state) and
has no queue or worker protocol of its own:

* **Threads.** One thread per subtask attempt (`remote.thread_id_for`); created with
  `if_exists="do_nothing"`, with metadata naming the task, subtask and attempt.
* **Runs.** Created with `multitask_strategy="reject"`: the server refuses a second run on
  a busy thread, so two starts can never both run. A run is joined (`runs.join`), then
  read back from the server (`runs.list`, `threads.get`: status, values, interrupts, error).
  An interrupt is answered by a run with `Command(resume={interrupt id: decision})`.
* **Faults.** A refused connection, a dropped join, a 5xx or a 429 is retried with backoff
  until `timeout` (the model timeout) has passed since it started failing: it bounds
  reaching the server, never the run's length (a join answers a blank line every 5
  seconds while the run goes on). Then `RemoteUnreachableError`. Any other refusal is a
  `RemoteAgentError` at once.
* **Findings.** A run's final state becomes a finding (`findings_of`): its
  `structured_response` when that has tether's findings shape, else its last AI message
  as the summary, with its tool log (`tool_log_of`: its AI messages' tool calls by name;
  the files it read are not known, so its listed files are not checked; with no messages
  the log is unknown, never `ungrounded`). Its AI messages' `usage_metadata` are its
  usage (`usage_of`: unknown when none reports any). `tether_subagent` answers its
  finding's reference instead (the finding is in the shared memory already).
* **Secrets.** Header values live in the HTTP client only; messages name a server by its
  URL without credentials (`remote.shown`), and no header is put in a message, a record
  or an event.

Thread safety: subagents call in from parallel threads; the clients are httpx clients
(thread safe).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import httpx
from langgraph_sdk.client import SyncLangGraphClient
from pydantic import ValidationError

from orchestrator.agents.remote import (
    FAILED,
    RUNNING,
    NoFinding,
    RemoteOutcome,
    RunState,
    count,
    shown,
)
from orchestrator.config.workflow import TETHER_SUBAGENT_GRAPH
from orchestrator.errors import (
    OrchestratorError,
    RemoteAgentError,
    RemoteUnreachableError,
    Stopped,
)
from orchestrator.types import SubmitFindings

FIRST_DELAY, MAX_DELAY = 0.2, 2.0
"""Seconds between retries of an unreachable server: doubling from the first to the most."""
UNEXPECTED = (KeyError, IndexError, TypeError, AttributeError, ValueError)
"""What reading an answer of another shape than LangGraph Server's raises (`ValueError`:
also a body that is not JSON)."""
POLL = 0.2
"""Seconds between looks at Ctrl-C while a join waits."""
JOIN_SILENCE = 30.0
"""Seconds a join may hear nothing before it counts as dropped (at least the timeout): a
server answers a blank line every 5 seconds while the run goes on."""


def _detail(exc: httpx.HTTPStatusError) -> str:
    """A refusal's one line: the status and what the server said."""
    response = exc.response
    try:
        body = response.json()
        said = body.get("detail") or body.get("message") if isinstance(body, dict) else body
    except Exception:  # not JSON (or not read: a streamed response)
        said = ""
    said = " ".join(str(said or "").split())[:300]
    return f"HTTP {response.status_code}" + (f": {said}" if said else "")


class LangGraphServer:
    """One LangGraph Server as one agent reaches it (`RemoteAgent`): its graph, an SDK
    client with its headers, and the retry policy of `timeout` seconds."""

    def __init__(self, url: str, graph: str, headers: dict[str, str], timeout: float) -> None:
        self.url = url
        self.graph = graph
        self.timeout = timeout
        self.client = self._client(headers, httpx.Timeout(timeout))
        # a join's read outlasts the server's heartbeats, whatever the timeout
        self.joins = self._client(headers, httpx.Timeout(timeout, read=max(timeout, JOIN_SILENCE)))

    def _client(self, headers: dict[str, str], timeout: httpx.Timeout) -> SyncLangGraphClient:
        # no transport retries: `_retry` owns the backoff, bounded by the timeout
        http = httpx.Client(
            base_url=self.url,
            transport=httpx.HTTPTransport(retries=0),
            timeout=timeout,
            headers={"User-Agent": "tether", **headers},
        )
        return SyncLangGraphClient(http)

    def _retry(self, what: str, call: Callable[[], Any]) -> Any:
        """`call()`, retried while the server is unreachable, for `timeout` seconds from the
        first failure (a join that fails after an hour is retried too)."""
        deadline = None
        delay = FIRST_DELAY
        while True:
            try:
                return call()
            except OrchestratorError:
                raise
            except httpx.TransportError as exc:
                problem = type(exc).__name__
            except httpx.HTTPStatusError as exc:
                code = exc.response.status_code
                if code < 500 and code != 429:
                    raise RemoteAgentError(
                        f"LangGraph Server {shown(self.url)} refused {what}: {_detail(exc)}"
                    ) from None
                problem = f"HTTP {code}"
            except UNEXPECTED as exc:  # not JSON, or JSON of another shape
                raise RemoteAgentError(
                    f"{shown(self.url)} answered {what} with something unexpected "
                    f"({type(exc).__name__}: {str(exc)[:100]}): it does not speak LangGraph "
                    "Server's protocol; check the agent's remote url"
                ) from None
            if deadline is None:
                deadline = time.monotonic() + self.timeout
            left = deadline - time.monotonic()
            if left <= 0:
                raise RemoteUnreachableError(
                    f"LangGraph Server {shown(self.url)} unreachable while {what} ({problem}) "
                    f"for {self.timeout:g}s; `orchestrator resume` tries again"
                ) from None
            time.sleep(min(delay, left))  # the last try comes at the deadline
            delay = min(delay * 2, MAX_DELAY)

    def memory(self) -> str | None:
        """The memory a `tether_subagent` server writes into (its answer to a probe: a
        stateless run that runs nothing); None when it cannot say now (unreachable, a run
        that failed, a server of a tether without the probe): the server checks each
        payload's task itself anyway."""
        try:
            out = self.client.runs.wait(None, self.graph, input={"probe": True}, raise_error=False)
        except (httpx.TransportError, httpx.HTTPStatusError, *UNEXPECTED):
            return None
        found = out.get("memory") if isinstance(out, dict) else None
        return found if isinstance(found, str) else None

    def latest(self, thread_id: str) -> RunState | None:
        """The thread's latest run, read back; None when the thread or its runs do not exist."""

        def look() -> RunState | None:
            try:
                runs = self.client.runs.list(thread_id, limit=1)
            except httpx.HTTPStatusError as exc:
                if exc.response.status_code == 404:
                    return None
                raise
            if not isinstance(runs, list):
                raise TypeError(f"a run list that is a {type(runs).__name__}")
            return self._read(thread_id, runs[0]) if runs else None

        return self._retry(f"listing the runs of thread {thread_id}", look)

    def _read(self, thread_id: str, run: dict[str, Any]) -> RunState:
        status = str(run.get("status"))
        if status in RUNNING:
            return RunState(str(run["run_id"]), status)
        thread = self.client.threads.get(thread_id)
        interrupts = [i for group in (thread.get("interrupts") or {}).values() for i in group]
        error = thread.get("error") or {}
        said = ": ".join(str(error.get(k)) for k in ("error", "message") if error.get(k))
        return RunState(
            str(run["run_id"]),
            status,
            dict(thread.get("values") or {}),
            [i for i in interrupts if isinstance(i, dict) and i.get("id")],
            said or (f"the run ended {status}" if status in FAILED else ""),
        )

    def start(self, thread_id: str, metadata: dict[str, Any], input: dict[str, Any]) -> str | None:
        """Start a run with `input` on the thread (created if missing); its id, or None when
        the server refused it because a run is going on the thread already."""
        return self._create(thread_id, metadata, input=input)

    def resume(
        self, thread_id: str, metadata: dict[str, Any], decisions: dict[str, Any]
    ) -> str | None:
        """Start the run that answers the thread's interrupts (`Command(resume=...)`)."""
        return self._create(thread_id, metadata, command={"resume": decisions})

    def _create(self, thread_id: str, metadata: dict[str, Any], **what: Any) -> str | None:
        graph = self.graph

        def create() -> str | None:
            self.client.threads.create(
                thread_id=thread_id, if_exists="do_nothing", metadata=metadata, graph_id=graph
            )
            try:
                run = self.client.runs.create(
                    thread_id, graph, **what, metadata=metadata, multitask_strategy="reject"
                )
            except httpx.HTTPStatusError as exc:
                if exc.response.status_code == 409:  # busy: a run of ours is going on it
                    return None
                raise
            return str(run["run_id"])

        return self._retry(f"starting a run of {graph!r}", create)

    def result(self, state: RunState) -> RemoteOutcome:
        """The finding and spend of a finished run (for `tether_subagent`, its finding's
        reference: the finding is in the memory already).

        Raises:
            NoFinding: the final state gives no finding.
        """
        values = state.values
        if self.graph == TETHER_SUBAGENT_GRAPH:
            if not isinstance(values.get("finding"), dict):
                raise NoFinding(
                    f"remote run {state.run_id} of {self.graph!r} on {shown(self.url)} "
                    "returned no finding reference"
                )
            usage = _counts(values.get("usage"))
            return RemoteOutcome(None, count(values.get("tokens") or 0) or 0, usage)
        reported = usage_of(values)
        tokens = reported.pop("tokens") if reported else 0
        return RemoteOutcome(findings_of(values), tokens, reported)

    def join(self, thread_id: str, run_id: str, stop: threading.Event) -> None:
        """Wait until the run ends (re-joining while the server is unreachable, within the
        timeout); Ctrl-C (`stop`) ends the wait, never the run.

        Raises:
            Stopped: `stop` was set (the run goes on; a resume joins it again).
        """
        path = f"/threads/{thread_id}/runs/{run_id}/join"

        def once() -> None:
            done = threading.Event()
            outcome: list[BaseException] = []

            def wait() -> None:
                try:  # no reconnects of the SDK's own: `_retry` bounds them by the timeout
                    self.joins.http.request_reconnect(path, "GET", reconnect_limit=0)
                except BaseException as exc:  # handed to the waiting thread
                    outcome.append(exc)
                finally:
                    done.set()

            threading.Thread(target=wait, name=f"join-{run_id[:8]}", daemon=True).start()
            while not done.wait(POLL):
                if stop.is_set():
                    raise Stopped(f"stopped by Ctrl-C while joining remote run {run_id}")
            if outcome:
                raise outcome[0]

        self._retry(f"joining run {run_id}", once)

    def close(self) -> None:
        self.client.close()
        self.joins.close()


# -- what a run's final state holds -------------------------------------------------------
def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text", "") if isinstance(p, dict) else str(p) for p in content]
        return "".join(p for p in parts if isinstance(p, str))
    return ""


def _ai_messages(values: dict[str, Any]) -> list[dict[str, Any]]:
    messages = values.get("messages")
    if not isinstance(messages, list):  # none, or not a list (`messages: 5`): no answer
        return []
    return [m for m in messages if isinstance(m, dict) and m.get("type") in ("ai", "AIMessage")]


def findings_of(values: dict[str, Any]) -> dict[str, Any]:
    """The finding of a remote run's final state: its `structured_response` when that has
    tether's findings shape (`SubmitFindings`), else its last AI message with text as the
    summary.

    Raises:
        NoFinding: the state has neither.
    """
    log = tool_log_of(values)
    tools = {} if log is None else {"tools": log}
    structured = values.get("structured_response")
    if isinstance(structured, dict):
        try:
            return {**SubmitFindings.model_validate(structured).model_dump(), **tools}
        except ValidationError:
            pass  # another shape: the agent's last message speaks for it
    for message in reversed(_ai_messages(values)):
        text = _text(message.get("content")).strip()
        if text:
            return {"status": "completed", "summary": text, **tools}
    raise NoFinding(
        "the remote run ended with no AI message and no structured_response in tether's "
        "findings shape; a remote agent's state needs `messages`"
    )


def tool_log_of(values: dict[str, Any]) -> dict[str, Any] | None:
    """A remote run's tool log (`orchestrator.types.ToolLog`'s fields): its AI messages'
    tool calls by name (its `SubmitFindings` call not counted), the files read unknown
    (`read` None: its tools are its own); None when its state has no messages (unknown)."""
    messages = values.get("messages")
    if not isinstance(messages, list) or not messages:
        return None
    calls: dict[str, int] = {}
    for message in _ai_messages(values):
        for call in message.get("tool_calls") or ():
            name = call.get("name") if isinstance(call, dict) else None
            if isinstance(name, str) and name and name != SubmitFindings.__name__:
                calls[name] = calls.get(name, 0) + 1
    return {"calls": calls, "read": None}


def _counts(usage: Any) -> dict[str, int] | None:
    """A `tether_subagent`'s `usage` (`{calls, input_tokens}`) as counts; None: unknown."""
    if not isinstance(usage, dict):
        return None
    counted = {k: count(usage.get(k) or 0) for k in ("calls", "input_tokens")}
    if any(v is None for v in counted.values()):
        return None
    return {k: int(v or 0) for k, v in counted.items()}


def usage_of(values: dict[str, Any]) -> dict[str, int] | None:
    """What a remote run's AI messages report they spent: `{calls, input_tokens, tokens}`
    (prompt plus completion tokens), or None when none reports its usage, or one reports a
    count that is not a number (unknown, never a failure). A negative count is 0."""
    messages = _ai_messages(values)
    reported = [m["usage_metadata"] for m in messages if isinstance(m.get("usage_metadata"), dict)]
    if not reported:
        return None
    sums = {}
    for name in ("input_tokens", "output_tokens", "total_tokens"):
        counts = [count(u.get(name) or 0) for u in reported]
        if any(c is None for c in counts):
            return None
        sums[name] = sum(c or 0 for c in counts)
    tokens = max(sums["total_tokens"], sums["input_tokens"] + sums["output_tokens"])
    return {"calls": len(messages), "input_tokens": sums["input_tokens"], "tokens": tokens}
