"""What an agent's tools wrote and read, from their typed outcomes (never from their answers'
words).

A finding lists the files its agent's tool calls wrote (`Finding.files_written`), apart
from those it examined. `files_written` reads them from the agent's transcript: a workdir
write (`write_file`, `edit_file`) from its `WriteOutcome`, the `ToolMessage`'s artifact
(`orchestrator.tools.workdir_write`); a memory file (`memory_write`, `memory_patch`,
`memory_append`) from the call's `path` argument, with the first line of the tool's answer
as its note.

`tool_log` is what a finding rests on (`orchestrator.types.ToolLog`): the agent's tool
calls by name (those a `ToolMessage` answered; its final call not counted), the workdir
files its reading tools read, from their `ReadOutcome` artifacts
(`orchestrator.tools.workdir`: `read_file`'s file, the files whose lines `grep_files`
showed), and the memory files `memory_read` read.

Invariant: a call that wrote nothing (an error, an unchanged file) is not listed; a call
that read nothing (an error, no match) adds no file read.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage

from memory.errors import PathEscapeError
from memory.paths import confine
from orchestrator.tools.workdir import ReadOutcome
from orchestrator.tools.workdir_write import WriteOutcome, change_note
from orchestrator.types import FINDINGS_TOOL, FileNote, ToolLog

#: Tools that write files: memory files, and the workdir (`write_file`, `edit_file`).
WRITING_TOOLS = frozenset({"memory_write", "memory_patch", "memory_append"})
WORKDIR_WRITES = frozenset({"write_file", "edit_file"})


def files_written(transcript: list[Any]) -> list[FileNote]:
    """The files an agent's writing tool calls did write (an `Error:` answer wrote nothing).

    A workdir file is listed as `created`, or `modified; previous content: ENTRY_ID` (the
    first change keeps the content before the agent touched it), from the write tool's
    `WriteOutcome` (the `ToolMessage`'s artifact); a memory file, named by the call's
    `path`, with the first line of the tool's answer.
    """
    tools = WRITING_TOOLS | WORKDIR_WRITES
    calls: dict[str, dict] = {}
    written: dict[str, str] = {}
    for message in transcript:
        if isinstance(message, AIMessage):
            calls.update({c.get("id"): c for c in message.tool_calls if c["name"] in tools})
        elif isinstance(message, ToolMessage) and message.tool_call_id in calls:
            call, answer = calls[message.tool_call_id], str(message.content).strip()
            if call["name"] in WORKDIR_WRITES:
                outcome: WriteOutcome | None = message.artifact
                note = change_note(outcome) if isinstance(outcome, dict) else None
                if note is not None and outcome["path"] not in written:
                    written[outcome["path"]] = note
                continue
            path = (call.get("args") or {}).get("path")
            if path and not answer.startswith("Error"):
                written[str(path)] = f"{call['name']}: {answer.splitlines()[0][:200]}"
    return [FileNote(path=p, description=d) for p, d in written.items()]


#: Tools whose `ReadOutcome` names the workdir files they read, and the tool that reads a
#: memory file (named by its `path` argument).
READING_TOOLS = frozenset({"read_file", "grep_files"})
MEMORY_READ = "memory_read"


def tool_log(transcript: list[Any], final_tool: str = FINDINGS_TOOL) -> ToolLog:
    """The agent's tool log: its answered tool calls by name (`final_tool` not counted) and
    the workdir files its reading tools read, in the order first read."""
    asked: dict[str, dict] = {}
    calls: dict[str, int] = {}
    read: dict[str, None] = {}
    memory: dict[str, None] = {}
    for message in transcript:
        if isinstance(message, AIMessage):
            asked.update({c.get("id"): c for c in message.tool_calls})
        elif isinstance(message, ToolMessage) and message.tool_call_id in asked:
            call = asked.pop(message.tool_call_id)  # one answer counts once
            name = call["name"]
            if name == final_tool:
                continue
            calls[name] = calls.get(name, 0) + 1
            outcome: ReadOutcome | None = message.artifact
            if name in READING_TOOLS and isinstance(outcome, dict):
                read.update(dict.fromkeys(str(p) for p in outcome.get("read") or ()))
            path = (call.get("args") or {}).get("path")
            answer = str(message.content).strip()
            if name == MEMORY_READ and path and not answer.startswith("Error"):
                memory[str(path)] = None
    return ToolLog(calls=calls, read=list(read), memory=list(memory))


def in_workdir(workdir: str | Path | None) -> Callable[[str], bool]:
    """`path -> whether it exists in the workdir` (a path leading out of it does not; with
    no workdir nothing does)."""

    def exists(path: str) -> bool:
        if not workdir:
            return False
        try:
            return confine(Path(workdir), path, label="the workdir").exists()
        except (PathEscapeError, OSError, ValueError):
            return False

    return exists
