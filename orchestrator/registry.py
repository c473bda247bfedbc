"""The artifact registry: what makes a file-writing step idempotent across crashes.

Before a step writes a named artifact (a subagent's findings, a batch's merged findings) it
looks the artifact's key up in the document `.tether/registry/{task_id}.jsonl`:

* a record whose file exists -> the step is skipped and the recorded result reused;
* a record whose file is missing (killed between recording and writing) -> the step writes
  again with the *same* timestamp, hence the same file name, so a crash can never leave
  two findings files for one subtask;
* nothing -> the step records its intent (with the timestamp and the payload needed to
  write the file without rerunning the agent), then writes the file. A findings file's
  name follows from that timestamp (`artifacts.findings.findings_name`), and so does a
  merged batch's (`merged_{ts}.md`), so a path is recorded only when the name was taken.

Since the record holds the findings durably, a subagent's findings file is not fsynced;
a resume first writes again, under their recorded names, the files a crash of the machine
lost or cut short (`orchestrator.nodes.subagent.repair_findings`).

Records are whole durable jsonl lines (`Docs.append_jsonl`, the backend's `append_lines`);
a key's record is its lines merged in order. Each process parses a registry once and then
only the lines appended since (by itself or by another process), so a lookup stays cheap
however many subagents the run has. The folder is hidden, so recall and the index ignore it. The
registry also lets a run's state be rebuilt without LangGraph's database
(`orchestrator.rebuild`).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator.docs import Docs
from orchestrator.errors import ArtifactError
from orchestrator.paths import name_timestamp, timestamp


def registry_lookup(memory: Any, task_id: str, key: str) -> dict[str, Any] | None:
    """The latest record for `key` merged over its intent: {ts, payload, path?}."""
    found = _merged(Docs.of(memory), task_id).get(key)
    return dict(found) if found is not None else None


def registry_records(memory: Any, task_id: str) -> dict[str, dict[str, Any]]:
    """Every key's merged record (used to rebuild state without LangGraph's database)."""
    return {k: dict(v) for k, v in _merged(Docs.of(memory), task_id).items()}


def registry_note(memory: Any, task_id: str, key: str, **fields: Any) -> None:
    """Append one record for `key` (an intent, a result or a path)."""
    docs = Docs.of(memory)
    docs.append_jsonl(docs.registry(task_id), {"key": key, **fields})


def find_written(
    docs: Docs,
    folder: str,
    iso_ts: str,
    reader: Callable[[Path, Docs], dict[str, Any]],
    *,
    expected: str | None = None,
    **meta: Any,
) -> Path | None:
    """An artifact written at `iso_ts` whose metadata matches `meta` (crash leftovers).

    Artifact names embed the timestamp, so a step that recorded its timestamp before a
    crash finds the file it may already have written instead of writing a second one.
    `expected` (a document path) is the name the file gets when it is free: it is tried
    before the folder is listed.
    """

    def ours(rel: str) -> Path | None:
        path = docs.path(rel)
        try:
            values = reader(path, docs)
        except (ArtifactError, OSError):  # unreadable file: not ours to reuse
            return None
        return path if all(values.get(k) == v for k, v in meta.items()) else None

    if expected and docs.exists(expected) and (path := ours(expected)):
        return path
    stamp = timestamp(iso_ts)
    for info in docs.list(folder, ".md"):
        if (
            name_timestamp(info.path) == stamp
            and info.path != expected
            and (path := ours(info.path))
        ):
            return path
    return None


# -- reading: each document once, then only what was appended ------------------------------


@dataclass
class _Read:
    """What was merged from a registry document's first `offset` bytes (whole lines only)."""

    offset: int = 0
    probe: bytes = b""
    """The bytes just before `offset`: a document rewritten in place is read again."""
    records: dict[str, dict[str, Any]] = field(default_factory=dict)


_READS: dict[tuple[str, str], _Read] = {}
_READS_LOCK = threading.Lock()
_PROBE = 64
MAX_KEPT = 64
"""Registries whose merged records stay in memory (the most recently read): a process
running task after task must not keep every task's records."""


def _merged(docs: Docs, task_id: str) -> dict[str, dict[str, Any]]:
    """Every key's record merged in line order, as `read_jsonl` would give them.

    A lookup per subagent used to parse the whole document (quadratic in the subagents of
    a run); the merged records are kept per document and only the appended lines are
    parsed, which also picks up lines other processes appended. The result must not be
    modified.
    """
    rel = docs.registry(task_id)
    key = (docs.location, rel)
    with _READS_LOCK:
        read = _READS.pop(key, None) or _Read()  # put back last: the most recently read
        while len(_READS) >= MAX_KEPT:
            del _READS[next(iter(_READS))]
        data = docs.read_bytes(rel, offset=read.offset - len(read.probe))
        if data is None:
            _READS.pop(key, None)
            return {}
        if data.startswith(read.probe):
            data = data[len(read.probe) :]
        else:  # shorter, or rewritten: parse it all again
            read = _Read()
            data = docs.read_bytes(rel) or b""
        complete = data.rfind(b"\n") + 1
        _merge_lines(read.records, data[:complete])
        if complete:
            read.offset += complete
            read.probe = (read.probe + data[:complete])[-_PROBE:]
        _READS[key] = read
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
