"""The tools a run's agents can name: tether's own, the user's Python tools, MCP tools.

Sources, every name from exactly one of them:

* **tether's** (`orchestrator.config.workflow.KNOWN_TOOLS`): the read-only workdir tools, the
  opt-in `write_file`/`edit_file`, and the memory tools; built per run for the task's
  workdir and memory (`RunContext.tools_for`);
* **Python tools**: `Orchestrator(tools=[...])` (LangChain `BaseTool`s, `@tool`s, or plain
  typed functions with a docstring) and the workflow's `python_tools` import paths
  (`mypkg.tools:count_widgets`), which any process can rebuild (`resume`, `approve`, a
  LangGraph Server);
* **MCP tools**: the tools of the workflow's `mcp_servers`, by name, or all of one
  server's as `mcp:SERVER` (`orchestrator.tools.mcp_client`).

An agent's `tools` list is checked against these before anything is written: an unknown
name, a name two sources provide (tether's and a server's, or two servers'), a function
without a docstring, an import that fails, a server that does not start: one
`ToolConfigError` line naming them. The user's tools (Python and MCP) are called with a
timeout (`ToolTimeoutMiddleware`): a tool that hangs answers the agent with an error.

A Python tool's parameter `tool_call_key` (a function's, or a LangChain tool's injected
`ToolCallKey`) is not the model's: it gets the call's idempotency key
(`orchestrator.tools.call_keys`).
"""

from __future__ import annotations

import concurrent.futures
import contextvars
import functools
import importlib
import inspect
import sys
import threading
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool

from orchestrator.config.workflow import KNOWN_TOOLS, Workflow
from orchestrator.errors import ToolConfigError
from orchestrator.tools.call_keys import KEY_PARAM, tool_call_key

if TYPE_CHECKING:
    from langchain.agents.middleware import (
        ToolCallRequest,
    )
    from langgraph.types import Command

MCP_PREFIX = "mcp:"
#: Tools tether gives agents itself: the final answers and the skills reader. A user's tool
#: of one of these names would be dropped (or shadow tether's), so it is refused.
PROTOCOL_TOOLS = frozenset({"PhasePlan", "SubmitFindings", "SubmitAnswer", "read_skill"})
DEFAULT_TOOL_TIMEOUT = 120.0
"""Seconds a user's tool call may take (the workflow's `tool_timeout` overrides it)."""


def as_tool(obj: object, where: str = "Orchestrator(tools=...)") -> BaseTool:
    """A LangChain tool from a `BaseTool` or a typed function with a docstring.

    Raises:
        ToolConfigError: neither a tool nor a function, or a function without docstring.
    """
    if isinstance(obj, BaseTool):
        return _keyed_tool(obj)
    if not callable(obj):
        raise ToolConfigError(
            f"{where}: {obj!r} is not a LangChain tool or a function; pass a BaseTool, "
            "an @tool, or a typed function with a docstring"
        )
    name = getattr(obj, "__name__", repr(obj))
    if not (getattr(obj, "__doc__", None) or "").strip():
        raise ToolConfigError(
            f"{where}: function {name!r} has no docstring; the model reads it to know what "
            "the tool does, so add one"
        )
    from langchain_core.tools import tool as make_tool

    try:
        return make_tool(_keyed_function(obj))
    except Exception as exc:  # LangChain refuses signatures it cannot describe
        raise ToolConfigError(f"{where}: function {name!r} cannot be a tool: {exc}") from None


def _keyed_function(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn` without its `tool_call_key` parameter, which the call's idempotency key fills
    (`orchestrator.tools.call_keys`): the model never sees it. `fn` itself when it has
    none."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return fn
    if KEY_PARAM not in signature.parameters:
        return fn

    @functools.wraps(fn)
    def keyed(*args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs, **{KEY_PARAM: tool_call_key()})

    try:  # resolved here: `keyed`'s module is not `fn`'s (`from __future__ import annotations`)
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception:  # noqa: BLE001 - a hint that does not resolve: LangChain says so later
        hints = dict(getattr(fn, "__annotations__", {}))
    params = [
        p.replace(annotation=hints.get(name, p.annotation))
        for name, p in signature.parameters.items()
        if name != KEY_PARAM
    ]
    keyed.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=params, return_annotation=hints.get("return", signature.return_annotation)
    )
    keyed.__annotations__ = {k: v for k, v in hints.items() if k != KEY_PARAM}
    del keyed.__wrapped__  # LangChain reads the signature above, not `fn`'s
    return keyed


def _keyed_tool(tool: BaseTool) -> BaseTool:
    """A LangChain tool whose one injected argument is `tool_call_key` (annotated
    `ToolCallKey`), as a tool that fills it with the call's idempotency key (LangChain's
    tool node drops injected arguments it does not know); any other tool as it is."""
    if set(getattr(tool, "_injected_args_keys", ())) != {KEY_PARAM}:
        return tool
    from langchain_core.tools import StructuredTool

    def call(**kwargs: Any) -> Any:
        return tool.invoke({**kwargs, KEY_PARAM: tool_call_key()})

    return StructuredTool(
        name=tool.name,
        description=tool.description,
        args_schema=tool.tool_call_schema,
        func=call,
        return_direct=tool.return_direct,
        response_format=tool.response_format,
        handle_tool_error=tool.handle_tool_error,
        handle_validation_error=tool.handle_validation_error,
        metadata=tool.metadata,
    )


def import_tool(path: str, search: Iterable[Path] = ()) -> BaseTool:
    """The tool at `module:attribute` (the folders in `search` are importable too).

    Raises:
        ToolConfigError: the module or attribute is missing, or is not a tool.
    """
    module_name, _, attr = path.partition(":")
    for folder in search:
        if str(folder) not in sys.path:
            sys.path.append(str(folder))
    try:
        module = importlib.import_module(module_name.strip())
    except Exception as exc:  # any import failure, e.g. a SyntaxError in the user's module
        raise ToolConfigError(
            f"python_tools {path!r}: cannot import {module_name!r} ({type(exc).__name__}: "
            f"{str(exc).splitlines()[0] if str(exc) else ''}); is it installed or beside "
            "the workflow file?"
        ) from None
    try:
        obj = getattr(module, attr.strip())
    except AttributeError:
        raise ToolConfigError(
            f"python_tools {path!r}: module {module_name!r} has no {attr.strip()!r}"
        ) from None
    return as_tool(obj, f"python_tools {path!r}")


class Toolbox:
    """The user's tools of a run, by name, with where each came from.

    Args:
        tools: in-process tools (`Orchestrator(tools=...)`).
        python_tools: import paths from the workflow.
        mcp_tools: MCP server name -> its tools (`McpServers.tools`).
        search: folders the import paths may be found in (workflow folder, project).

    Raises:
        ToolConfigError: a tool that cannot be built, or a name two sources provide.
    """

    def __init__(
        self,
        tools: Sequence[Any] = (),
        python_tools: Sequence[str] = (),
        mcp_tools: Mapping[str, Sequence[BaseTool]] | None = None,
        *,
        search: Iterable[Path] = (),
    ) -> None:
        self.tools: dict[str, BaseTool] = {}
        self.sources: dict[str, str] = {name: "tether" for name in KNOWN_TOOLS}
        self.servers: dict[str, list[str]] = {}
        self.in_process: list[str] = []
        """Names given in-process only: a process without them cannot continue the task."""
        search = list(search)
        for path in python_tools:
            self._add(import_tool(path, search), f"python_tools {path!r}")
        for obj in tools:
            tool = as_tool(obj)
            if self.tools.get(tool.name) is not None and self.sources[tool.name].startswith(
                "python_tools"
            ):
                continue  # the same tool by import path and in-process: one tool
            self._add(tool, "Orchestrator(tools=...)")
            self.in_process.append(tool.name)
        for server, server_tools in (mcp_tools or {}).items():
            self.servers[server] = []
            for tool in server_tools:
                self._add(tool, f"MCP server {server!r}")
                self.servers[server].append(tool.name)

    def _add(self, tool: BaseTool, source: str) -> None:
        if tool.name in PROTOCOL_TOOLS:
            raise ToolConfigError(
                f"tool name {tool.name!r} is provided twice: by tether's protocol and by "
                f"{source}; rename yours"
            )
        before = self.sources.get(tool.name)
        if before is not None:
            raise ToolConfigError(
                f"tool name {tool.name!r} is provided twice: by {before} and by {source}; "
                "rename one (MCP servers: give the server another tool name)"
            )
        self.tools[tool.name] = tool
        self.sources[tool.name] = source

    # -- names --------------------------------------------------------------------------
    def expand(self, names: Iterable[str], agent: str = "") -> list[str]:
        """`names` with each `mcp:SERVER` replaced by that server's tool names.

        Raises:
            ToolConfigError: an unknown tool or server (one line naming the agent).
        """
        out: list[str] = []
        who = f"agent {agent!r}" if agent else "an agent"
        for name in names:
            if name.startswith(MCP_PREFIX):
                server = name[len(MCP_PREFIX) :]
                if server not in self.servers:
                    known = ", ".join(sorted(self.servers)) or "none declared"
                    raise ToolConfigError(
                        f"{who} lists {name!r}, but no MCP server {server!r} is declared "
                        f"(mcp_servers: {known})"
                    )
                out += self.servers[server]
            elif name in self.sources:
                out.append(name)
            else:
                raise ToolConfigError(
                    f"{who} lists unknown tool {name!r}; known tools: "
                    f"{', '.join(sorted(self.sources))}"
                    + ("; MCP servers as mcp:NAME" if self.servers else "")
                )
        return list(dict.fromkeys(out))

    def check(self, workflow: Workflow) -> None:
        """Every agent's tools and `interrupt_on` name tools this run has.

        Raises:
            ToolConfigError: one line naming the agent and the tool.
        """
        for agent, spec in workflow.agents.items():
            names = self.expand(spec.tools, agent)
            for gated in spec.interrupt_on:
                if gated not in names:
                    raise ToolConfigError(
                        f"agent {agent!r}: interrupt_on names {gated!r}, which is not among "
                        f"its tools ({', '.join(names)})"
                    )


# -- timeouts -------------------------------------------------------------------------------
def _in_daemon_thread(fn: Callable[..., Any], *args: Any) -> concurrent.futures.Future:
    """`fn(*args)` in a daemon thread of its own: a call that never returns (a hung tool)
    is left behind when the run returns, and the process still exits (a thread pool's
    workers are joined at interpreter shutdown)."""
    future: concurrent.futures.Future = concurrent.futures.Future()

    def target() -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            future.set_result(fn(*args))
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting agent
            future.set_exception(exc)

    threading.Thread(target=target, name="tether-tool", daemon=True).start()
    return future


class ToolTimeoutMiddleware(AgentMiddleware):
    """Calls of the named tools that take longer than `timeout` seconds answer the agent
    with an error (the call goes on in a daemon thread; a Python thread cannot be killed,
    and one that hangs never keeps the process alive after the run).

    Args:
        timeout: seconds per call.
        names: the tools it applies to (the user's; tether's own are bounded already).
    """

    def __init__(self, timeout: float, names: Iterable[str]) -> None:
        super().__init__()
        self.timeout = timeout
        self.names = frozenset(names)

    def wrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], ToolMessage | Command]
    ) -> ToolMessage | Command:
        call = request.tool_call
        if call["name"] not in self.names:
            return handler(request)
        context = contextvars.copy_context()
        future = _in_daemon_thread(context.run, handler, request)
        try:
            return future.result(self.timeout)
        except concurrent.futures.TimeoutError:
            return ToolMessage(
                content=f"Error: tool {call['name']!r} did not finish within "
                f"{self.timeout:g} s; try narrower arguments or another tool",
                tool_call_id=call.get("id") or "",
                name=call["name"],
                status="error",
            )
