"""Reading tether's files back: plans, findings, merged findings, snapshots, checkpoints.

Every markdown artifact ends with one machine-readable line, `<!-- tether:KIND {...} -->`,
holding the values it was written with as JSON (`parse_meta`); the rest is plain markdown,
split into its `## Title` sections by `sections`. Snapshots written by hand in the same
layout, without that line, are parsed from their markdown. Checkpoints are JSON files
listed newest first (`list_checkpoints`); validating one against the schema is
`orchestrator.checkpoints.load_checkpoint`'s job.

Importing this module is cheap (no pydantic, Jinja or LangGraph): `orchestrator status`
and the recovery of a run's state read files through it. Nothing here writes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memory.paths import Layout
from orchestrator.errors import ArtifactError, SnapshotError
from orchestrator.paths import name_timestamp, read_text, timestamp

_META_RE = r"^<!-- tether:{kind} (?P<json>\{{.*\}}) -->[ \t]*$"
_ANY_META = re.compile(r"^<!-- tether:\w+ .* -->[ \t]*$\n?", re.MULTILINE)
_SECTION = re.compile(r"^## (?P<title>.+?)\s*$", re.MULTILINE)
_LABEL = re.compile(r"^\*\*(?P<label>[^*]+)\*\*: ?(?P<value>.*)$", re.MULTILINE)
_STATE_ITEM = re.compile(r"^- (?P<key>Task|Objective|Phase|Agents|Plan): ?(?P<value>.*)$", re.M)
SNAPSHOT_KEYS = ("task_id", "phase", "objective", "reason", "token_count", "timestamp", "plan_path")


# -- the metadata line ----------------------------------------------------------------
def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


_STRICT = json.JSONDecoder(parse_constant=_reject_constant)


def loads_strict(text: str | bytes) -> Any:
    """`json.loads` that refuses NaN and Infinity (Python accepts them; JSON does not)."""
    return _STRICT.decode(text.decode("utf-8") if isinstance(text, bytes) else text)


def parse_meta(text: str, kind: str) -> dict[str, Any] | None:
    """The values stored in the last `<!-- tether:KIND {...} -->` line of `text`, or None."""
    matches = list(re.finditer(_META_RE.format(kind=re.escape(kind)), text, re.MULTILINE))
    if not matches:
        return None
    try:
        value = loads_strict(matches[-1].group("json"))
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def strip_meta(text: str) -> str:
    """`text` without its `<!-- tether:KIND ... -->` lines."""
    return _ANY_META.sub("", text)


def body_text(path: Path) -> str:
    """A memory file's text without its metadata line, stripped ("" if unreadable)."""
    try:
        return strip_meta(path.read_text(encoding="utf-8")).strip()
    except OSError:
        return ""


# -- markdown artifacts ---------------------------------------------------------------
#: How a person finds the files of a kind, for "not found" errors.
_LISTING = {"snapshot": "`orchestrator snapshot list`"}


def _read_text(path: Path, what: str, error: type[ArtifactError] = ArtifactError) -> str:
    listing = _LISTING.get(what, "`ls` in the memory directory")
    return read_text(path, what, error, missing=f"list them with {listing}")


def sections(text: str) -> dict[str, str]:
    """`## Title` -> body text of each second-level section of a markdown document."""
    text = strip_meta(text)
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
    A snapshot without tether's metadata block (written by hand in the same markdown layout)
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


# -- checkpoints ------------------------------------------------------------------------
def _sort_key(path: Path) -> tuple[str, float, str]:
    """Time in the name; for a hand-named file, its `timestamp`, else its mtime."""
    try:
        mtime = path.stat().st_mtime
    except OSError:
        mtime = 0.0
    ts = name_timestamp(path) or _content_timestamp(path)
    if ts is None:
        ts = timestamp(datetime.fromtimestamp(mtime, UTC))
    return (ts, mtime, path.name)


def _content_timestamp(path: Path) -> str | None:
    try:
        obj = loads_strict(path.read_bytes().decode("utf-8"))
        return timestamp(obj["timestamp"])
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None


def list_checkpoints(layout: Layout, task_id: str | None = None) -> list[Path]:
    """Checkpoint files, newest first (time in the name, else modification time).

    With `task_id`, only files whose JSON names that task (unreadable files are left out;
    `latest_valid_checkpoint` reports them).
    """
    folder = layout.checkpoints
    if not folder.is_dir():
        return []
    paths = [p for p in folder.glob("*.json") if not p.name.startswith(".") and p.is_file()]
    paths.sort(key=_sort_key, reverse=True)
    if task_id is None:
        return paths
    return [p for p in paths if _task_of(p) == task_id]


def _task_of(path: Path) -> str | None:
    try:
        obj = loads_strict(path.read_bytes().decode("utf-8"))
    except (OSError, ValueError):
        return None
    return obj.get("task_id") if isinstance(obj, dict) else None
