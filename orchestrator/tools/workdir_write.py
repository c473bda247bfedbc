"""Opt-in tools that change the workdir: `write_file(path, content)` and
`edit_file(path, old, new)`.

An agent gets them only when its workflow spec lists them (the default workflow is
read-only). The rules:

* **Confined.** Paths go through `memory.paths.confine` like the read tools (no absolute
  paths, no `..`, no symlink leading out); what `read_file` refuses by name (a path through
  one of its skipped folders such as `.git/` or `node_modules/`, a credentials file that a
  rule of `orchestrator.config.secret_files` keeps from agents, whose previous content
  would otherwise be kept in the memory) and the
  memory directory (or LangGraph's database beside it) are refused, and so is what the run
  itself reads and executes when it lies in the workdir (the workflow file, its prompt
  files, the `python_tools` modules, the project's `skills/` and `templates/`). The file is
  then opened from the workdir's descriptor, folder by folder, without following a link
  (`orchestrator.tools._dirfd`), so a folder swapped for a link after the check is refused;
  only regular files are read or replaced (a FIFO or a device is refused without blocking).
* **Nothing is lost.** Before a file is overwritten or edited, its previous content is
  logged as a memory entry (type `context`, tags `previous-content`, `file:PATH`, `call:ID`
  and the writer's `task:`, `agent:` and `subtask:`, linked to the workdir), so it is
  searchable and `memory fetch` returns it byte for byte. The answer names the entry:
  `Modified PATH; previous content: mem-...`. One lock per file (a `filelock` outside the
  workdir, so across processes too) is held from the read of the old content to the rename:
  parallel writers of one file each back up what they replace.
* **Once per tool call.** The entry carries the call's id: a call replayed after a crash or
  an approval (LangGraph re-runs an interrupted step) finds its entry and only makes sure
  the file holds what the call asked for, without a second backup. A provider's call ids
  may repeat (`call_0`), so the entry must also be this task's, agent's and subtask's and
  this file's, and the file must hold either the backed-up content or the call's result;
  anything else is a write of its own, backed up anew.
* **Atomic.** Files are written to a temp file beside them, fsynced, renamed over (mode
  kept).
* **Errors are answers**: `Error: ...` lines the agent can act on (text not found, found
  several times, a binary file, a path refused).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NamedTuple, TypedDict

from filelock import FileLock, Timeout
from langchain_core.tools import InjectedToolCallId, StructuredTool

from memory.contract.entries import PREVIOUS_CONTENT_TAG
from memory.errors import PathEscapeError
from memory.paths import confine
from orchestrator.config.secret_files import SecretFiles, kept_message
from orchestrator.config.settings import check_workdir
from orchestrator.tools._dirfd import held_parent, read_at, replace_at
from orchestrator.tools.workdir import BINARY_SUFFIXES, SKIP_DIRS, has_nul

if TYPE_CHECKING:
    from langchain_core.tools import BaseTool

    from memory.store import MemoryStore

BACKUP_TAG = PREVIOUS_CONTENT_TAG  # `memory prune` never removes these
BACKUP_TYPE = "context"
MAX_WRITE_BYTES = 10_000_000
LOCK_TIMEOUT_S = 60.0
"""Seconds a write waits for another writer of the same file (another agent, process)."""


class WriteOutcome(TypedDict):
    """What a write tool did, carried beside its answer as the `ToolMessage`'s `artifact`
    (the tools' `response_format="content_and_artifact"`): the files an agent wrote are
    read from these (`orchestrator.graph.written.files_written`), never from the
    answer's words."""

    path: str
    """The file, relative to the workdir (it may hold a newline)."""
    change: str
    """`created`, `modified` or `unchanged`."""
    previous: str
    """The memory entry holding the content before the change (`modified` only)."""


def change_note(outcome: WriteOutcome) -> str | None:
    """How a findings file lists the change: `created`, `modified; previous content: ID`,
    or None for a file left unchanged."""
    if outcome["change"] == "created":
        return "created"
    if outcome["change"] == "modified":
        return f"modified; previous content: {outcome['previous']}"
    return None


#: What a write answers: the text the model sees, and what it did.
Answer = tuple[str, WriteOutcome | None]


class WriteScope(NamedTuple):
    """Who writes: a tool call's id is the provider's, unique only within one agent's run,
    so a replay is looked up among this task's, agent's and subtask's backups."""

    task: str
    agent: str
    subtask: str

    def tags(self) -> list[str]:
        return [f"task:{self.task}", f"agent:{self.agent}", f"subtask:{self.subtask}"]


def lock_dir() -> Path:
    """Where the per-file write locks live (outside the workdir, shared by this user's
    processes on this machine)."""
    uid = os.getuid() if hasattr(os, "getuid") else 0
    return Path(tempfile.gettempdir()) / f"tether-{uid}" / "write-locks"


class WorkdirWriter:
    """The logic of the two tools, as plain methods returning the agent's answer and what
    the write did (`Answer`: its text and a `WriteOutcome`).

    Args:
        root: the workdir.
        store: the memory that keeps previous contents.
        protected: folders inside which nothing is written (the memory directory).
        guarded: `(path, what it is)` of the files and folders of the run itself (its
            workflow file, prompt files, Python tool modules, the project's skills and
            templates) that an agent must not change: the next run would execute them.
        scope: the task, agent and subtask the tools write for (replays are theirs only).
        secret_files: the workflow's own patterns of files kept from agents.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        store: MemoryStore,
        protected: Sequence[Path] = (),
        *,
        guarded: Sequence[tuple[Path, str]] = (),
        scope: WriteScope | None = None,
        secret_files: Sequence[str] = (),
    ) -> None:
        self.root = check_workdir(root)
        self.secrets = SecretFiles(secret_files)
        self.store = store
        self.protected = [Path(p).resolve() for p in protected]
        self.guarded = [(Path(p).resolve(), what) for p, what in guarded]
        self.scope = scope

    # -- paths ------------------------------------------------------------------------
    def _target(self, user_path: str) -> tuple[Path, str]:
        raw = (user_path or "").strip()
        if not raw or raw in (".", "./"):
            raise PathEscapeError("give the path of a file, relative to the workdir")
        target = confine(self.root, raw, label="the workdir")
        rel = target.relative_to(self.root).as_posix()
        parts = Path(rel).parts
        if ".git" in parts:
            raise PathEscapeError(f"path {raw!r} is inside .git/; tether never writes there")
        if any(p in SKIP_DIRS for p in parts[:-1]):
            raise PathEscapeError(
                f"path {raw!r} is excluded from the file tools (tool or VCS folder); "
                "the write tools refuse what read_file refuses"
            )
        rule = self.secrets.rule(parts) or self.secrets.rule(Path(raw).parts)
        if rule is not None:
            raise PathEscapeError(kept_message(raw, rule))
        for folder in self.protected:
            if target == folder or folder in target.parents:
                raise PathEscapeError(
                    f"path {raw!r} is inside tether's memory directory; "
                    "use the memory_* tools for memory files"
                )
        for path, what in self.guarded:
            if target == path or path in target.parents:
                raise PathEscapeError(
                    f"path {raw!r} is {what}; an agent never changes what the run itself "
                    "reads and executes"
                )
        if target.is_dir():
            raise IsADirectoryError(f"path {raw!r} is a folder; give a file path")
        return target, rel

    def _lock(self, target: Path) -> FileLock:
        folder = lock_dir()
        folder.mkdir(parents=True, exist_ok=True)
        key = hashlib.sha256(os.fsencode(target)).hexdigest()[:32]
        return FileLock(str(folder / f"{key}.lock"), timeout=LOCK_TIMEOUT_S)

    # -- backups ----------------------------------------------------------------------
    def _scope_tags(self) -> list[str]:
        return self.scope.tags() if self.scope is not None else []

    def _backup_of(self, call_id: str, rel: str) -> str | None:
        """The entry this tool call logged before for this file (a replayed call), if any:
        one with the call's id, this task, agent and subtask, and this file."""
        if not call_id:
            return None
        wanted = {f"file:{rel}", *self._scope_tags()}
        for entry in self.store.list_entries(tag=f"call:{call_id}", limit=None):
            if BACKUP_TAG in entry.tags and wanted <= set(entry.tags):
                return entry.id
        return None

    def _backup(self, rel: str, old: str, call_id: str) -> str:
        tags = [BACKUP_TAG, f"file:{rel}", *self._scope_tags()]
        tags += [f"call:{call_id}"] if call_id else []
        entry = self.store.log(old, tags=tags, type=BACKUP_TYPE, directory=str(self.root))
        return entry.id

    # -- the file ---------------------------------------------------------------------
    def _parts(self, rel: str) -> list[str]:
        return list(Path(rel).parts)

    def _read(self, target: Path, rel: str, raw: str) -> tuple[str, int] | None:
        """`(text, mode)` of the file, None when it does not exist."""
        if target.suffix.lower() in BINARY_SUFFIXES:
            raise ValueError(f"{raw!r} is a binary file; write_file and edit_file change text")
        try:
            with held_parent(self.root, self._parts(rel), raw) as parent:
                found = read_at(parent, self._parts(rel)[-1], MAX_WRITE_BYTES, raw)
        except FileNotFoundError:
            return None
        if found is None:
            return None
        data, mode = found
        if has_nul(data):
            raise ValueError(f"{raw!r} is a binary file; write_file and edit_file change text")
        try:
            return data.decode("utf-8"), mode
        except UnicodeDecodeError:
            raise ValueError(f"{raw!r} is not UTF-8 text; it is left as it is") from None

    def _write(self, rel: str, raw: str, text: str, mode: int | None) -> int:
        data = text.encode("utf-8", errors="replace")
        if len(data) > MAX_WRITE_BYTES:
            raise ValueError(f"content of {len(data)} bytes is over {MAX_WRITE_BYTES}")
        parts = self._parts(rel)
        with held_parent(self.root, parts, raw, create=True) as parent:
            # what was checked is what is replaced: a link put there since is refused
            read_at(parent, parts[-1], MAX_WRITE_BYTES, raw)
            replace_at(parent, parts[-1], data, mode)
        return len(data)

    # -- the tools --------------------------------------------------------------------
    def write_file(self, path: str, content: str, call_id: str = "") -> Answer:
        target, rel = self._target(path)
        with self._held(target, path):
            found = self._read(target, rel, path)
            done = self._backup_of(call_id, rel)
            if done is not None and found is not None:
                if found[0] == content:  # a replay: the write happened
                    return _modified(rel, done)
                if found[0] == self.store.fetch(done):  # a replay: it did not happen yet
                    self._write(rel, path, content, found[1])
                    return _modified(rel, done)
                # else: the file changed since; this is a write of its own, backed up anew
            if found is not None:
                old, mode = found
                if old == content:
                    text = f"Unchanged {rel}: it already holds this content."
                    return text, WriteOutcome(path=rel, change="unchanged", previous="")
                entry = self._backup(rel, old, call_id)
                self._write(rel, path, content, mode)
                return _modified(rel, entry)
            size = self._write(rel, path, content, None)
            return f"Created {rel} ({size} bytes).", WriteOutcome(
                path=rel, change="created", previous=""
            )

    def edit_file(self, path: str, old: str, new: str, call_id: str = "") -> Answer:
        target, rel = self._target(path)
        if not old:
            raise ValueError("'old' is empty; give the exact text to replace")
        with self._held(target, path):
            found = self._read(target, rel, path)
            if found is None:
                raise FileNotFoundError(f"{path!r} does not exist; create it with write_file")
            text, mode = found
            done = self._backup_of(call_id, rel)
            if done is not None:
                before = self.store.fetch(done)
                wanted = before.replace(old, new, 1)
                if text == wanted:  # a replay: the edit happened
                    return _modified(rel, done)
                if text == before:  # a replay: it did not happen yet
                    self._write(rel, path, wanted, mode)
                    return _modified(rel, done)
                # else: the file changed since; edit what it holds now, backed up anew
            count = text.count(old)
            if count == 0:
                raise ValueError(f"the text to replace was not found in {rel}; read the file first")
            if count > 1:
                raise ValueError(
                    f"the text to replace occurs {count} times in {rel}; include more of the "
                    "surrounding lines so it is unique"
                )
            entry = self._backup(rel, text, call_id)
            self._write(rel, path, text.replace(old, new, 1), mode)
            return _modified(rel, entry)

    @contextlib.contextmanager
    def _held(self, target: Path, raw: str) -> Iterator[None]:
        """The file's write lock, held from the read of its old content to the rename."""
        lock = self._lock(target)
        try:
            lock.acquire()
        except Timeout:
            raise OSError(
                f"{raw!r} is being written by another agent or process for over "
                f"{LOCK_TIMEOUT_S:.0f} s; try again"
            ) from None
        try:
            yield
        finally:
            lock.release()


def _modified(rel: str, entry: str) -> Answer:
    text = (
        f"Modified {rel}; previous content: {entry} "
        "(memory_fetch returns it; the change is listed in the findings)."
    )
    return text, WriteOutcome(path=rel, change="modified", previous=entry)


def _answer(fn: Any, *args: Any) -> Answer:
    try:
        return fn(*args)
    except (OSError, ValueError, PathEscapeError) as exc:
        return f"Error: {exc}", None


def write_tools(
    workdir: str | os.PathLike[str],
    store: MemoryStore,
    protected: Sequence[Path] = (),
    *,
    guarded: Sequence[tuple[Path, str]] = (),
    scope: WriteScope | None = None,
    secret_files: Sequence[str] = (),
) -> list[BaseTool]:
    """`write_file` and `edit_file` over `workdir` (see the module docstring and
    `WorkdirWriter` for the arguments)."""
    writer = WorkdirWriter(
        workdir, store, protected, guarded=guarded, scope=scope, secret_files=secret_files
    )

    def write_file(
        path: str, content: str, tool_call_id: Annotated[str, InjectedToolCallId] = ""
    ) -> Answer:
        """Create or overwrite a text file of the workdir with `content` (the whole file).

        The previous content of an existing file is kept in memory first.
        """
        return _answer(writer.write_file, path, content, tool_call_id)

    def edit_file(
        path: str, old: str, new: str, tool_call_id: Annotated[str, InjectedToolCallId] = ""
    ) -> Answer:
        """Replace the exact text `old` (which must occur once) with `new` in a workdir file.

        The previous content is kept in memory first.
        """
        return _answer(writer.edit_file, path, old, new, tool_call_id)

    tools = []
    for fn in (write_file, edit_file):
        tool = StructuredTool.from_function(
            func=fn,
            name=fn.__name__,
            description=fn.__doc__ or "",
            args_schema=_ARGS_SCHEMAS.get(fn.__name__),
            response_format="content_and_artifact",
        )
        _ARGS_SCHEMAS.setdefault(fn.__name__, tool.args_schema)
        tools.append(tool)
    return tools


#: The arguments models of the two tools, inferred once: the tools are built per subagent
#: (for its scope), and a compiled agent is shared by tools of the same arguments model.
_ARGS_SCHEMAS: dict[str, Any] = {}
