"""The artifact registry: what makes a file-writing step idempotent across crashes.

Before a step writes a named artifact (a subagent's findings, a batch's merged findings) it
looks the artifact's key up in `<memory root>/.tether/registry/{task_id}.jsonl`:

* a `done` record whose file exists -> the step is skipped and the recorded result reused;
* an `intent` record (killed between choosing a name and finishing) -> the step writes
  again with the *same* timestamp, hence the same file name, so a crash can never leave
  two findings files for one subtask;
* nothing -> the step records its intent (with the timestamp and the payload needed to
  write the file without rerunning the agent), writes, then records `done`.

Records are whole fsynced jsonl lines (`memory.durable.append_jsonl`); a key's record is
its lines merged in order. The folder is hidden, so recall and the index ignore it. The
registry also lets a run's state be rebuilt without LangGraph's database
(`orchestrator.rebuild`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from memory.durable import append_jsonl, read_jsonl
from memory.paths import Layout
from orchestrator.errors import ArtifactError
from orchestrator.paths import registry_path, timestamp


def registry_lookup(layout: Layout, task_id: str, key: str) -> dict[str, Any] | None:
    """The latest record for `key` merged over its intent: {ts, payload, path?}."""
    found: dict[str, Any] | None = None
    for _line, rec in read_jsonl(registry_path(layout, task_id)).records:
        if rec.get("key") != key:
            continue
        found = {**(found or {}), **rec}
    return found


def registry_records(layout: Layout, task_id: str) -> dict[str, dict[str, Any]]:
    """Every key's merged record (used to rebuild state without LangGraph's database)."""
    out: dict[str, dict[str, Any]] = {}
    for _line, rec in read_jsonl(registry_path(layout, task_id)).records:
        key = rec.get("key")
        if key:
            out[key] = {**out.get(key, {}), **rec}
    return out


def registry_note(layout: Layout, task_id: str, key: str, **fields: Any) -> None:
    """Append one record for `key` (an intent, a result or a path)."""
    append_jsonl(registry_path(layout, task_id), {"key": key, **fields})


def find_written(
    folder: Path, iso_ts: str, reader: Callable[[Path], dict[str, Any]], **meta: Any
) -> Path | None:
    """An artifact written at `iso_ts` whose metadata matches `meta` (crash leftovers).

    Artifact names embed the timestamp, so a step that recorded its timestamp before a
    crash finds the file it may already have written instead of writing a second one.
    """
    stamp = timestamp(iso_ts)
    for path in sorted(folder.glob(f"*_{stamp}*.md")):
        try:
            values = reader(path)
        except (ArtifactError, OSError):  # unreadable file: not ours to reuse
            continue
        if all(values.get(k) == v for k, v in meta.items()):
            return path
    return None
