"""The artifact registry: what makes a file-writing step idempotent across crashes.

Before a step writes a named artifact (a subagent's findings, a batch's merged findings) it
looks the artifact's key up in the task's registry, the storage contract's subagent records
(`memory.contract.base`; on the files backend one JSON file per key under
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
state be rebuilt without LangGraph's database (`orchestrator.recovery.rebuild`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from orchestrator.artifacts.documents import Docs
from orchestrator.artifacts.names import name_timestamp, timestamp
from orchestrator.errors import ArtifactError

#: A record's status names its latest note (informative: lookups read the fields).
STATUSES = ("started", "written", "requested", "decided", "noted")


def registry_lookup(docs: Docs, task_id: str, key: str) -> dict[str, Any] | None:
    """The record for `key`, every note merged: {key, ts, payload, path?, ...}."""
    found = docs.backend.get_subagent(task_id, key)
    return None if found is None else {**found.data, "key": key}


def registry_records(docs: Docs, task_id: str) -> dict[str, dict[str, Any]]:
    """Every key's record (used to rebuild state without LangGraph's database)."""
    subagents = docs.backend.list_subagents(task_id)
    return {r.agent_id: {**r.data, "key": r.agent_id} for r in subagents}


def registry_note(docs: Docs, task_id: str, key: str, **fields: Any) -> None:
    """Merge one note for `key` (an intent, a result or a path) into its record, durably."""
    _merge(docs, task_id, key, fields)


def _status(fields: dict[str, Any]) -> str:
    for field, status in (("decided", "decided"), ("actions", "requested"), ("path", "written")):
        if field in fields:
            return status
    return "started" if "ts" in fields else "noted"


def _merge(docs: Docs, task_id: str, key: str, fields: dict[str, Any]) -> bool:
    return docs.backend.transition_subagent(
        task_id, key, from_status=(None, *STATUSES), to_status=_status(fields), data=fields
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
