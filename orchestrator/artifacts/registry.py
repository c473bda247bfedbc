"""The artifact registry: what makes a file-writing step idempotent across crashes.

Before a step writes a named artifact (a subagent's findings, a batch's merged findings) it
looks the artifact's key up in the task's registry, the storage contract's subagent records
(`memory.base`; on the files backend one JSON file per key under
`.tether/records/subagents/{task}/`, on PostgreSQL a row):

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
lost or cut short (`orchestrator.graph.nodes.subagent.repair_findings`).

A note merges its fields into the key's record in one atomic step
(`transition_subagent`), so no note is lost to another writer; its status says what the
latest note was (`started`, `written`, `requested`, `decided`). Approval requests and their
decisions are recorded here too (`orchestrator.approvals`). A lookup reads the key's record
alone, so it stays cheap however many subagents the run has. The registry also lets a run's
state be rebuilt without LangGraph's database (`orchestrator.recovery.rebuild`). A task an older
version ran keeps its registry in `.tether/registry/{task}.jsonl`; its keys are copied to
records the first time the task's registry is read (the file is kept).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from orchestrator.artifacts.documents import Docs
from orchestrator.artifacts.names import name_timestamp, timestamp
from orchestrator.errors import ArtifactError

#: A record's status names its latest note (informative: lookups read the fields).
STATUSES = ("started", "written", "requested", "decided", "noted")


def registry_lookup(memory: Any, task_id: str, key: str) -> dict[str, Any] | None:
    """The record for `key`, every note merged: {key, ts, payload, path?, ...}."""
    docs = Docs.of(memory)
    unadopted = _adopt_legacy(docs, task_id)
    found = docs.backend.get_subagent(task_id, key)
    if found is None:
        return dict(unadopted[key]) if key in unadopted else None
    return {**found.data, "key": key}


def registry_records(memory: Any, task_id: str) -> dict[str, dict[str, Any]]:
    """Every key's record (used to rebuild state without LangGraph's database)."""
    docs = Docs.of(memory)
    records = {k: dict(v) for k, v in _adopt_legacy(docs, task_id).items()}
    for r in docs.backend.list_subagents(task_id):
        records[r.agent_id] = {**r.data, "key": r.agent_id}
    return records


def registry_note(memory: Any, task_id: str, key: str, **fields: Any) -> None:
    """Merge one note for `key` (an intent, a result or a path) into its record, durably."""
    docs = Docs.of(memory)
    _adopt_legacy(docs, task_id)
    _merge(docs, task_id, key, fields, created_only=False)


def _status(fields: dict[str, Any]) -> str:
    for field, status in (("decided", "decided"), ("actions", "requested"), ("path", "written")):
        if field in fields:
            return status
    return "started" if "ts" in fields else "noted"


def _merge(
    docs: Docs, task_id: str, key: str, fields: dict[str, Any], *, created_only: bool
) -> bool:
    allowed: tuple[str | None, ...] = (None,) if created_only else (None, *STATUSES)
    return docs.backend.transition_subagent(
        task_id, key, from_status=allowed, to_status=_status(fields), data=fields
    )


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


# -- the registry of older versions ---------------------------------------------------------

_ADOPTED: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
_ADOPTED_LOCK = threading.Lock()


def _adopt_legacy(docs: Docs, task_id: str) -> dict[str, dict[str, Any]]:
    """Copy the keys an older version noted in `.tether/registry/{task}.jsonl` to records
    (once per process and task; a key that has a record already keeps it). Returns what
    could not be copied (a read-only memory's legacy keys), to be read as they are."""
    mark = (docs.location, task_id)
    with _ADOPTED_LOCK:
        if mark in _ADOPTED:
            return _ADOPTED[mark]
        legacy = docs.registry(task_id)
        merged: dict[str, dict[str, Any]] = {}
        if docs.exists(legacy):
            for _, rec in docs.read_jsonl(legacy).records:
                key = rec.get("key")
                if isinstance(key, str) and key:
                    merged[key] = {**merged.get(key, {}), **rec}
        if merged and not docs.backend.read_only:
            for key, rec in merged.items():
                fields = {k: v for k, v in rec.items() if k != "key"}
                _merge(docs, task_id, key, fields, created_only=True)
            merged = {}
        _ADOPTED[mark] = merged
        return merged
