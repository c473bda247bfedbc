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
its lines merged in order. Each process parses a registry file once and then only the lines
appended since (by itself or by another process), so a lookup stays cheap however many
subagents the run has. The folder is hidden, so recall and the index ignore it. The
registry also lets a run's state be rebuilt without LangGraph's database
(`orchestrator.rebuild`).
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memory.durable import append_jsonl
from memory.paths import Layout
from orchestrator.errors import ArtifactError
from orchestrator.paths import registry_path, timestamp


def registry_lookup(layout: Layout, task_id: str, key: str) -> dict[str, Any] | None:
    """The latest record for `key` merged over its intent: {ts, payload, path?}."""
    found = _merged(registry_path(layout, task_id)).get(key)
    return dict(found) if found is not None else None


def registry_records(layout: Layout, task_id: str) -> dict[str, dict[str, Any]]:
    """Every key's merged record (used to rebuild state without LangGraph's database)."""
    return {k: dict(v) for k, v in _merged(registry_path(layout, task_id)).items()}


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


# -- reading: each file once, then only what was appended ---------------------------------


@dataclass
class _Read:
    """What was merged from a registry file's first `offset` bytes (whole lines only)."""

    ident: tuple[int, int]
    offset: int = 0
    probe: bytes = b""
    """The bytes just before `offset`: a file rewritten in place is read again."""
    records: dict[str, dict[str, Any]] = field(default_factory=dict)


_READS: dict[Path, _Read] = {}
_READS_LOCK = threading.Lock()
_PROBE = 64


def _merged(path: Path) -> dict[str, dict[str, Any]]:
    """Every key's record merged in line order, as `read_jsonl` would give them.

    A lookup per subagent used to parse the whole file (quadratic in the subagents of a
    run); the merged records are kept per file and only the appended lines are parsed,
    which also picks up lines other processes appended. The result must not be modified.
    """
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        with _READS_LOCK:
            _READS.pop(path, None)
        return {}
    try:
        with _READS_LOCK:
            return _advance(path, fd)
    finally:
        os.close(fd)


def _advance(path: Path, fd: int) -> dict[str, dict[str, Any]]:
    st = os.fstat(fd)
    ident = (st.st_dev, st.st_ino)
    read = _READS.get(path)
    if (
        read is None
        or read.ident != ident
        or read.offset > st.st_size
        or os.pread(fd, len(read.probe), read.offset - len(read.probe)) != read.probe
    ):
        read = _Read(ident)
    data = os.pread(fd, st.st_size - read.offset, read.offset) if st.st_size > read.offset else b""
    complete = data.rfind(b"\n") + 1
    _merge_lines(read.records, data[:complete])
    if complete:
        read.offset += complete
        read.probe = (read.probe + data[:complete])[-_PROBE:]
    _READS[path] = read
    fragment = data[complete:]
    if not fragment.strip():
        return read.records
    # a last line without its newline (a writer killed mid-line, or one still writing):
    # counted when it parses, as `read_jsonl` does, but not kept
    records = {k: dict(v) for k, v in read.records.items()}
    _merge_lines(records, fragment)
    return records


def _merge_lines(records: dict[str, dict[str, Any]], data: bytes) -> None:
    for raw in data.split(b"\n"):
        if not raw.strip():
            continue
        try:
            rec = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            continue  # a torn or foreign line: `read_jsonl` skips it too
        key = rec.get("key") if isinstance(rec, dict) else None
        if key and isinstance(key, str):
            records[key] = {**records.get(key, {}), **rec}
