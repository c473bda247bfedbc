"""The markdown files the orchestrator leaves in the memory directory (seed 002).

* `research_plans/{task_id}.md`: one per task, rewritten in place as work progresses.
* `findings/{agent}_{ts}.md`: one per finished subagent.
* `findings/merged_{ts}.md`: one per merged batch.
* `context_snapshots/snap_{ts}.md`: one per handoff (token threshold or `handoff`).

`ts` is UTC `YYYYMMDDTHHMMSSffffffZ` (`timestamp()`), so names sort by time. New files are
created with `memory.durable.create_exclusive`; if the name is taken (two writers in the
same microsecond), `_{suffix}` (`new_suffix()`, 6 hex digits) is added, so names never
collide and an existing file is never overwritten. Agent and phase names are slugged for
file names (`slug()`); the exact names stay in the file. Paths come from
`memory.paths.Layout`; every write is atomic (`memory.durable`).

Each file ends with an HTML comment carrying its values as JSON, so `read_plan`,
`read_findings`, `read_merged` and `read_snapshot` give back exactly what was written
while the rest of the file stays plain, hand-editable markdown.

Invariant: a write either leaves a complete new file (or a complete new plan version) or
nothing; no function here ever deletes or overwrites a findings file or a snapshot.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memory.durable import atomic_write_text, create_exclusive
from memory.paths import Layout
from orchestrator.errors import (
    ArtifactError,
    SnapshotError,
    TemplateError,
)
from orchestrator.templates import (
    Pathish,
    parse_meta,
    render_findings,
    render_merged,
    render_plan,
    render_snapshot,
)

TS_FORMAT = "%Y%m%dT%H%M%S%fZ"
TS_PATTERN = r"\d{8}T\d{12}Z"
_NAME_TS = re.compile(rf"_(?P<ts>{TS_PATTERN})(?:_(?P<sfx>[0-9a-f]{{6}}))?$")
_SLUG_BAD = re.compile(r"[^A-Za-z0-9._-]+")
MAX_SLUG = 64
MAX_NAME_TRIES = 20
RESERVED_AGENT_SLUGS = frozenset({"merged"})
SNAPSHOT_KEYS = ("task_id", "phase", "objective", "reason", "token_count", "timestamp", "plan_path")


# -- names ----------------------------------------------------------------------------
def _utc(now: datetime | str | None) -> datetime:
    if now is None:
        return datetime.now(UTC)
    if isinstance(now, str):
        try:
            now = datetime.fromisoformat(now.replace("Z", "+00:00"))
        except ValueError:
            raise ValueError(
                f"timestamp {now!r} is not ISO 8601; pass e.g. '2025-01-04T12:00:00Z'"
            ) from None
    if now.tzinfo is None:
        now = now.replace(tzinfo=UTC)
    return now.astimezone(UTC)


def timestamp(now: datetime | str | None = None) -> str:
    """UTC time as `YYYYMMDDTHHMMSSffffffZ` (sortable; used in every artifact name)."""
    return _utc(now).strftime(TS_FORMAT)


def iso_timestamp(now: datetime | str | None = None) -> str:
    """UTC time as ISO 8601 with microseconds, e.g. `2025-01-04T12:00:00.000000Z`."""
    return _utc(now).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


_stamp = timestamp  # `write_findings` has a parameter called `timestamp`


def new_suffix() -> str:
    """A short random suffix (6 hex digits) that keeps names unique."""
    return secrets.token_hex(3)


def slug(name: str, fallback: str = "agent") -> str:
    """`name` as a safe file-name part: letters, digits, `.`, `_`, `-`; at most 64 chars."""
    cleaned = _SLUG_BAD.sub("-", str(name)).strip("-._")[:MAX_SLUG].strip("-._")
    return cleaned or fallback


def name_timestamp(path: Path | str) -> str | None:
    """The `YYYYMMDDTHHMMSSffffffZ` in an artifact's file name, or None."""
    match = _NAME_TS.search(Path(path).stem)
    return match.group("ts") if match else None


def create_unique(folder: Path, stem: str, ext: str, text: str | Callable[[str], str]) -> Path:
    """Create `folder/stem.ext`, or `stem_{suffix}.ext` if taken; never overwrites.

    Args:
        text: the content, or a function of the final stem that renders it (for files
            that name themselves, like a checkpoint's `checkpoint_id`).

    Raises:
        FileExistsError: after `MAX_NAME_TRIES` taken names (practically impossible).
    """
    candidate = stem
    for _ in range(MAX_NAME_TRIES):
        content = text(candidate) if callable(text) else text
        path = folder / f"{candidate}{ext}"
        if create_exclusive(path, content.encode("utf-8")):
            return path
        candidate = f"{stem}_{new_suffix()}"
    raise FileExistsError(f"could not find a free name for {stem!r} in {str(folder)!r}")


def _agent_slug(agent: str) -> str:
    value = slug(agent)
    return f"agent-{value}" if value.lower() in RESERVED_AGENT_SLUGS else value


# -- research plan --------------------------------------------------------------------
def write_plan(
    layout: Layout,
    task_id: str,
    *,
    objective: str,
    phase: str,
    strategy: str = "",
    key_questions: Iterable[Any] = (),
    completed: Iterable[str] = (),
    in_progress: Iterable[str] = (),
    pending: Iterable[str] = (),
    constraints: Iterable[str] = (),
    next_actions: Iterable[str] = (),
    project_dir: Pathish | None = None,
) -> Path:
    """Write (or rewrite) `research_plans/{task_id}.md`; returns its path.

    Args:
        key_questions: `(text, answered)` pairs, `{"text", "answered"}` dicts or strings.
        completed, in_progress, pending: subtask ids or titles for the Progress section.
        project_dir: where a project's `templates/` override lives (default: cwd).
    """
    text = render_plan(
        {
            "task_id": task_id,
            "phase": phase,
            "objective": objective,
            "strategy": strategy,
            "key_questions": list(key_questions),
            "completed": list(completed),
            "in_progress": list(in_progress),
            "pending": list(pending),
            "constraints": list(constraints),
            "next_actions": list(next_actions),
            "updated": iso_timestamp(),
        },
        project_dir,
    )
    path = layout.plan(task_id)
    if path.is_file():
        try:
            previous = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            previous = ""
        text = keep_hand_edits(previous, text, project_dir)
    return atomic_write_text(path, text)


def _append_to_section(text: str, title: str, lines: list[str]) -> str:
    """`text` with `lines` added at the end of its `## title` section (if it has one)."""
    head = re.search(rf"^## {re.escape(title)}[ \t]*$", text, flags=re.MULTILINE)
    if head is None:
        return text
    nxt = re.search(r"^(## |<!-- tether:)", text[head.end() :], flags=re.MULTILINE)
    end = head.end() + nxt.start() if nxt else len(text)
    body = text[head.end() : end].rstrip("\n")
    return text[: head.end()] + body + "\n" + "\n".join(lines) + "\n\n" + text[end:]


#: The sections of a research plan that tether writes; any other section is the user's.
PLAN_SECTIONS = (
    "Objective",
    "Strategy",
    "Key Questions",
    "Progress",
    "Constraints",
    "Next Actions",
)


def keep_hand_edits(previous: str, new: str, project_dir: Pathish | None = None) -> str:
    """`new` plan text carrying over what a person added to the `previous` one.

    Users edit plans by hand (a constraint for the agents, a notes section). Lines added
    to a section tether writes are found by re-rendering the previous file's metadata
    (what tether wrote) and keeping the lines that are not in it; they are appended to the
    same section of the new text. Sections tether does not write are kept whole. Lines a
    person deleted from tether's sections come back: tether owns those.
    """
    if not previous.strip():
        return new
    meta = parse_meta(previous, "plan")
    ours: set[str] = set()
    if meta is not None:
        try:
            ours = {line.strip() for line in render_plan(meta, project_dir).splitlines()}
        except TemplateError:  # a changed template: keep only the user's own sections
            meta = None
    added: dict[str, list[str]] = {}
    extra: list[str] = []
    for title, body in sections(previous).items():
        if title not in PLAN_SECTIONS:
            extra.append(f"## {title}\n{body}\n")
        elif meta is not None:
            lines = [ln for ln in body.splitlines() if ln.strip() and ln.strip() not in ours]
            if lines:
                added[title] = lines
    for title, lines in added.items():
        new = _append_to_section(new, title, lines)
    if extra:
        marker = new.rfind("<!-- tether:plan ")
        cut = marker if marker >= 0 else len(new)
        new = new[:cut] + "\n".join(extra) + "\n" + new[cut:]
    return new


# -- findings -------------------------------------------------------------------------
def write_findings(
    layout: Layout,
    agent: str,
    *,
    task: str,
    summary: str,
    status: str = "completed",
    key_discoveries: Iterable[str] = (),
    files: Iterable[Any] = (),
    files_written: Iterable[Any] = (),
    open_questions: Iterable[str] = (),
    recommendations: Iterable[str] = (),
    timestamp: datetime | str | None = None,
    task_id: str | None = None,
    subtask_id: str | None = None,
    phase: str | None = None,
    project_dir: Pathish | None = None,
) -> Path:
    """Create `findings/{agent}_{ts}.md` for one finished subagent; returns its path.

    Args:
        agent: the subagent's name (slugged for the file name, shown as given).
        files: the files examined: `(path, description)` pairs, `{"path", "description"}`
            dicts or `FileNote`s (`## Files Examined`).
        files_written: the files the agent wrote, in the same forms
            (`## Files Modified/Created`, only when there are some).
        timestamp: when the work finished (datetime or ISO string; default now).
        task_id, subtask_id, phase: recorded in the file's metadata for recovery.
    """
    when = _utc(timestamp)
    text = render_findings(
        {
            "agent": agent,
            "task": task,
            "status": status,
            "summary": summary,
            "key_discoveries": list(key_discoveries),
            "files": list(files),
            "files_written": list(files_written),
            "open_questions": list(open_questions),
            "recommendations": list(recommendations),
            "timestamp": iso_timestamp(when),
            "task_id": task_id,
            "subtask_id": subtask_id,
            "phase": phase,
        },
        project_dir,
    )
    return create_unique(layout.findings, f"{_agent_slug(agent)}_{_stamp(when)}", ".md", text)


def write_merged(
    layout: Layout,
    task_id: str,
    phase: str,
    findings: Sequence[Mapping[str, Any]],
    *,
    timestamp: datetime | str | None = None,
    project_dir: Pathish | None = None,
) -> Path:
    """Create `findings/merged_{ts}.md` synthesising one batch; returns its path.

    Args:
        findings: one dict per subagent with `agent` and any of `summary`, `status`,
            `task`, `subtask_id`, `key_discoveries`, `files`, `files_written`, `open_questions`,
            `recommendations`, `path` (its findings file), `timestamp`, `task_id`, `phase`.
    """
    when = _utc(timestamp)
    text = render_merged(
        {
            "task_id": task_id,
            "phase": phase,
            "timestamp": iso_timestamp(when),
            "findings": [dict(f) for f in findings],
        },
        project_dir,
    )
    return create_unique(layout.findings, f"merged_{_stamp(when)}", ".md", text)


# -- snapshots ------------------------------------------------------------------------
def write_snapshot(
    layout: Layout,
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
    resume_instructions: str = "",
    plan_path: str | None = None,
    extra: Mapping[str, Any] | None = None,
    objective: str | None = None,
    timestamp: datetime | str | None = None,
    project_dir: Pathish | None = None,
) -> Path:
    """Create `context_snapshots/snap_{ts}.md`; returns its path.

    Args:
        reason: `token_limit`, `manual`, `phase_end`, ...
        token_count: the lead's context size when the snapshot was taken.
        what_was_found, what_is_left: digests of the findings and of the remaining work
            (markdown; `orchestrator.snapshot_content` assembles them).
        files_in_play: `(path, status)` pairs or dicts.
        plan_path: the research plan, relative to the memory directory.
        extra: any JSON-able values a resumer needs (kept in the metadata block).
        objective: the task objective (also accepted as `extra["objective"]`).
    """
    extra = dict(extra or {})
    if objective is None and isinstance(extra.get("objective"), str):
        objective = extra["objective"]
    when = _utc(timestamp)
    text = render_snapshot(
        {
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
            "pending_decisions": list(pending_decisions),
            "resume_instructions": resume_instructions,
            "plan_path": plan_path,
            "extra": extra,
        },
        project_dir,
    )
    return create_unique(layout.context_snapshots, f"snap_{_stamp(when)}", ".md", text)


def list_snapshots(layout: Layout) -> list[Path]:
    """Snapshot files, newest first (by the time in the name)."""
    return _newest_first(layout.context_snapshots.glob("snap_*.md"))


def list_findings(layout: Layout, *, merged: bool | None = None) -> list[Path]:
    """Findings files, newest first; `merged=True/False` keeps only merged/agent files."""
    paths = list(layout.findings.glob("*.md"))
    if merged is not None:
        paths = [p for p in paths if p.name.startswith("merged_") == merged]
    return _newest_first(paths)


def _newest_first(paths: Iterable[Path]) -> list[Path]:
    visible = [p for p in paths if not p.name.startswith(".") and p.is_file()]
    return sorted(visible, key=lambda p: (name_timestamp(p) or "", p.name), reverse=True)


# -- reading back ---------------------------------------------------------------------
_SECTION = re.compile(r"^## (?P<title>.+?)\s*$", re.MULTILINE)
_LABEL = re.compile(r"^\*\*(?P<label>[^*]+)\*\*: ?(?P<value>.*)$", re.MULTILINE)
_STATE_ITEM = re.compile(r"^- (?P<key>Task|Objective|Phase|Agents|Plan): ?(?P<value>.*)$", re.M)


#: How a person finds the files of a kind, for "not found" errors.
_LISTING = {"snapshot": "`orchestrator snapshot list`"}


def _read_text(path: Path, what: str, error: type[ArtifactError] = ArtifactError) -> str:
    path = Path(path)
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        listing = _LISTING.get(what, "`ls` in the memory directory")
        raise error(f"{what} {str(path)!r} not found; list them with {listing}") from None
    except IsADirectoryError:
        raise error(f"{what} {str(path)!r} is a directory, not a file") from None
    except UnicodeDecodeError:
        raise error(f"{what} {str(path)!r} is not UTF-8 text") from None
    except OSError as exc:
        raise error(f"cannot read {what} {str(path)!r}: {exc.strerror}") from None


def sections(text: str) -> dict[str, str]:
    """`## Title` -> body text of each second-level section of a markdown document."""
    text = re.sub(r"^<!-- tether:\w+ .* -->[ \t]*$", "", text, flags=re.MULTILINE)
    found = list(_SECTION.finditer(text))
    out: dict[str, str] = {}
    for i, match in enumerate(found):
        end = found[i + 1].start() if i + 1 < len(found) else len(text)
        out[match.group("title")] = text[match.end() : end].strip("\n").rstrip()
    return out


def _read_kind(path: Path, kind: str, what: str) -> dict[str, Any]:
    text = _read_text(path, what)
    meta = parse_meta(text, kind)
    if meta is None:
        raise ArtifactError(
            f"{what} {str(Path(path))!r} has no tether metadata block "
            f"('<!-- tether:{kind} ... -->'); was it written by tether?"
        )
    return {**meta, "sections": sections(text), "text": text, "path": str(path)}


def read_plan(path: Path) -> dict[str, Any]:
    """The values a research plan was written with, plus `sections`, `text` and `path`."""
    return _read_kind(path, "plan", "research plan")


def read_findings(path: Path) -> dict[str, Any]:
    """The values a findings file was written with, plus `sections`, `text` and `path`.

    Files written before "Files Examined" existed list every file under "Files
    Modified/Created"; they read back the same way (their `files`, and `files_written`
    empty), with that heading in `sections`.
    """
    return {"files_written": [], **_read_kind(path, "findings", "findings file")}


def read_merged(path: Path) -> dict[str, Any]:
    """The values a merged-findings file was written with, plus `sections`, `text`, `path`."""
    return _read_kind(path, "merged", "merged findings file")


def read_snapshot(path: Path) -> dict[str, Any]:
    """Parse a snapshot back into what a fresh lead needs to resume.

    Returns a dict with `task_id`, `phase`, `objective`, `reason`, `token_count`,
    `timestamp`, `active_agents`, `plan_path`, `extra`, the other written values,
    `sections` (title -> markdown body, including a person's edits), `text` and `path`.
    A snapshot without tether's metadata block (written by hand from seed 002's format)
    is parsed from its markdown; values it does not show are None.

    Raises:
        SnapshotError: missing, unreadable, or not a snapshot at all.
    """
    text = _read_text(Path(path), "snapshot", SnapshotError)
    meta = parse_meta(text, "snapshot")
    if meta is None:
        meta = _parse_snapshot_markdown(text, Path(path))
    base = dict.fromkeys(SNAPSHOT_KEYS)
    base["extra"], base["active_agents"] = {}, []
    return {**base, **meta, "sections": sections(text), "text": text, "path": str(path)}


def _parse_snapshot_markdown(text: str, path: Path) -> dict[str, Any]:
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
        "task_id": items.get("task") or None,
        "phase": items.get("phase") or None,
        "objective": items.get("objective") or None,
        "reason": labels.get("reason") or None,
        "token_count": int(tokens) if tokens else None,
        "timestamp": labels.get("timestamp") or None,
        "active_agents": [a.strip() for a in agents.split(",") if a.strip() and agents != "none"],
        "plan_path": items.get("plan", "").strip("`") or None,
        "extra": {},
    }
