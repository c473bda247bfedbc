"""Reading tether's files back: plans, findings, merged findings, snapshots, checkpoints.

Every markdown artifact ends with one machine-readable line, `<!-- tether:KIND {...} -->`,
holding the values it was written with as JSON (`parse_meta`); the rest is plain markdown,
split into its `## Title` sections by `sections`. Snapshots written by hand in the same
layout, without that line, are parsed from their markdown. Checkpoints are JSON files
listed newest first (`list_checkpoints`); validating one against the schema is
`orchestrator.checkpoints.load_checkpoint`'s job.

Each reader takes the path a listing gave (or a person named) and, optionally, the memory's
`Docs`: a path inside the memory is then read through its backend (on PostgreSQL a listing
gives bare document paths); without one, or for a file outside the memory, from disk.

Importing this module is cheap (no pydantic, Jinja or LangGraph): `orchestrator status`
and the recovery of a run's state read files through it. Nothing here writes.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from memory.base import DocumentInfo
from orchestrator.docs import CHECKPOINTS, CONTEXT_SNAPSHOTS, FINDINGS, Docs
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
    """`json.loads` that refuses NaN and Infinity (Python accepts them; JSON does not).

    orjson parses first (strict already, and several times faster on a checkpoint); what it
    refuses goes through the standard parser, which names the problem (or accepts what
    orjson cannot hold, such as an integer beyond 64 bits).
    """
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        pass
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


def body_text(path: Path | str, docs: Docs | None = None) -> str:
    """A memory file's text without its metadata line, stripped ("" if unreadable)."""
    try:
        return strip_meta(_read_text(path, "file", ArtifactError, docs)).strip()
    except ArtifactError:
        return ""


# -- markdown artifacts ---------------------------------------------------------------
#: How a person finds the files of a kind, for "not found" errors.
_LISTING = {"snapshot": "`orchestrator snapshot list`"}


def _read_text(
    path: Path | str,
    what: str,
    error: type[ArtifactError] = ArtifactError,
    docs: Docs | None = None,
) -> str:
    listing = _LISTING.get(what, "`ls` in the memory directory")
    try:
        data = docs.read_named(path) if docs is not None else None
        text = data.decode("utf-8") if data is not None else None
    except UnicodeDecodeError:
        raise error(f"{what} {str(path)!r} is not UTF-8 text") from None
    except OSError as exc:
        raise error(f"cannot read {what} {str(path)!r}: {exc.strerror or exc}") from None
    if text is None:  # not a document of this memory: a file a person named
        return read_text(path, what, error, missing=f"list them with {listing}")
    return text


def sections(text: str) -> dict[str, str]:
    """`## Title` -> body text of each second-level section of a markdown document."""
    text = strip_meta(text)
    found = list(_SECTION.finditer(text))
    out: dict[str, str] = {}
    for i, match in enumerate(found):
        end = found[i + 1].start() if i + 1 < len(found) else len(text)
        out[match.group("title")] = text[match.end() : end].strip("\n").rstrip()
    return out


def _text_and_meta(
    path: Path, kind: str, what: str, docs: Docs | None
) -> tuple[str, dict[str, Any]]:
    text = _read_text(path, what, ArtifactError, docs)
    meta = parse_meta(text, kind)
    if meta is None:
        raise ArtifactError(
            f"{what} {str(Path(path))!r} has no tether metadata block "
            f"('<!-- tether:{kind} ... -->'); was it written by tether?"
        )
    return text, meta


def _read_kind(path: Path, kind: str, what: str, docs: Docs | None) -> dict[str, Any]:
    text, meta = _text_and_meta(path, kind, what, docs)
    return {**meta, "sections": sections(text), "text": text, "path": str(path)}


def read_plan(path: Path, docs: Docs | None = None) -> dict[str, Any]:
    """The values a research plan was written with, plus `sections`, `text` and `path`."""
    return _read_kind(path, "plan", "research plan", docs)


def read_findings(path: Path, docs: Docs | None = None) -> dict[str, Any]:
    """The values a findings file was written with, plus `sections`, `text` and `path`.

    Files written before "Files Examined" existed list every file under "Files
    Modified/Created"; they read back the same way (their `files`, and `files_written`
    empty), with that heading in `sections`.
    """
    return {"files_written": [], **_read_kind(path, "findings", "findings file", docs)}


def findings_meta(path: Path, docs: Docs | None = None) -> dict[str, Any]:
    """Only the values a findings file was written with (no sections): what a lookup by
    task and subtask compares."""
    return _text_and_meta(path, "findings", "findings file", docs)[1]


def read_merged(path: Path, docs: Docs | None = None) -> dict[str, Any]:
    """The values a merged-findings file was written with, plus `sections`, `text`, `path`."""
    return _read_kind(path, "merged", "merged findings file", docs)


def read_snapshot(path: Path, docs: Docs | None = None) -> dict[str, Any]:
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


def list_snapshots(memory: Any) -> list[Path]:
    """Snapshot files, newest first (by the time in the name)."""
    docs = Docs.of(memory)
    found = [i for i in docs.list(CONTEXT_SNAPSHOTS, ".md") if _name(i).startswith("snap_")]
    return _newest_first(docs, found)


def list_findings(memory: Any, *, merged: bool | None = None) -> list[Path]:
    """Findings files, newest first; `merged=True/False` keeps only merged/agent files."""
    docs = Docs.of(memory)
    found = docs.list(FINDINGS, ".md")
    if merged is not None:
        found = [i for i in found if _name(i).startswith("merged_") == merged]
    return _newest_first(docs, found)


def _name(info: DocumentInfo) -> str:
    return info.path.rsplit("/", 1)[-1]


def _newest_first(docs: Docs, found: Iterable[DocumentInfo]) -> list[Path]:
    ordered = sorted(found, key=lambda i: (name_timestamp(i.path) or "", _name(i)), reverse=True)
    return [docs.path(i.path) for i in ordered]


# -- checkpoints ------------------------------------------------------------------------
def _sort_key(docs: Docs, info: DocumentInfo) -> tuple[str, float, str]:
    """Time in the name; for a hand-named file, its `timestamp`, else its mtime."""
    ts = name_timestamp(info.path) or _content_timestamp(docs, info.path)
    if ts is None:
        ts = timestamp(datetime.fromtimestamp(info.mtime, UTC))
    return (ts, info.mtime, _name(info))


def _content_timestamp(docs: Docs, rel: str) -> str | None:
    try:
        obj = loads_strict(docs.read_bytes(rel) or b"")
        return timestamp(obj["timestamp"])
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None


def list_checkpoints(memory: Any, task_id: str | None = None) -> list[Path]:
    """Checkpoint files, newest first (time in the name, else modification time).

    With `task_id`, only files whose JSON names that task (unreadable files are left out;
    `latest_valid_checkpoint` reports them).
    """
    docs = Docs.of(memory)
    found = checkpoint_infos(docs)
    if task_id is not None:
        found = [i for i in found if task_of(docs, i) == task_id]
    return [docs.path(i.path) for i in found]


def checkpoint_infos(docs: Docs) -> list[DocumentInfo]:
    """The checkpoint documents, newest first (see `list_checkpoints`)."""
    found = docs.list(CHECKPOINTS, ".json")
    found.sort(key=lambda i: _sort_key(docs, i), reverse=True)
    return found


#: The opening of a checkpoint as tether renders it: its id, then its task (JSON strings).
_OPENING = re.compile(
    rb'\A\s*\{\s*"checkpoint_id"\s*:\s*"(?:[^"\\\n]|\\.)*"\s*,'
    rb'\s*"task_id"\s*:\s*("(?:[^"\\\n]|\\.)*")\s*,'
)
_HEAD = 2048


def task_of(docs: Docs, info: DocumentInfo) -> str | None:
    """The task a checkpoint file names; None when it cannot be read or parsed.

    A memory holds the checkpoints of every task it ran (a dozen per task): asking for one
    task's must not parse them all. A file that opens as tether writes it (its id, then
    its task) and ends as a JSON object is taken at its opening; any other is parsed whole.
    """
    head = docs.read_head(info.path, _HEAD)
    if head is not None and (m := _OPENING.match(head)):
        whole = len(head) >= info.size
        tail = head if whole else docs.read_bytes(info.path, offset=max(0, info.size - 16))
        if (tail or b"").rstrip().endswith(b"}"):
            with contextlib.suppress(ValueError):
                task = json.loads(m.group(1))
                if isinstance(task, str):
                    return task
    try:
        obj = loads_strict(docs.read_bytes(info.path) or b"")
    except (OSError, ValueError):
        return None
    return obj.get("task_id") if isinstance(obj, dict) else None
