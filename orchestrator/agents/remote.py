"""The seam for remote agents: what tether asks of a server that runs an agent's subtask.

A remote agent (`AgentSpec.remote`) runs each subtask as a run on a server. tether needs
five things of it, the `RemoteAgent` protocol, and nothing else:

* **list its runs**: the latest run on a subtask attempt's thread (`latest`: going,
  finished with its state, failed, or stopped at interrupts), or None before any;
* **start** a run for the attempt (`start`: the thread is made if missing, and None means a
  run is going on it already, so the caller re-attaches to that one), and **wait** for it
  (`join`: Ctrl-C ends the wait, never the run);
* **resume an interrupt**: start the run that answers the thread's interrupts (`resume`);
* **read its result**: a finished run's finding and what it spent (`result`: a
  `RemoteOutcome`; `NoFinding` when the run gives none, a failed attempt);
* for `tether_subagent`, which memory it writes into (`memory`).

A thread is one subtask attempt: its id is derived here (`thread_id_for`), the same in
every process, so a crash never loses where a run is. The caller
(`orchestrator.graph.remote`) notes each step that creates something on a server in the
artifact registry first; an implementation only speaks its server's protocol and says what
it saw in these terms. Its errors are `RemoteAgentError` (a refusal, an answer it cannot
read: one line naming the server) or `RemoteUnreachableError` (retried, then given up after
the timeout).

LangGraph Server is the first implementation (`orchestrator.agents.langgraph_server`).
`KINDS` registers each by name; `RemoteRuns.server` connects an agent's server through it.

`RemoteRuns` is a run's bookkeeping: one client per server and agent, and the runs in
flight on each server, so an agent's list of servers gets each new attempt on the one with
fewest (ties: the one given fewest so far, then the list's order). Thread safety:
subagents call in from parallel threads; the counters are under a lock.

Secrets: header values live in an implementation's client only; a URL is shown and stored
`shown` (without userinfo or secret query parameters, `memory.backends.urls.redact`).
"""

from __future__ import annotations

import importlib
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from memory.backends.urls import redact
from orchestrator.config.workflow import RemoteSpec
from orchestrator.errors import RemoteAgentError

NAMESPACE = uuid.UUID("7d2c4b1e-9f0a-5c3d-8e6b-2a1f0c9d8e7b")
"""The namespace of the thread ids tether derives (`uuid5`)."""
RUNNING = ("pending", "running")
FAILED = ("error", "timeout", "interrupted")
"""Run statuses of an attempt that ended without a result (`interrupted`: cancelled)."""


def thread_id_for(task_id: str, created: str, key: str, attempt: int) -> str:
    """The remote thread of attempt `attempt` of subtask `key` of the task recorded at
    `created` (a UUID: LangGraph Server takes no other thread ids)."""
    return str(uuid.uuid5(NAMESPACE, f"tether|{task_id}|{created}|{key}|{attempt}"))


def shown(url: str) -> str:
    """A server URL as tether shows and stores it: without its userinfo, and with the values
    of secret query parameters (`?token=`, `api_key`, ...) replaced by `***`
    (`memory.backends.urls.redact`)."""
    return redact(url).replace("//***@", "//", 1)


def url_of(spec: RemoteSpec, stored: str) -> str:
    """The URL of `spec` that `stored` (a URL as `shown`) stands for: its credentials come
    from the workflow, never from a record; `stored` itself when the workflow names no
    such server any more."""
    return next((u for u in spec.urls if stored in (u, shown(u))), stored)


def count(value: Any) -> int | None:
    """A token or call count a server reported, as tether counts it: a non-negative int
    (a negative one is 0); None (unknown) for anything that is not a number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if value != value or value in (float("inf"), float("-inf")):  # NaN, infinities
        return None
    return max(int(value), 0)


class NoFinding(RemoteAgentError):
    """A run finished but its final state gives no finding: a failed attempt."""


@dataclass(frozen=True)
class RunState:
    """What tether reads of a remote thread's latest run."""

    run_id: str
    status: str
    """The run's status (`pending`, `running`, `success`, `error`, `timeout`, `interrupted`)."""
    values: dict[str, Any] = field(default_factory=dict)
    """The thread's values after a finished run."""
    interrupts: list[dict[str, Any]] = field(default_factory=list)
    """The thread's pending interrupts (`{"id", "value"}`), after a run that stopped at one."""
    error: str = ""
    """The server's message for a run that errored."""

    @property
    def running(self) -> bool:
        return self.status in RUNNING

    @property
    def failed(self) -> bool:
        """Whether the run ended without a result (a run stopped at an interrupt has none
        yet, and waits: not failed, whatever status a server gives it)."""
        return self.status in FAILED and not self.interrupts


@dataclass(frozen=True)
class RemoteOutcome:
    """A finished run's result."""

    findings: dict[str, Any] | None
    """The finding (`SubmitFindings` fields); None: the server wrote it into the task's
    memory itself (`tether_subagent`)."""
    tokens: int = 0
    """Prompt plus completion tokens it reports (0 when unknown)."""
    usage: dict[str, int] | None = None
    """`{calls, input_tokens}` as reported; None: unknown."""


class RemoteAgent(Protocol):
    """One server as one remote agent reaches it (its graph and headers bound)."""

    url: str

    def latest(self, thread_id: str) -> RunState | None:
        """The thread's latest run, read back; None when the thread or its runs do not exist."""
        ...

    def start(self, thread_id: str, metadata: dict[str, Any], input: dict[str, Any]) -> str | None:
        """Start a run with `input` on the thread (made if missing); its id, or None when a
        run is going on the thread already (the caller joins that one)."""
        ...

    def resume(
        self, thread_id: str, metadata: dict[str, Any], decisions: dict[str, Any]
    ) -> str | None:
        """Start the run that answers the thread's interrupts (`{interrupt id: decision}`);
        None as for `start`."""
        ...

    def join(self, thread_id: str, run_id: str, stop: threading.Event) -> None:
        """Wait until the run ends; `Stopped` when `stop` is set (the run goes on)."""
        ...

    def result(self, state: RunState) -> RemoteOutcome:
        """The finding and spend of a finished run; `NoFinding` when it gives none."""
        ...

    def memory(self) -> str | None:
        """Which memory a `tether_subagent` server writes into, or None: cannot say now."""
        ...

    def close(self) -> None: ...


KINDS: dict[str, str] = {"langgraph": "orchestrator.agents.langgraph_server:LangGraphServer"}
"""The kinds of remote agent, by name: `module:class`, a class made as
`cls(url, graph, headers, timeout)` (imported when first connected, so the seam imports
no implementation). Every remote agent is `langgraph` today."""


def connect(url: str, agent: str, spec: RemoteSpec, timeout: float) -> RemoteAgent:
    """A client of `url` for `agent` (its headers expanded now).

    Raises:
        WorkflowError: a header's `${VAR}` is not set.
    """
    module, _, name = KINDS["langgraph"].partition(":")
    kind = getattr(importlib.import_module(module), name)
    return kind(url, spec.graph, spec.connect_headers(agent), timeout)


class RemoteRuns:
    """A run's remote servers: a client per server and agent, the runs in flight on each."""

    def __init__(self, timeout: float = 120.0) -> None:
        self.timeout = timeout
        self._lock = threading.Lock()
        self._servers: dict[tuple[str, str], RemoteAgent] = {}
        self._in_flight: dict[str, int] = {}
        self._given: dict[str, int] = {}
        self._created: dict[str, str] = {}
        self._tasks: set[str] = set()

    def server(self, url: str, agent: str, spec: RemoteSpec) -> RemoteAgent:
        """The client of `url` for `agent` (its headers expanded now, once per run).

        Raises:
            WorkflowError: a header's `${VAR}` is not set.
        """
        with self._lock:
            found = self._servers.get((url, agent))
            if found is None:
                found = connect(url, agent, spec, self.timeout)
                self._servers[(url, agent)] = found
            return found

    def pick(self, urls: list[str]) -> str:
        """The server with fewest runs in flight (ties: given fewest, then list order), held
        for the caller (`release` it)."""
        with self._lock:
            url = min(
                urls,
                key=lambda u: (self._in_flight.get(u, 0), self._given.get(u, 0), urls.index(u)),
            )
            self._given[url] = self._given.get(url, 0) + 1
            self._in_flight[url] = self._in_flight.get(url, 0) + 1
            return url

    def hold(self, url: str) -> None:
        """Count a run in flight on `url` (an attempt recorded before this process)."""
        with self._lock:
            self._in_flight[url] = self._in_flight.get(url, 0) + 1

    def release(self, url: str | None) -> None:
        if url is None:
            return
        with self._lock:
            self._in_flight[url] = max(self._in_flight.get(url, 0) - 1, 0)

    def task_created(self, task_id: str, read: Callable[[], str]) -> str:
        """When the task was recorded (`read()` once per task and run): part of its thread ids."""
        with self._lock:
            if task_id not in self._created:
                self._created[task_id] = read()
            return self._created[task_id]

    def first_remote(self, task_id: str) -> bool:
        """Whether this is the run's first remote attempt of `task_id` (then noted)."""
        with self._lock:
            first = task_id not in self._tasks
            self._tasks.add(task_id)
            return first

    def close(self) -> None:
        with self._lock:
            servers, self._servers = list(self._servers.values()), {}
        for server in servers:
            server.close()
