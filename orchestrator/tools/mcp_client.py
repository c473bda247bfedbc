"""MCP servers of a run: started once, their tools as ordinary (sync) LangChain tools.

The workflow declares servers in `langchain-mcp-adapters`' connection shape::

    mcp_servers:
      tickets: {command: python, args: [tickets_server.py]}     # stdio (added when omitted)
      search: {transport: streamable_http, url: http://127.0.0.1:8000/mcp}

`McpServers` loads them with `langchain-mcp-adapters` (no client of tether's own): one
`MultiServerMCPClient.session(name)` per server, held open for the whole run, and
`load_mcp_tools(session)` for its tools. The adapters' tools are async and a session must
be entered and left by the same task (anyio's cancel scopes), so every session lives in a
task of its own on an event loop of its own, in a daemon thread; tether's agents (sync,
in LangGraph's worker threads) call a tool through `asyncio.run_coroutine_threadsafe` with
a timeout, after which the call is cancelled and the agent gets an error answer.

`close()` (also on Ctrl-C and failure: use it as a context manager) ends every session,
which stops stdio servers, then the loop. A server that never finished starting (it never
answers `initialize`, or prints something else) has its session cancelled; and every
process a stdio server was started as is then killed (its process group: SIGTERM, then
SIGKILL) if it is still there, so no server outlives the run.

A call of a user's tool has an idempotency key (`orchestrator.tools.call_keys`); a server
gets it in the `tools/call` request's `_meta`, as `"tether/tool_call_key"`.

A line on a stdio server's stdout that is not JSON-RPC is skipped: one warning naming the
server (`on_warning`) instead of the SDK's traceback.

A stdio server's stderr never reaches the terminal, where it would write through the live
view (FastMCP logs an INFO line per request there): each server gets a pipe of its own,
read by a thread that appends every line, stamped and prefixed with the server's name, to
`stderr_log` (the run puts it in the task's folder of the memory:
`working/{task_id}/mcp_servers.log`, written once the folder exists), or to the
`orchestrator.tools.mcp_client` logger without one. The last lines of each server are
kept: a server that fails to start is reported with the last line it wrote (and the file,
when it has the rest).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import logging
import os
import signal
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from orchestrator.errors import ToolConfigError
from orchestrator.tools.call_keys import META_KEY, set_tool_call_key, tool_call_key

START_TIMEOUT = 30.0
"""Seconds a server may take to start and list its tools."""
INSTALL_HINT = "pip install langchain-mcp-adapters (or: pip install 'tether[mcp]')"


def _real_stderr_for_stdio_servers() -> None:
    """Give stdio servers a stderr they can inherit.

    The MCP SDK's `stdio_client` (which the adapters call without `errlog`) takes the
    `sys.stderr` of the moment it was imported as the child's stderr; when that was a stream
    without a file descriptor (a notebook's, or a test runner's capture), every server fails
    to start with `UnsupportedOperation: fileno`. Such a default is replaced by the
    process's own stderr.
    """
    import sys

    try:
        from mcp.client import stdio
    except ImportError:
        return
    defaults = stdio.stdio_client.__defaults__ or ()
    if len(defaults) != 1:
        return  # a version whose signature we do not know: leave it alone
    try:
        defaults[0].fileno()
    except (AttributeError, OSError, ValueError):
        stdio.stdio_client.__defaults__ = (sys.__stderr__,)


_LOG = logging.getLogger(__name__)
TAIL_LINES = 20
"""Lines of each server's stderr kept for its error message."""


class StderrLog:
    """Where the stdio servers' stderr goes (see the module docstring): `stderr_fd(name)`
    gives a server's process its stderr, a pipe read by a daemon thread.

    The file is written only once its folder exists (a run creates the task's folder when
    it records the task, after its servers started): a run refused before that leaves
    nothing in the memory. Lines written before are kept (at most `HELD_LINES`) and go
    into the file first; never written (no folder at the end), they go to the logger.
    """

    HELD_LINES = 1000

    def __init__(self, path: str | os.PathLike[str] | None = None):
        self.path = Path(path) if path is not None else None
        self._file: IO[str] | None = None
        self._lock = threading.Lock()
        self._held: deque[tuple[str, str, str]] = deque(maxlen=self.HELD_LINES)
        self._tails: dict[str, deque[str]] = {}
        self._readers: dict[str, list[threading.Thread]] = {}
        self._closed = False

    def stderr_fd(self, name: str) -> int:
        """The write end of a new pipe for a process of server `name` (the caller closes it
        once the process has it)."""
        read, write = os.pipe()
        reader = threading.Thread(
            target=self._read, args=(name, read), name=f"tether-mcp-stderr-{name}", daemon=True
        )
        reader.start()
        self._readers.setdefault(name, []).append(reader)
        return write

    def _read(self, name: str, fd: int) -> None:
        with open(fd, "rb") as stream:
            for raw in stream:
                self._line(name, raw.decode("utf-8", "replace").rstrip("\r\n"))

    def _line(self, name: str, line: str) -> None:
        stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        with self._lock:
            self._tails.setdefault(name, deque(maxlen=TAIL_LINES)).append(line)
            if self.path is None or self._closed:
                _LOG.info("MCP server %s: %s", name, line)
                return
            self._held.append((stamp, name, line))
            self._write_held()

    def _write_held(self) -> None:
        """Append the held lines to the file, once its folder exists (under the lock)."""
        if self.path is None or not self._held:
            return
        try:
            if self._file is None:
                if not self.path.parent.is_dir():
                    return
                self._file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115
            while self._held:
                stamp, name, line = self._held.popleft()
                self._file.write(f"{stamp} [{name}] {line}\n")
            self._file.flush()
        except OSError:  # an unwritable memory: the logger has the lines from now on
            self.path = None
            self._log_held()

    def _log_held(self) -> None:
        while self._held:
            _stamp, name, line = self._held.popleft()
            _LOG.info("MCP server %s: %s", name, line)

    def last(self, name: str, wait: float = 0.0) -> str:
        """The last non-blank line server `name` wrote on its stderr ("" for none), after
        waiting up to `wait` seconds for its readers to reach the end (a process that
        exited)."""
        deadline = time.monotonic() + wait
        for reader in self._readers.get(name, []):
            reader.join(max(0.0, deadline - time.monotonic()))
        with self._lock:
            lines = [ln.strip() for ln in self._tails.get(name, ()) if ln.strip()]
        return lines[-1] if lines else ""

    def written(self) -> str | None:
        """The file, once something was written to it."""
        with self._lock:
            return str(self.path) if self._file is not None and self.path else None

    def close(self, wait: float = 1.0) -> None:
        """Wait up to `wait` seconds for the readers (the processes are gone), write what
        is held, and close the file."""
        deadline = time.monotonic() + wait
        for readers in self._readers.values():
            for reader in readers:
                reader.join(max(0.0, deadline - time.monotonic()))
        with self._lock:
            self._write_held()
            self._log_held()  # no folder: the run never recorded its task
            self._closed = True  # what a left-behind child writes later goes to the logger
            if self._file is not None:
                self._file.close()
                self._file = None


@dataclass(frozen=True)
class _Serving:
    """The server whose session the current task serves."""

    name: str
    pids: list[int]
    """Where its processes are noted (`close()` kills what is left)."""
    not_json: Callable[[str], None]
    stderr: StderrLog


_SERVING: contextvars.ContextVar[_Serving | None] = contextvars.ContextVar(
    "tether_mcp_serving", default=None
)
CLOSE_GRACE_S = 3.0
"""Seconds the servers' sessions get to end on `close()` before their processes are killed."""


def _note_spawned_processes() -> None:
    """Note the pid of every process the SDK starts for a stdio server, in the list of the
    server being started (`_SERVING`), so `close()` can kill what is left of it; and give
    the process the server's stderr pipe (`StderrLog`) instead of the terminal."""
    try:
        from mcp.client import stdio
    except ImportError:
        return
    create = getattr(stdio, "_create_platform_compatible_process", None)
    if create is None or getattr(create, "_tether_notes", False):
        return

    async def noting(*args: Any, **kwargs: Any) -> Any:
        serving = _SERVING.get()
        fd = None
        if serving is not None and "errlog" in kwargs:
            fd = kwargs["errlog"] = serving.stderr.stderr_fd(serving.name)
        try:
            process = await create(*args, **kwargs)
        finally:
            if fd is not None:  # the child has its copy; the reader sees EOF when it exits
                os.close(fd)
        if serving is not None and getattr(process, "pid", None):
            serving.pids.append(process.pid)
        return process

    noting._tether_notes = True  # type: ignore[attr-defined]
    stdio._create_platform_compatible_process = noting


class _NotJsonLines(logging.Filter):
    """The SDK's "Failed to parse JSONRPC message" tracebacks become one warning naming
    the server (the first such line of each server)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if "Failed to parse JSONRPC message" not in record.getMessage():
            return True
        serving = _SERVING.get()
        if serving is not None:
            serving.not_json(serving.name)
        return False


_NOT_JSON = _NotJsonLines()


def _kill(pids: list[int]) -> None:
    """SIGTERM, then SIGKILL, the process groups of `pids` still running (the SDK starts a
    stdio server in a session of its own), and reap them."""
    alive = []
    for pid in pids:
        try:
            os.killpg(pid, signal.SIGTERM)
            alive.append(pid)
        except (ProcessLookupError, PermissionError):
            continue
    deadline = time.monotonic() + 1.0
    while alive and time.monotonic() < deadline:
        alive = [p for p in alive if not _reaped(p)]
        time.sleep(0.02)
    for pid in alive:
        try:
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            continue
        _reaped(pid, block=True)


def _reaped(pid: int, *, block: bool = False) -> bool:
    try:
        done, _status = os.waitpid(pid, 0 if block else os.WNOHANG)
    except ChildProcessError:  # not our child (any more): reaped by the event loop
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return False
    return done == pid


def _leaf(exc: BaseException) -> BaseException:
    """The first real error inside anyio's exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _describe(exc: BaseException) -> str:
    exc = _leaf(exc)
    text = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class _KeyInMeta:
    """The adapters' tool-call interceptor that sends the call's idempotency key
    (`orchestrator.tools.call_keys`) in the `tools/call` request's `_meta`, under
    `META_KEY` (the adapters' request has no `_meta` of its own: the call is made here)."""

    def __init__(self, session: Any) -> None:
        self.session = session

    async def __call__(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        key = tool_call_key()
        if key is None:
            return await handler(request)
        return await self.session.call_tool(request.name, request.args, meta={META_KEY: key})


class McpServers:
    """The MCP servers of one run (see the module docstring).

    Args:
        connections: server name -> connection dict (`langchain-mcp-adapters`' shape).
        timeout: seconds one tool call may take.
        on_warning: receives one line per server that wrote something other than
            JSON-RPC to its stdout.
        stderr_log: the file the stdio servers' stderr is appended to (None: the
            `orchestrator.tools.mcp_client` logger); never the terminal.
    """

    def __init__(
        self,
        connections: Mapping[str, Mapping[str, Any]],
        *,
        timeout: float = 120.0,
        on_warning: Callable[[str], None] | None = None,
        stderr_log: str | os.PathLike[str] | None = None,
    ):
        self.connections = {name: dict(conn) for name, conn in connections.items()}
        self.timeout = timeout
        self.on_warning = on_warning
        self.stderr = StderrLog(stderr_log)
        self.tools: dict[str, list[Any]] = {}
        """Server name -> its tools (sync LangChain tools), after `start()`."""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stops: list[asyncio.Event] = []
        self._tasks: list[concurrent.futures.Future] = []
        self._pids: list[int] = []
        self._warned: set[str] = set()

    def __enter__(self) -> McpServers:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- lifecycle ----------------------------------------------------------------------
    def start(self) -> McpServers:
        """Start every server and load its tools.

        Raises:
            ToolConfigError: `langchain-mcp-adapters` is not installed, or a server cannot
                be started or listed (one line naming it); started servers are closed.
        """
        if not self.connections or self._loop is not None:
            return self
        try:
            from langchain_mcp_adapters.client import MultiServerMCPClient
        except ImportError:
            raise ToolConfigError(
                f"the workflow declares MCP servers ({', '.join(self.connections)}), which "
                f"need langchain-mcp-adapters: {INSTALL_HINT}"
            ) from None
        _real_stderr_for_stdio_servers()
        _note_spawned_processes()
        stdio_logger = logging.getLogger("mcp.client.stdio")
        if _NOT_JSON not in stdio_logger.filters:
            stdio_logger.addFilter(_NOT_JSON)
        client = MultiServerMCPClient(self.connections)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="tether-mcp", daemon=True
        )
        self._thread.start()
        try:
            for name in self.connections:
                self.tools[name] = [self._sync_tool(t, name) for t in self._open(client, name)]
        except BaseException:
            self.close()
            raise
        return self

    def _open(self, client: Any, name: str) -> list[Any]:
        """Open `name`'s session in a task of its own; returns the adapters' tools."""
        assert self._loop is not None
        ready: concurrent.futures.Future = concurrent.futures.Future()

        async def serve() -> None:
            from langchain_mcp_adapters.tools import load_mcp_tools

            stop = asyncio.Event()
            self._stops.append(stop)
            _SERVING.set(_Serving(name, self._pids, self._not_json, self.stderr))
            try:
                async with client.session(name) as session:
                    tools = await load_mcp_tools(
                        session, server_name=name, tool_interceptors=[_KeyInMeta(session)]
                    )
                    ready.set_result(tools)
                    await stop.wait()
            except BaseException as exc:  # the server failed to start, or died
                if not ready.done():
                    ready.set_exception(exc)

        self._tasks.append(asyncio.run_coroutine_threadsafe(serve(), self._loop))
        try:
            return ready.result(START_TIMEOUT)
        except concurrent.futures.TimeoutError:
            raise ToolConfigError(
                f"MCP server {name!r} did not start within {START_TIMEOUT:.0f} s"
                f"{self._stderr_tail(name)}; check its command in the workflow's mcp_servers"
            ) from None
        except Exception as exc:
            raise ToolConfigError(
                f"MCP server {name!r} could not be started ({_describe(exc)})"
                f"{self._stderr_tail(name, wait=1.0)}; check its command, args and url in "
                "the workflow's mcp_servers"
            ) from None

    def _stderr_tail(self, name: str, wait: float = 0.0) -> str:
        """What a failed server last wrote on its stderr, and where the rest is."""
        last = self.stderr.last(name, wait)
        if not last:
            return ""
        shown = last if len(last) <= 200 else last[:197] + "..."
        where = self.stderr.written()
        return f"; its stderr ends {shown!r}" + (f" (all of it: {where})" if where else "")

    def _not_json(self, name: str) -> None:
        if name in self._warned or self.on_warning is None:
            return
        self._warned.add(name)
        self.on_warning(
            f"MCP server {name!r} wrote a line that is not JSON-RPC on its stdout; "
            "skipped (a server must log to stderr)"
        )

    def close(self) -> None:
        """End every session (stdio servers exit), cancel those that never started, kill
        what is left of the servers' processes, then stop the loop; safe to call twice."""
        loop, self._loop = self._loop, None
        if loop is None:
            return
        for stop in self._stops:
            loop.call_soon_threadsafe(stop.set)
        deadline = time.monotonic() + CLOSE_GRACE_S
        for task in self._tasks:
            try:
                task.result(max(0.05, deadline - time.monotonic()))
            except concurrent.futures.TimeoutError:  # still starting, or ignoring its stdin
                task.cancel()
            except BaseException:  # noqa: BLE001 - a server that died while closing is closed
                pass
        _kill(self._pids)
        self.stderr.close()
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(10)
        if not loop.is_running():
            loop.close()
        self._stops.clear()
        self._tasks.clear()
        self._pids.clear()

    # -- tools --------------------------------------------------------------------------
    def _sync_tool(self, tool: Any, server: str) -> Any:
        """`tool` (async only) as a sync tool that runs on the servers' loop."""
        from langchain_core.tools import StructuredTool

        def call(**kwargs: Any) -> Any:
            loop = self._loop
            if loop is None:
                raise RuntimeError(f"MCP tool {tool.name!r} was called after its server closed")
            key = tool_call_key()  # the caller's; the call runs in a task of the loop

            async def keyed() -> Any:
                set_tool_call_key(key)  # this task's own context
                return await tool.coroutine(**kwargs)

            future = asyncio.run_coroutine_threadsafe(keyed(), loop)
            try:
                return future.result(self.timeout)
            except concurrent.futures.TimeoutError:
                future.cancel()
                raise TimeoutError(
                    f"MCP tool {tool.name!r} did not answer within {self.timeout:.0f} s"
                ) from None

        return StructuredTool(
            name=tool.name,
            description=tool.description,
            args_schema=tool.args_schema,
            func=call,
            response_format=tool.response_format,
            metadata={**(tool.metadata or {}), "mcp_server": server},
            handle_tool_error=tool.handle_tool_error,
        )
