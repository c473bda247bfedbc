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
which stops stdio servers, then the loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Mapping
from typing import Any

from orchestrator.errors import ToolConfigError

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


def _leaf(exc: BaseException) -> BaseException:
    """The first real error inside anyio's exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _describe(exc: BaseException) -> str:
    exc = _leaf(exc)
    text = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class McpServers:
    """The MCP servers of one run (see the module docstring).

    Args:
        connections: server name -> connection dict (`langchain-mcp-adapters`' shape).
        timeout: seconds one tool call may take.
    """

    def __init__(self, connections: Mapping[str, Mapping[str, Any]], *, timeout: float = 120.0):
        self.connections = {name: dict(conn) for name, conn in connections.items()}
        self.timeout = timeout
        self.tools: dict[str, list[Any]] = {}
        """Server name -> its tools (sync LangChain tools), after `start()`."""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stops: list[asyncio.Event] = []
        self._tasks: list[concurrent.futures.Future] = []

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
            try:
                async with client.session(name) as session:
                    tools = await load_mcp_tools(session, server_name=name)
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
                f"MCP server {name!r} did not start within {START_TIMEOUT:.0f} s; "
                "check its command in the workflow's mcp_servers"
            ) from None
        except Exception as exc:
            raise ToolConfigError(
                f"MCP server {name!r} could not be started ({_describe(exc)}); "
                "check its command, args and url in the workflow's mcp_servers"
            ) from None

    def close(self) -> None:
        """End every session (stdio servers exit), then the loop; safe to call twice."""
        loop, self._loop = self._loop, None
        if loop is None:
            return
        for stop in self._stops:
            loop.call_soon_threadsafe(stop.set)
        for task in self._tasks:
            try:
                task.result(10)
            except Exception:  # noqa: BLE001 - a server that dies while closing is closed
                task.cancel()
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(10)
        if not loop.is_running():
            loop.close()
        self._stops.clear()
        self._tasks.clear()

    # -- tools --------------------------------------------------------------------------
    def _sync_tool(self, tool: Any, server: str) -> Any:
        """`tool` (async only) as a sync tool that runs on the servers' loop."""
        from langchain_core.tools import StructuredTool

        def call(**kwargs: Any) -> Any:
            loop = self._loop
            if loop is None:
                raise RuntimeError(f"MCP tool {tool.name!r} was called after its server closed")
            future = asyncio.run_coroutine_threadsafe(tool.coroutine(**kwargs), loop)
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
