"""Context snapshots: `context_snapshots/snap_{ts}.md`, one per handoff (token threshold,
`handoff`, `snapshot`).

`write_snapshot` renders `snapshot.md.j2` from a `SnapshotInput`; `read_snapshot` parses
one back into what a fresh lead needs to resume (from its metadata line, or from the
markdown of a snapshot a person wrote in the same layout); `list_snapshots` lists them
newest first. What goes into a snapshot's digests is `orchestrator.artifacts.snapshot_content`'s.

Invariant: a write leaves a complete new file under a fresh name or nothing; a snapshot is
never overwritten.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import Field, field_validator

from orchestrator.artifacts.documents import CONTEXT_SNAPSHOTS, Docs
from orchestrator.artifacts.names import iso_timestamp, utc
from orchestrator.artifacts.names import (
    timestamp as _stamp,  # the writer has a parameter `timestamp`
)
from orchestrator.artifacts.render import (
    FileNoteInput,
    Pathish,
    _blocks,
    _file_views,
    _Input,
    _pairs,
    md_block,
    md_code,
    md_inline,
    render_template,
    validate_input,
)
from orchestrator.artifacts.text import _name, _newest_first, _read_text, parse_meta, sections
from orchestrator.errors import SnapshotError
from orchestrator.types import JsonObject

if TYPE_CHECKING:
    from orchestrator.artifacts.documents import MemoryTarget

SNAPSHOT_TEMPLATE = "snapshot.md.j2"
_LABEL = re.compile(r"^\*\*(?P<label>[^*]+)\*\*: ?(?P<value>.*)$", re.MULTILINE)
_STATE_ITEM = re.compile(r"^- (?P<key>Task|Objective|Phase|Agents|Plan): ?(?P<value>.*)$", re.M)
SNAPSHOT_KEYS = ("task_id", "phase", "objective", "reason", "token_count", "timestamp", "plan_path")


class SnapshotInput(_Input):
    """Everything `snapshot.md.j2` shows."""

    task_id: str
    phase: str
    reason: str = "manual"
    token_count: int = Field(default=0, ge=0)
    timestamp: str
    objective: str | None = None
    conversation_summary: str = ""
    what_was_found: str = ""
    what_is_left: str = ""
    active_agents: list[str] = Field(default_factory=list)
    important_context: str = ""
    files_in_play: list[FileNoteInput] = Field(default_factory=list)
    decisions: list[str] = Field(default_factory=list)
    """Decisions people made (approvals, rejections), one line each."""
    pending_decisions: list[str] = Field(default_factory=list)
    resume_instructions: str = ""
    plan_path: str | None = None
    extra: JsonObject = Field(default_factory=dict)

    @field_validator("files_in_play", mode="before")
    @classmethod
    def _files(cls, value: Any) -> Any:
        return _pairs(value, "path", "description")


def render_snapshot(
    data: SnapshotInput | Mapping[str, Any], project_dir: Pathish | None = None
) -> str:
    """The context snapshot markdown."""
    inp = validate_input(SnapshotInput, SNAPSHOT_TEMPLATE, data)
    return render_template(
        SNAPSHOT_TEMPLATE,
        project_dir,
        timestamp=md_inline(inp.timestamp),
        token_count=inp.token_count,
        reason=md_inline(inp.reason),
        conversation_summary=md_block(inp.conversation_summary),
        what_was_found=md_block(inp.what_was_found),
        what_is_left=md_block(inp.what_is_left),
        task_id=md_inline(inp.task_id),
        objective=md_block(inp.objective or ""),
        phase=md_inline(inp.phase),
        active_agents=[md_inline(a) for a in inp.active_agents],
        plan_path=inp.plan_path or "",
        plan_code=md_code(inp.plan_path) if inp.plan_path else "",
        important_context=md_block(inp.important_context),
        files_in_play=_file_views(inp.files_in_play),
        decisions=_blocks(inp.decisions),
        pending_decisions=_blocks(inp.pending_decisions),
        resume_instructions=md_block(inp.resume_instructions),
        meta=inp.model_dump(mode="json"),
    )


def write_snapshot(
    memory: MemoryTarget,
    *,
    task_id: str,
    phase: str,
    reason: str = "manual",
    token_count: int = 0,
    conversation_summary: str = "",
    what_was_found: str = "",
    what_is_left: str = "",
    active_agents: Iterable[str] = (),
    important_context: str = "",
    files_in_play: Iterable[Any] = (),
    pending_decisions: Iterable[str] = (),
    resume_instructions: str | Callable[[str], str] = "",
    plan_path: str | None = None,
    extra: Mapping[str, object] | None = None,
    objective: str | None = None,
    timestamp: datetime | str | None = None,
    project_dir: Pathish | None = None,
    decisions: Iterable[str] = (),
) -> Path:
    """Create `context_snapshots/snap_{ts}.md`; returns its path.

    Args:
        reason: `token_limit`, `manual`, `phase_end`, ...
        token_count: the lead's context size when the snapshot was taken.
        what_was_found, what_is_left: digests of the findings and of the remaining work
            (markdown; `orchestrator.artifacts.snapshot_content` assembles them).
        files_in_play: `(path, status)` pairs or dicts.
        pending_decisions: what waits for a person (approvals, subtasks to run).
        decisions: the decisions people made (approvals and rejections, with their
            messages), one line each.
        resume_instructions: markdown, or a function of the snapshot's own path (as the
            memory names it: the file on a memory directory) for instructions that name
            the file itself, such as `--from-snapshot PATH`.
        plan_path: the research plan, relative to the memory directory.
        extra: any JSON-able values a resumer needs (kept in the metadata block).
        objective: the task objective (also accepted as `extra["objective"]`).
    """
    extra = dict(extra or {})
    if objective is None and isinstance(extra.get("objective"), str):
        objective = extra["objective"]
    when = utc(timestamp)
    docs = Docs.of(memory)
    values = {
        "task_id": task_id,
        "phase": phase,
        "reason": reason,
        "token_count": token_count,
        "timestamp": iso_timestamp(when),
        "objective": objective,
        "conversation_summary": conversation_summary,
        "what_was_found": what_was_found,
        "what_is_left": what_is_left,
        "active_agents": list(active_agents),
        "important_context": important_context,
        "files_in_play": list(files_in_play),
        "decisions": list(decisions),
        "pending_decisions": list(pending_decisions),
        "plan_path": plan_path,
        "extra": extra,
    }

    def text(stem: str) -> str:  # the instructions may name the file a free name gives
        own = str(docs.path(f"{CONTEXT_SNAPSHOTS}/{stem}.md"))
        steps = resume_instructions(own) if callable(resume_instructions) else resume_instructions
        return render_snapshot({**values, "resume_instructions": steps}, project_dir)

    return docs.create_unique(CONTEXT_SNAPSHOTS, f"snap_{_stamp(when)}", ".md", text)


def read_snapshot(path: Path, docs: Docs | None = None) -> JsonObject:
    """Parse a snapshot back into what a fresh lead needs to resume.

    Returns a dict with `task_id`, `phase`, `objective`, `reason`, `token_count`,
    `timestamp`, `active_agents`, `plan_path`, `extra`, the other written values,
    `sections` (title -> markdown body, including a person's edits), `text` and `path`.
    A snapshot without tether's metadata block (written by hand in the same markdown layout)
    is parsed from its markdown; values it does not show are None.

    Raises:
        SnapshotError: missing, unreadable, or not a snapshot at all.
    """
    text = _read_text(path, "snapshot", SnapshotError, docs)
    meta = parse_meta(text, "snapshot")
    if meta is None:
        meta = _parse_snapshot_markdown(text, Path(path))
    base = dict.fromkeys(SNAPSHOT_KEYS)
    base["extra"], base["active_agents"] = {}, []
    return {**base, **meta, "sections": sections(text), "text": text, "path": str(path)}


def _parse_snapshot_markdown(text: str, path: Path) -> JsonObject:
    if not re.search(r"^# Context Snapshot\s*$", text, re.MULTILINE):
        raise SnapshotError(
            f"snapshot {str(path)!r} is not a context snapshot (no '# Context Snapshot' "
            "heading and no tether metadata); pass a context_snapshots/snap_*.md file"
        )
    labels = {
        m.group("label").strip().lower(): m.group("value").strip() for m in _LABEL.finditer(text)
    }
    state = sections(text).get("Current State", "")
    items = {m.group("key").lower(): m.group("value").strip() for m in _STATE_ITEM.finditer(state)}
    tokens = re.sub(r"[^0-9]", "", labels.get("token count", ""))
    agents = items.get("agents", "")
    return {
        "task_id": items.get("task") or labels.get("task") or None,
        "phase": items.get("phase") or None,
        "objective": items.get("objective") or None,
        "reason": labels.get("reason") or None,
        "token_count": int(tokens) if tokens else None,
        "timestamp": labels.get("timestamp") or None,
        "active_agents": [a.strip() for a in agents.split(",") if a.strip() and agents != "none"],
        "plan_path": items.get("plan", "").strip("`") or None,
        "extra": {},
    }


def list_snapshots(memory: MemoryTarget) -> list[Path]:
    """Snapshot files, newest first (by the time in the name)."""
    docs = Docs.of(memory)
    found = [i for i in docs.list(CONTEXT_SNAPSHOTS, ".md") if _name(i).startswith("snap_")]
    return _newest_first(docs, found)
