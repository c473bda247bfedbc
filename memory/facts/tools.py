"""LangChain tools over the memory directory, usable in any LangGraph agent.

`memory_tools(store, task_id)` returns all eight: `recall_memory`, `memory_read`,
`memory_write`, `memory_patch`, `memory_append`, `memory_list`, `memory_log`,
`memory_fetch`. `longterm_tools(store)` returns the five the reflector uses.

Design: each tool is a thin wrapper over a library function (`memory.facts.memfiles`,
`MemoryStore.search/log/fetch`); the wrapper's only job is to turn errors into one line the
agent can act on (`Error: path '../x' leaves the memory directory ...`) instead of an
exception that would end the agent's run. Every path goes through `memory.facts.memfiles.resolve`
(and, on a memory directory, `memory.paths.confine`), so nothing outside the memory is read or
written.

This module imports LangChain; the `memory` CLI never imports it.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any

from langchain_core.tools import BaseTool, StructuredTool
from pydantic import BaseModel, Field

import memory.facts.memfiles as memfiles
from memory.errors import MemoryStoreError
from memory.search.recall import format_results

_ANCHOR = re.compile(r"^(?P<path>[^#]+)#L(?P<first>\d+)(?:-L?(?P<last>\d+))?$")
MAX_READ_LINES = 400


class RecallArgs(BaseModel):
    query: str = Field(description="What to look for (several words are fine).")
    scope: str = Field(
        default="all",
        description="all|plans|findings|checkpoints|snapshots|detail|messages|entries|facts|"
        "episodes",
    )
    limit: int = Field(default=5, ge=1, le=50, description="Maximum results.")


class PathArgs(BaseModel):
    path: str = Field(
        description="Path relative to the memory directory, e.g. facts/user.md; a citation "
        "such as working/t1/messages.jsonl#L45 or detail/x.md#L10-L20 reads those lines."
    )


class WriteArgs(BaseModel):
    path: str = Field(description="facts/NAME.md, or working/TASK/overview.md or detail/NOTE.md")
    content: str = Field(description="The whole new markdown content.")


class Patch(BaseModel):
    old_text: str = Field(description="Exact text currently in the file (must occur once).")
    new_text: str = Field(description="Replacement text.")


class PatchArgs(BaseModel):
    path: str = Field(description="The file to patch, e.g. facts/user.md.")
    patches: list[Patch] = Field(description="Exact replacements, applied all or none.")


class AppendArgs(BaseModel):
    path: str = Field(description="Usually episodes/YYYY-MM.md (created if missing).")
    entry: str = Field(description="Markdown block: `## Title`, `- Summary: ...`, details.")
    summary: str | None = Field(default=None, description="Override the file summary line.")


class ListArgs(BaseModel):
    pass


class LogArgs(BaseModel):
    content: str = Field(description="Large output to store (tool output, logs, a file).")
    tags: list[str] = Field(default_factory=list, description="Tags for later listing.")
    type: str = Field(default="output", description="Kind of content: output, log, file...")


class FetchArgs(BaseModel):
    entry_id: str = Field(description="An entry id, e.g. mem-20261122-101500-ab12cd34.")
    chunk: int | None = Field(default=None, description="One chunk (from 0) of a big entry.")
    summary_only: bool = Field(default=False, description="Only the stored summary.")


def _guarded(fn: Callable[..., str]) -> Callable[..., str]:
    """Turn memory errors into an `Error: ...` line for the agent."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> str:
        try:
            return fn(*args, **kwargs)
        except MemoryStoreError as exc:
            return f"Error: {exc}"
        except (OSError, ValueError) as exc:
            return f"Error: {type(exc).__name__}: {exc}"

    return wrapper


_TASK_RELATIVE = ("messages.jsonl", "overview.md", "detail/")


def _task_path(store: Any, path: str, task_id: str | None) -> str:
    """Summaries cite `messages.jsonl#L1-L20` relative to their task: map it for the agent."""
    if task_id and path.startswith(_TASK_RELATIVE):
        plain = path.split("#", 1)[0]
        if store.backend.stat_document(plain) is None:
            return f"working/{task_id}/{path}"
    return path


def read_memory_lines(store: Any, path: str, task_id: str | None = None) -> str:
    """A memory file, or the lines a citation names (`x.md#L3-L9`), for a model to read."""
    path = _task_path(store, path, task_id)
    match = _ANCHOR.match(path)
    if not match:
        return memfiles.read_memory(store, path)
    first = int(match.group("first"))
    last = int(match.group("last") or first)
    if last < first or last - first >= MAX_READ_LINES:
        return f"Error: line range {path!r} is empty or over {MAX_READ_LINES} lines"
    rel = memfiles.resolve(store, match.group("path"))
    doc = store.backend.get_document(rel)
    if doc is None:
        return f"Error: no memory file {rel!r}: use memory_list or recall_memory"
    lines = doc.data.decode("utf-8", errors="replace").split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the newline that ends the last line starts no line of its own
    out = [f"{n}: {lines[n - 1]}" for n in range(first, min(last, len(lines)) + 1)]
    return "\n".join(out) or f"Error: {rel!r} has no line {first}"


def longterm_tools(store: Any, task_id: str | None = None) -> list[BaseTool]:
    """`memory_read`, `memory_write`, `memory_patch`, `memory_append`, `memory_list`."""
    overview_hint = f" This task's overview is working/{task_id}/overview.md." if task_id else ""

    @_guarded
    def memory_read(path: str) -> str:
        return read_memory_lines(store, path, task_id)

    @_guarded
    def memory_write(path: str, content: str) -> str:
        item = memfiles.write_memory(store, path, content)
        return f"Wrote {item.path} ({memfiles.format_size(item.size)}). Summary: {item.summary}"

    @_guarded
    def memory_patch(path: str, patches: list[Any]) -> str:
        pairs = [
            (p.old_text, p.new_text) if isinstance(p, Patch) else (p["old_text"], p["new_text"])
            for p in patches
        ]
        report = memfiles.patch_memory(store, path, pairs)
        return f"Applied {report.applied} of {report.total} patches to {report.path}."

    @_guarded
    def memory_append(path: str, entry: str, summary: str | None = None) -> str:
        item = memfiles.append_memory(store, path, entry, summary)
        return (
            f"Appended to {item.path} ({memfiles.format_size(item.size)}). Summary: {item.summary}"
        )

    @_guarded
    def memory_list() -> str:
        files = memfiles.list_memory(store)
        if not files:
            return "No long-term memory files yet."
        return "\n".join(f.line() for f in files)

    specs = [
        (memory_read, PathArgs, "Read a memory file (or the cited lines of one)."),
        (
            memory_write,
            WriteArgs,
            "Create or overwrite a fact file or a working-memory note; "
            "the file's `> Summary:` line is regenerated." + overview_hint,
        ),
        (
            memory_patch,
            PatchArgs,
            "Patch a memory file with exact old/new text pairs (all or "
            "none); replaced facts stay readable, struck through with the date.",
        ),
        (memory_append, AppendArgs, "Append an episode entry (or any block) to a memory file."),
        (memory_list, ListArgs, "List long-term memory files with their summary and size."),
    ]
    return [
        StructuredTool.from_function(fn, name=fn.__name__, description=desc, args_schema=schema)
        for fn, schema, desc in specs
    ]


def memory_tools(store: Any, task_id: str | None = None) -> list[BaseTool]:
    """All eight memory tools bound to `store` (see the module docstring)."""

    @_guarded
    def recall_memory(query: str, scope: str = "all", limit: int = 5) -> str:
        found = store.search(query, scope=scope, limit=limit, past_echoes=True)
        return format_results(query, found)

    @_guarded
    def memory_log(content: str, tags: list[str] | None = None, type: str = "output") -> str:
        entry = store.log(content, tags=tags or [], type=type)
        return f"Logged {entry.id} ({entry.tokens} tokens, {entry.tier}). Summary: {entry.summary}"

    @_guarded
    def memory_fetch(entry_id: str, chunk: int | None = None, summary_only: bool = False) -> str:
        return store.fetch(entry_id, chunk=chunk, summary_only=summary_only)

    extra = [
        StructuredTool.from_function(
            recall_memory,
            name="recall_memory",
            args_schema=RecallArgs,
            description="Search all external memory (plans, findings, notes, summaries, raw "
            "messages, stored outputs, facts, episodes); returns snippets with citations.",
        ),
        StructuredTool.from_function(
            memory_log,
            name="memory_log",
            args_schema=LogArgs,
            description="Store a large output outside the context; returns its id and summary.",
        ),
        StructuredTool.from_function(
            memory_fetch,
            name="memory_fetch",
            args_schema=FetchArgs,
            description="Fetch a stored entry (whole, one chunk, or its summary) by id.",
        ),
    ]
    return [extra[0], *longterm_tools(store, task_id), *extra[1:]]
