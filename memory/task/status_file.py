"""STATUS.md: where a project's memory is, for a person or an agent opening the project.

`write_status_file()` renders one marked block about one task (phase and outcome, its latest
checkpoint, plan, snapshot and findings, what is left; never another task's) and the memory
entries grouped by the directory they are linked to, each with its id, and puts it into a
`STATUS.md`:

* the file does not exist: it is created with the block alone;
* it has the block: only the block is replaced, every line a person wrote above or below it
  stays byte for byte;
* it has no block: the block is appended after the person's text.

Everything comes from the memory's documents (checkpoint JSON, plans, snapshots) and its
entries, on whatever backend the store has, so the block is true of the memory at the moment
it is written. Writing twice
with nothing changed leaves the file identical (no clock in the block). The write is atomic
and happens under the backend's mutex, so two writers never interleave.

The block is valid Markdown whatever the names and summaries hold: every value shown as
code is a code span fenced with more backticks than it contains (`md_code`), and every
command it suggests works when pasted, from any directory (values shell-quoted, the memory
named by `--memory-dir` or `--memory-url`).
"""

from __future__ import annotations

import json
import os
import re
import shlex
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memory.contract.base import DocumentInfo
from memory.durable import atomic_write_text
from memory.errors import InvalidInputError, MemoryStoreError

BEGIN = "<!-- tether:status:begin (rewritten by `memory status-file`; edit outside this block) -->"
END = "<!-- tether:status:end -->"
FILE_NAME = "STATUS.md"
ENTRIES_PER_DIRECTORY = 10
_BLOCK = re.compile(re.escape(BEGIN.split(" (")[0]) + r".*?" + re.escape(END), re.DOTALL)
_TS = re.compile(r"_(\d{8}T\d{6,12}Z)")
_SNAPSHOT_META = re.compile(r"<!-- tether:snapshot (\{.*?\}) -->\s*\Z", re.DOTALL)
_LONGEST_TICKS = re.compile(r"`+")

__all__ = ["END", "BEGIN", "FILE_NAME", "StatusInfo", "gather_status", "md_code",
           "render_block", "write_status_file"]  # fmt: skip


@dataclass
class StatusInfo:
    """What the block says."""

    memory_root: str
    """The memory directory, or the backend's URL (without its password)."""
    task_id: str | None = None
    checkpoint: dict[str, Any] | None = None
    checkpoint_path: str | None = None
    plan: str | None = None
    snapshot: str | None = None
    findings: int = 0
    """Findings files of the task's subagents, as its latest checkpoint records them."""
    merged: int = 0
    """Merged findings files of the task (one per phase, and the final one)."""
    entries: dict[str, list[Any]] = field(default_factory=dict)
    """Entries by directory (`None`: linked to no directory), newest first."""
    total_entries: int = 0
    url: bool = False
    """True when the memory is a backend URL rather than a directory."""


def _newest(docs: list[str]) -> list[str]:
    """Document paths newest first, by the UTC timestamp in their names (then by name)."""

    def key(doc: str) -> tuple[str, str]:
        name = doc.rsplit("/", 1)[-1]
        m = _TS.search(name)
        return (m.group(1) if m else "", name)

    return sorted(docs, key=key, reverse=True)


def _read_checkpoint(backend: Any, doc: str) -> dict[str, Any] | None:
    try:
        data = json.loads(backend.read_text(doc) or "")
    except (UnicodeDecodeError, ValueError):
        return None  # a torn or corrupt checkpoint is not a status
    return data if isinstance(data, dict) and isinstance(data.get("task_id"), str) else None


def _names(backend: Any, folder: str, prefix: str, suffix: str) -> list[DocumentInfo]:
    """Documents directly in `folder` named `prefix*suffix`."""
    return [
        info
        for info in backend.list_documents(folder + "/")
        if "/" not in info.path[len(folder) + 1 :]
        and info.path.rsplit("/", 1)[1].startswith(prefix)
        and info.path.endswith(suffix)
    ]


def gather_status(
    store: Any, task_id: str | None = None, *, latest: str | None = None
) -> StatusInfo:
    """Read what STATUS.md should say about `task_id` (default: the latest checkpoint's task).

    `latest`: the checkpoint document the caller has just written for `task_id` (a run
    refreshing the file after its checkpoint), read instead of listing every checkpoint of
    the memory to find the newest.
    """
    backend = store.backend
    info = StatusInfo(memory_root=store.location)
    data = _read_checkpoint(backend, latest) if latest is not None else None
    if data is not None and (task_id is None or data["task_id"] == task_id):
        info.checkpoint, info.checkpoint_path = data, latest
    else:  # the newest valid checkpoint of the task among all of them
        for doc in _newest([i.path for i in _names(backend, "checkpoints", "cp_", ".json")]):
            data = _read_checkpoint(backend, doc)
            if data is not None and (task_id is None or data["task_id"] == task_id):
                info.checkpoint, info.checkpoint_path = data, doc
                break
    info.task_id = task_id or (info.checkpoint or {}).get("task_id")
    plans = _names(backend, "research_plans", "", ".md")
    if info.task_id is None and plans:
        info.task_id = max(plans, key=lambda i: i.mtime).path.rsplit("/", 1)[1][:-3]
    if info.task_id and any(p.path == f"research_plans/{info.task_id}.md" for p in plans):
        info.plan = f"research_plans/{info.task_id}.md"
    if task_id is not None and info.checkpoint is None and info.plan is None:
        _check_known(backend, task_id)
    if info.task_id:
        info.snapshot = _task_snapshot(backend, info.task_id, info.checkpoint)
    info.findings, info.merged = _findings_counts(info.checkpoint)
    groups: dict[Any, list[Any]] = defaultdict(list)
    for entry in store.list_entries(limit=None):
        groups[entry.directory or None].append(entry)
    info.entries = dict(sorted(groups.items(), key=lambda item: (item[0] is None, item[0] or "")))
    info.total_entries = sum(len(group) for group in groups.values())
    info.url = not store.location.startswith("/")
    return info


def _check_known(backend: Any, task_id: str) -> None:
    """Refuse a task the memory knows nothing of (no record, checkpoint or plan)."""
    try:
        if backend.get_task(task_id) is not None:
            return
    except (MemoryStoreError, ValueError):
        pass  # not even a valid id
    known = [t.task_id for t in backend.list_tasks()[:5]]
    raise InvalidInputError(
        f"unknown task {task_id!r}: this memory has no record, checkpoint or plan of it; "
        f"known: {', '.join(known) or 'none'}"
    )


def _findings_counts(cp: dict[str, Any] | None) -> tuple[int, int]:
    """(subagents' findings files, merged files) of the checkpoint's task."""
    if cp is None:
        return 0, 0
    extra = cp.get("extra") if isinstance(cp.get("extra"), dict) else {}
    done = cp.get("completed_findings")
    files = set(done.values()) if isinstance(done, dict) else set()
    files |= {f for f in cp.get("findings") or [] if isinstance(f, str)}
    merged = extra.get("merged")
    # a checkpoint lists its own wave's files and counts the task's findings
    count = max(len(files), int((cp.get("state") or {}).get("findings_count") or 0))
    return count, len(set(merged.values())) if isinstance(merged, dict) else 0


def _task_snapshot(backend: Any, task_id: str, cp: dict[str, Any] | None) -> str | None:
    """The task's newest context snapshot: one its checkpoint lists, or a newer one that
    names the task (written on request since); never another task's. Only snapshots newer
    than the newest listed one and than the task's start are read."""
    extra = (cp or {}).get("extra")
    listed = set((extra.get("snapshots") if isinstance(extra, dict) else None) or [])
    started = _started(backend, task_id)
    for doc in _newest([i.path for i in _names(backend, "context_snapshots", "snap_", ".md")]):
        if doc in listed:
            return doc
        stamp = _TS.search(doc.rsplit("/", 1)[-1])
        if started and stamp and stamp.group(1)[:15] < started:
            return None  # older than the task: none of the rest is its own
        if _snapshot_task(backend, doc) == task_id:
            return doc
    return None


def _started(backend: Any, task_id: str) -> str | None:
    """When the task started, as a snapshot name's time (`20261123T100000`), if recorded."""
    try:
        record = backend.get_task(task_id)
    except (MemoryStoreError, ValueError):
        return None
    created = str(((record.data if record is not None else None) or {}).get("created") or "")
    digits = re.sub(r"[^0-9T]", "", created.split(".")[0].split("+")[0])
    return digits if re.fullmatch(r"\d{8}T\d{6}", digits) else None


def _snapshot_task(backend: Any, doc: str) -> str | None:
    try:
        found = _SNAPSHOT_META.search(backend.read_text(doc) or "")
        meta = json.loads(found.group(1)) if found else None
    except (UnicodeDecodeError, ValueError):
        return None
    return meta.get("task_id") if isinstance(meta, dict) else None


def md_code(text: str) -> str:
    """`text` as one Markdown code span, valid whatever backticks it holds (CommonMark:
    fenced by one backtick more than its longest run, padded when it starts or ends with
    one). Line breaks become spaces."""
    text = " ".join(str(text).split("\n"))
    fence = "`" * (max((len(run) for run in _LONGEST_TICKS.findall(text)), default=0) + 1)
    if text.startswith("`") or text.endswith("`"):
        text = f" {text} "
    return f"{fence}{text}{fence}"


def _state_lines(cp: dict[str, Any]) -> list[str]:
    state = cp.get("state") or {}
    pending = list(state.get("pending_subtasks") or [])
    blocked = list(state.get("blocked_agents") or [])
    lines = [
        f"- Completed subtasks: {len(state.get('completed_subtasks') or [])}, "
        f"pending: {len(pending)}, failed or blocked: {len(blocked)}"
    ]
    lines += [f"- Pending: {md_code(p)}" for p in pending[:20]]
    lines += [
        f"- Blocked: {md_code(b if isinstance(b, str) else json.dumps(b))}" for b in blocked[:20]
    ]
    if cp.get("next_action"):
        lines.append(f"- Next action: {' '.join(str(cp['next_action']).split())}")
    return lines


def _command(info: StatusInfo, *words: str) -> str:
    """A command naming this memory, shell-quoted: it works when pasted anywhere."""
    where = ("--memory-url" if info.url else "--memory-dir", info.memory_root)
    return md_code(shlex.join([*words, *where]))


def render_block(info: StatusInfo) -> str:
    """The marked block, markdown, deterministic for the same memory."""
    where = "Memory backend" if info.url else "Memory directory"
    out = [BEGIN, "## tether memory", "", f"- {where}: {md_code(info.memory_root)}"]
    if info.task_id is None:
        out.append("- No task has run with this memory yet.")
    else:
        out.append(f"- Task: {md_code(info.task_id)}")
    cp = info.checkpoint
    if cp is not None:
        out.append(f"- Phase: {cp.get('phase')} (latest checkpoint {cp.get('timestamp')})")
        report = _command(info, "orchestrator", "checkpoint", "report", "--task", info.task_id)
        out.append(f"- Latest checkpoint: {md_code(info.checkpoint_path)} ({report})")
    if info.plan:
        out.append(f"- Research plan: {md_code(info.plan)}")
    if info.snapshot:
        out.append(f"- Latest context snapshot: {md_code(info.snapshot)}")
    if cp is not None:
        out.append(
            f"- Findings files of this task: {info.findings} by subagents, {info.merged} merged"
        )
        out += ["", "### Where the task stands", "", *_state_lines(cp)]
    out += ["", "### Memory entries by directory", ""]
    if not info.entries:
        out.append("No entries yet (`memory log --help` shows how to store a command's output).")
    for directory, entries in info.entries.items():
        name = md_code(directory) if directory is not None else "No directory"
        out.append(f"- {name} ({len(entries)} entries)")
        out += [
            f"  - {md_code(e.id)}: {md_code(e.reference.removeprefix(e.id + ': '))}"
            for e in entries[:ENTRIES_PER_DIRECTORY]
        ]
        if len(entries) > ENTRIES_PER_DIRECTORY:
            more = len(entries) - ENTRIES_PER_DIRECTORY
            if directory is not None:
                listing = _command(
                    info, "memory", "list", "--directory", directory, "--limit", str(len(entries))
                )
                out.append(f"  - ... {more} more: {listing}")
            else:
                listing = _command(info, "memory", "list", "--limit", str(info.total_entries))
                out.append(f"  - ... {more} more, among every entry: {listing}")
    if info.entries:
        newest = max((e for group in info.entries.values() for e in group), key=_created)
        fetch = _command(info, "memory", "fetch", newest.id, "--summary-only")
        out += ["", f"An entry's content: {fetch} (or `--chunk N`, or without either)."]
    out.append(END)
    return "\n".join(out) + "\n"


def _created(entry: Any) -> tuple[str, str]:
    return (str(entry.created_at), entry.id)


def _merge(existing: str, block: str) -> str:
    if _BLOCK.search(existing):
        return _BLOCK.sub(lambda _m: block.rstrip("\n"), existing, count=1)
    if not existing:
        return block
    return existing + ("" if existing.endswith("\n") else "\n") + "\n" + block


def write_status_file(
    store: Any,
    path: str | os.PathLike[str] | None = None,
    *,
    task_id: str | None = None,
    latest: str | None = None,
) -> Path:
    """Write or refresh the status block in `path` (a file, or a folder for its STATUS.md).

    Args:
        store: the `MemoryStore` to describe.
        path: where to write; default `./STATUS.md`.
        task_id: the task to describe; default the task of the latest checkpoint.
        latest: the checkpoint document just written for `task_id` (see `gather_status`).

    Raises:
        InvalidInputError: `path` is in a folder that does not exist, the existing file is
            not UTF-8 text (it is left as it was), or the memory knows no task `task_id`.
    """
    target = Path(path) if path is not None else Path(FILE_NAME)
    if target.is_dir():
        target = target / FILE_NAME
    if not target.parent.is_dir():
        raise InvalidInputError(
            f"cannot write {str(target)!r}: folder {str(target.parent)!r} does not exist"
        )
    block = render_block(gather_status(store, task_id, latest=latest))
    with store.backend.mutex(FILE_NAME):
        try:
            existing = target.read_text(encoding="utf-8") if target.exists() else ""
        except UnicodeDecodeError:
            raise InvalidInputError(
                f"{str(target)!r} is not UTF-8 text; move it aside or name another file"
            ) from None
        merged = _merge(existing, block)
        if merged != existing:
            atomic_write_text(target, merged)
    return target
