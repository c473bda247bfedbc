"""Opt-in tools that change the workdir: `write_file(path, content)` and
`edit_file(path, old, new)`.

An agent gets them only when its workflow spec lists them (the default workflow is
read-only). The rules:

* **Confined.** Paths go through `memory.paths.confine` like the read tools (no absolute
  paths, no `..`, no symlink leading out), and a path through `.git/` or into the memory
  directory (or LangGraph's database beside it) is refused.
* **Nothing is lost.** Before a file is overwritten or edited, its previous content is
  logged as a memory entry (type `context`, tags `previous-content`, `file:PATH` and
  `call:ID`, linked to the workdir), so it is searchable and `memory fetch` returns it byte
  for byte. The answer names the entry: `Modified PATH; previous content: mem-...`.
* **Once per tool call.** The entry carries the call's id: a call replayed after a crash or
  an approval (LangGraph re-runs an interrupted step) finds its entry and only makes sure
  the file holds what the call asked for, without a second backup.
* **Atomic.** Files are written to a temp file beside them, fsynced, renamed over (mode
  kept).
* **Errors are answers**: `Error: ...` lines the agent can act on (text not found, found
  several times, a binary file, a path refused).
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from langchain_core.tools import InjectedToolCallId, StructuredTool

from memory.durable import atomic_write_bytes
from memory.errors import PathEscapeError
from memory.paths import confine
from orchestrator.config.settings import check_workdir
from orchestrator.tools.workdir import is_binary

if TYPE_CHECKING:
    from langchain_core.tools import BaseTool

    from memory.store import MemoryStore

BACKUP_TAG = "previous-content"
BACKUP_TYPE = "context"
#: The answers `files_written` reads back (`orchestrator.graph.nodes.subagent`).
CREATED_RE = re.compile(r"^Created (?P<path>.+?) \(\d+ bytes\)")
MODIFIED_RE = re.compile(r"^Modified (?P<path>.+?); previous content: (?P<entry>mem-[0-9a-f-]+)")
MAX_WRITE_BYTES = 10_000_000


class WorkdirWriter:
    """The logic of the two tools, as plain methods returning the agent's answer.

    Args:
        root: the workdir.
        store: the memory that keeps previous contents.
        protected: folders inside which nothing is written (the memory directory).
    """

    def __init__(
        self, root: str | os.PathLike[str], store: MemoryStore, protected: Sequence[Path] = ()
    ) -> None:
        self.root = check_workdir(root)
        self.store = store
        self.protected = [Path(p).resolve() for p in protected]

    # -- paths ------------------------------------------------------------------------
    def _target(self, user_path: str) -> tuple[Path, str]:
        raw = (user_path or "").strip()
        if not raw or raw in (".", "./"):
            raise PathEscapeError("give the path of a file, relative to the workdir")
        target = confine(self.root, raw, label="the workdir")
        rel = target.relative_to(self.root).as_posix()
        if ".git" in Path(rel).parts:
            raise PathEscapeError(f"path {raw!r} is inside .git/; tether never writes there")
        for folder in self.protected:
            if target == folder or folder in target.parents:
                raise PathEscapeError(
                    f"path {raw!r} is inside tether's memory directory; "
                    "use the memory_* tools for memory files"
                )
        if target.is_dir():
            raise IsADirectoryError(f"path {raw!r} is a folder; give a file path")
        return target, rel

    # -- backups ----------------------------------------------------------------------
    def _backup_of(self, call_id: str) -> str | None:
        """The entry id this tool call logged before (a replayed call), if any."""
        if not call_id:
            return None
        found = self.store.list_entries(tag=f"call:{call_id}", limit=1)
        return found[0].id if found else None

    def _backup(self, rel: str, old: str, call_id: str) -> str:
        tags = [BACKUP_TAG, f"file:{rel}"] + ([f"call:{call_id}"] if call_id else [])
        entry = self.store.log(old, tags=tags, type=BACKUP_TYPE, directory=str(self.root))
        return entry.id

    def _read(self, target: Path, raw: str) -> str:
        if is_binary(target):
            raise ValueError(f"{raw!r} is a binary file; write_file and edit_file change text")
        data = target.read_bytes()
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise ValueError(f"{raw!r} is not UTF-8 text; it is left as it is") from None

    def _write(self, target: Path, text: str) -> int:
        data = text.encode("utf-8")
        if len(data) > MAX_WRITE_BYTES:
            raise ValueError(f"content of {len(data)} bytes is over {MAX_WRITE_BYTES}")
        mode = target.stat().st_mode & 0o7777 if target.exists() else None
        target.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(target, data)
        if mode is not None:
            os.chmod(target, mode)
        return len(data)

    # -- the tools --------------------------------------------------------------------
    def write_file(self, path: str, content: str, call_id: str = "") -> str:
        target, rel = self._target(path)
        done = self._backup_of(call_id)
        if done is not None:  # a replay: the backup exists, make sure the write happened
            if not target.exists() or self._read(target, path) != content:
                self._write(target, content)
            return _modified(rel, done)
        if target.exists():
            old = self._read(target, path)
            if old == content:
                return f"Unchanged {rel}: it already holds this content."
            entry = self._backup(rel, old, call_id)
            self._write(target, content)
            return _modified(rel, entry)
        size = self._write(target, content)
        return f"Created {rel} ({size} bytes)."

    def edit_file(self, path: str, old: str, new: str, call_id: str = "") -> str:
        target, rel = self._target(path)
        if not old:
            raise ValueError("'old' is empty; give the exact text to replace")
        done = self._backup_of(call_id)
        if done is not None:  # a replay: redo the edit on the content it backed up
            before = self.store.fetch(done)
            wanted = before.replace(old, new, 1)
            if self._read(target, path) != wanted:
                self._write(target, wanted)
            return _modified(rel, done)
        if not target.exists():
            raise FileNotFoundError(f"{path!r} does not exist; create it with write_file")
        text = self._read(target, path)
        count = text.count(old)
        if count == 0:
            raise ValueError(f"the text to replace was not found in {rel}; read the file first")
        if count > 1:
            raise ValueError(
                f"the text to replace occurs {count} times in {rel}; include more of the "
                "surrounding lines so it is unique"
            )
        entry = self._backup(rel, text, call_id)
        self._write(target, text.replace(old, new, 1))
        return _modified(rel, entry)


def _modified(rel: str, entry: str) -> str:
    return (
        f"Modified {rel}; previous content: {entry} "
        "(memory_fetch returns it; the change is listed in the findings)."
    )


def _answer(fn: Any, *args: Any) -> str:
    try:
        return fn(*args)
    except (OSError, ValueError, PathEscapeError) as exc:
        return f"Error: {exc}"


def write_tools(
    workdir: str | os.PathLike[str], store: MemoryStore, protected: Sequence[Path] = ()
) -> list[BaseTool]:
    """`write_file` and `edit_file` over `workdir` (see the module docstring)."""
    writer = WorkdirWriter(workdir, store, protected)

    def write_file(
        path: str, content: str, tool_call_id: Annotated[str, InjectedToolCallId] = ""
    ) -> str:
        """Create or overwrite a text file of the workdir with `content` (the whole file).

        The previous content of an existing file is kept in memory first.
        """
        return _answer(writer.write_file, path, content, tool_call_id)

    def edit_file(
        path: str, old: str, new: str, tool_call_id: Annotated[str, InjectedToolCallId] = ""
    ) -> str:
        """Replace the exact text `old` (which must occur once) with `new` in a workdir file.

        The previous content is kept in memory first.
        """
        return _answer(writer.edit_file, path, old, new, tool_call_id)

    return [
        StructuredTool.from_function(func=fn, name=fn.__name__, description=fn.__doc__ or "")
        for fn in (write_file, edit_file)
    ]
