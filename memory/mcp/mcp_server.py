"""tether's memory as an MCP server (stdio, the official `mcp` SDK): `memory mcp`.

Tools (names and descriptions are written for the model that calls them):

* `recall`: ranked search over everything in memory, with `path#Lx-Ly` citations;
* `memory_log` / `memory_fetch`: keep a large output out of the context, get it back;
* `memory_read` / `memory_list` / `memory_write` / `memory_patch` / `memory_append`:
  the memory files (facts, episodes, a task's overview and detail notes);
* `task_status` / `checkpoint_report`: read-only views of an orchestrator task, offered
  when the `orchestrator` package is installed (see "Task tools" below).

Design: every tool is a thin wrapper over the library functions the LangChain tools in
`memory.facts.tools` wrap (`MemoryStore.search/log/fetch`, `memory.facts.memfiles`), so the
sandbox is the same one: every path goes through `memory.paths.confine`, and only the files
`memory.facts.memfiles` lets an agent write are writable. Where the LangChain tools answer an
error as an `Error: ...` string (an agent must keep going), this server raises
`ToolError`, which the SDK sends as an MCP error result (`isError: true`) with the same
one-line message; the server itself never stops on bad input.

Task tools: `orchestrator` imports `memory`, never the reverse. The status
and checkpoint report of a task are orchestrator logic (state rebuilt from LangGraph's
database or JSON checkpoints, phase order, report format), so they live in
`orchestrator.mcp_tools`, next to the code they wrap; copying that logic into `memory`
would give the same file formats two readers. This module never imports `orchestrator`:
it loads *tool providers* by dotted name (`TOOL_PROVIDERS`, each a `register(server,
store)` function) and skips a provider whose package is not installed, so `memory` still
builds, tests and serves alone.

Invariant: stdout carries only MCP messages (nothing here prints); logs go to stderr.
"""

# No `from __future__ import annotations`: FastMCP evaluates the tools' annotations,
# which name local values (descriptions, `Patch`).

import functools
import importlib
from collections.abc import Callable, Iterable
from importlib.metadata import PackageNotFoundError, version
from typing import Annotated, Any

import anyio
from mcp.server.fastmcp import FastMCP
from mcp.server.fastmcp.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

import memory.facts.memfiles as memfiles
from memory.errors import MemoryDirError, MemoryStoreError
from memory.facts.tools import Patch, read_memory_lines
from memory.mcp._mcp_stdio import read_frame, stdio_server
from memory.search.recall import format_results

__all__ = [
    "INSTRUCTIONS",
    "SERVER_NAME",
    "TOOL_PROVIDERS",
    "build_server",
    "guarded",
    "load_providers",
    "read_frame",
    "serve_stdio",
    "tool_error",
]

SERVER_NAME = "tether-memory"
DIST_NAME = "tether"  # the distribution the server reports the version of (pyproject.toml)

#: `module:function` of optional providers of more tools (`register(server, store)`).
TOOL_PROVIDERS = ("orchestrator.mcp_tools:register",)

INSTRUCTIONS = """\
tether's external memory for long-running work. Search it before redoing work (`recall`),
store big outputs with `memory_log` and keep only their id and summary in your context,
and keep durable knowledge in memory files: facts/NAME.md for what stays true,
episodes/YYYY-MM.md for what happened, working/TASK/overview.md and detail/ notes for a
task in progress. Paths are relative to the memory directory; citations such as
findings/x.md#L3-L9 can be read back with `memory_read`."""

_SCOPES = (
    "all|plans|findings|checkpoints|snapshots|detail|messages|entries|facts|episodes; "
    "several joined with commas"
)


def tool_error(exc: Exception) -> Exception:
    """The `ToolError` an MCP client sees for a library error (one line)."""
    if isinstance(exc, MemoryStoreError):
        return ToolError(str(exc))
    return ToolError(f"{type(exc).__name__}: {exc}")


def guarded(fn: Callable[..., str]) -> Callable[..., str]:
    """Run a tool body; memory, OS and value errors become one-line MCP errors."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> str:
        try:
            text = fn(*args, **kwargs)
        except (MemoryStoreError, OSError, ValueError, KeyError) as exc:
            raise tool_error(exc) from None
        if text.startswith("Error: "):  # the shared readers answer some errors as text
            raise ToolError(text.removeprefix("Error: "))
        return text

    return wrapper


def _add(server: Any, fn: Callable[..., str], description: str, *, read_only: bool) -> None:
    server.add_tool(
        guarded(fn),
        name=fn.__name__,
        description=description,
        annotations=ToolAnnotations(readOnlyHint=read_only, openWorldHint=False),
    )


def _search_tools(server: Any, store: Any) -> None:
    def recall(
        query: Annotated[str, Field(description="What to look for, in plain words.")],
        scope: Annotated[str, Field(description=_SCOPES)] = "all",
        limit: Annotated[int, Field(ge=1, le=50, description="Most results to return.")] = 5,
    ) -> str:
        found = store.search(query, scope=scope, limit=limit, past_echoes=True)
        return format_results(query, found)

    def memory_log(
        content: Annotated[str, Field(description="The large output to store, verbatim.")],
        tags: Annotated[list[str], Field(description="Tags to find it by later.")] = [],  # noqa: B006
        type: Annotated[str, Field(description="output, log, file, ...")] = "output",
    ) -> str:
        entry = store.log(content, tags=tags, type=type)
        return f"Logged {entry.id} ({entry.tokens} tokens, {entry.tier}). Summary: {entry.summary}"

    def memory_fetch(
        entry_id: Annotated[str, Field(description="An id from memory_log or recall.")],
        chunk: Annotated[
            int | None, Field(description="One chunk (from 0) of a big entry.")
        ] = None,
        summary_only: Annotated[bool, Field(description="Only the stored summary.")] = False,
    ) -> str:
        return store.fetch(entry_id, chunk=chunk, summary_only=summary_only)

    _add(
        server,
        recall,
        "Search all of tether's memory (plans, findings, checkpoints, snapshots, notes, "
        "raw messages, stored outputs, facts, episodes). Returns the best snippets, each "
        "with a citation like findings/x.md#L3-L9 you can open with memory_read. Use it "
        "before repeating work or asking the user something memory may already hold.",
        read_only=True,
    )
    _add(
        server,
        memory_log,
        "Store a large output (test log, file dump, long tool result) outside your context. "
        "Returns its id and a short summary; keep only those and memory_fetch it later.",
        read_only=False,
    )
    _add(
        server,
        memory_fetch,
        "Get back a stored entry by id: the exact content, one chunk of a big entry, or "
        "just its summary. Unknown ids are an error.",
        read_only=True,
    )


def _file_tools(server: Any, store: Any) -> None:
    path_help = "Relative to the memory directory, e.g. facts/user.md or episodes/2026-11.md."

    def memory_read(
        path: Annotated[str, Field(description=path_help + " A citation reads lines.")],
    ) -> str:
        return read_memory_lines(store, path)

    def memory_list() -> str:
        files = memfiles.list_memory(store)
        return "\n".join(f.line() for f in files) or "No long-term memory files yet."

    def memory_write(
        path: Annotated[
            str, Field(description="facts/NAME.md, working/TASK/overview.md or detail note")
        ],
        content: Annotated[str, Field(description="The whole new markdown content.")],
    ) -> str:
        item = memfiles.write_memory(store, path, content)
        return f"Wrote {item.path} ({memfiles.format_size(item.size)}). Summary: {item.summary}"

    def memory_patch(
        path: Annotated[str, Field(description=path_help)],
        patches: Annotated[list[Patch], Field(description="Exact replacements, all or none.")],
    ) -> str:
        pairs = [(p.old_text, p.new_text) for p in patches]
        report = memfiles.patch_memory(store, path, pairs)
        return f"Applied {report.applied} of {report.total} patches to {report.path}."

    def memory_append(
        path: Annotated[str, Field(description="Usually episodes/YYYY-MM.md (created).")],
        entry: Annotated[str, Field(description="A markdown block: `## Title`, details.")],
    ) -> str:
        item = memfiles.append_memory(store, path, entry)
        return f"Appended to {item.path} ({memfiles.format_size(item.size)})."

    _add(
        server,
        memory_read,
        "Read a memory file, or only the cited lines (findings/x.md#L3-L9, at most 400 "
        "lines). Paths outside the memory directory are refused.",
        read_only=True,
    )
    _add(
        server,
        memory_list,
        "List the long-term memory files with summary and size.",
        read_only=True,
    )
    _add(
        server,
        memory_write,
        "Create or overwrite a fact file (facts/NAME.md) or a task's working note "
        "(working/TASK/overview.md, working/TASK/detail/NOTE.md). Its `> Summary:` line is "
        "regenerated. Other paths are refused.",
        read_only=False,
    )
    _add(
        server,
        memory_patch,
        "Replace exact passages of a memory file (each old_text must occur once; all "
        "patches apply or none). A replaced fact stays readable, struck through with the "
        "date: use it to correct a fact instead of rewriting the file.",
        read_only=False,
    )
    _add(
        server,
        memory_append,
        "Append a block to a memory file, usually an episode to episodes/YYYY-MM.md "
        "(`## Title`, `- Summary: ...`, details).",
        read_only=False,
    )


def load_providers(names: Iterable[str]) -> list[Callable[[Any, Any], None]]:
    """The `register` functions of the providers in `names` that are installed."""
    found = []
    for name in names:
        module_name, _, attr = name.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name and module_name.startswith(exc.name):
                continue  # that package is not installed: its tools are not offered
            raise
        found.append(getattr(module, attr))
    return found


def build_server(store: Any, providers: Iterable[str] = TOOL_PROVIDERS) -> Any:
    """A `FastMCP` server with the memory tools over `store` (+ installed providers')."""
    server = FastMCP(SERVER_NAME, instructions=INSTRUCTIONS, log_level="WARNING")
    # `serverInfo.version` is the MCP SDK's own unless set: a client should see tether's.
    server._mcp_server.version = _tether_version()
    _search_tools(server, store)
    _file_tools(server, store)
    for register in load_providers(providers):
        try:
            register(server, store)
        except MemoryDirError:
            continue  # a provider over a memory directory, and this memory has none
    return server


def _tether_version() -> str:
    try:
        return version(DIST_NAME)
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"


def serve_stdio(store: Any) -> None:
    """Serve `store` over stdio until the client closes the stream.

    The transport is `_mcp_stdio`'s (the SDK's, plus JSON-RPC errors for malformed frames
    and invalid requests), so this drives the low-level server `FastMCP.run` would.
    """
    anyio.run(_serve, build_server(store))


async def _serve(server: Any) -> None:
    async with stdio_server() as (read_stream, write_stream):
        low = server._mcp_server  # what `FastMCP.run_stdio_async` runs, on our transport
        await low.run(read_stream, write_stream, low.create_initialization_options())
