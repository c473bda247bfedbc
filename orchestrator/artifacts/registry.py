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
lost or cut short (`orchestrator.artifacts.recorded.repair_findings`).

**Keys have one owner**: `Keys` names every kind of record (`Keys.findings(subtask_key)`,
`Keys.approval(id)`, `Keys.remote(subtask_key)`, `Keys.transcript(subtask_key)`,
`Keys.merged(phase, n)`, `Keys.answer()`, `Keys.tool_call(scope, tool, n)`) and reads a
key back (`Keys.subtask`); no other module spells a prefix (`tests/test_architecture.py`
checks it).

A note merges its fields into the key's record in one atomic step
(`transition_subagent`), so no note is lost to another writer; its writer states its
`Status` (what the latest note was: `started`, `written`, `requested`, `decided`, `noted`),
stored with the record (`registry_status` reads it; only a record stored without one, by an
older tether, has it inferred from its fields, in `legacy_status`). Approval requests and
their decisions are recorded here too (`orchestrator.approvals`). A lookup reads the key's record
alone, so it stays cheap however many subagents the run has. The registry also lets a run's
state be rebuilt without LangGraph's database (`orchestrator.recovery.rebuild`).
"""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import Any

from orchestrator.artifacts.documents import Docs
from orchestrator.artifacts.names import name_timestamp, timestamp
from orchestrator.errors import ArtifactError


class Status(StrEnum):
    """What a record's latest note was (informative: lookups read the fields)."""

    STARTED = "started"
    """An intent: the step chose its timestamp (and recorded its payload) before writing."""
    WRITTEN = "written"
    """The step's file is written (its path recorded)."""
    REQUESTED = "requested"
    """An approval request: the actions that wait for a person."""
    DECIDED = "decided"
    """A person's decision on a request."""
    NOTED = "noted"
    """Anything else recorded (an answer, a transcript, a remote run's step)."""


STATUSES = tuple(Status)


class Keys:
    """The registry's keys: every kind of record is named here, and only here."""

    FINDINGS = "findings:"
    """A subagent's finding (its `FindingRecord.finding()`, timestamp, subtask, tokens)."""
    APPROVAL = "approval:"
    """An approval request and its decision (`orchestrator.approvals`)."""
    REMOTE = "remote:"
    """A remote agent's attempts at a subtask (`orchestrator.graph.remote`)."""
    TRANSCRIPT = "transcript:"
    """The conversation of a subagent whose provider failed."""
    MERGED = "merged:"
    """A batch's merged findings file."""
    ANSWER = "answer:final"
    """The lead's answer to the objective."""
    TOOL_CALL = "toolcall:"
    """A call of a user's tool: its idempotency key, then its result
    (`orchestrator.tools.call_keys`)."""

    @staticmethod
    def findings(subtask_key: str) -> str:
        return Keys.FINDINGS + subtask_key

    @staticmethod
    def approval(ident: str) -> str:
        return Keys.APPROVAL + ident

    @staticmethod
    def remote(subtask_key: str) -> str:
        return Keys.REMOTE + subtask_key

    @staticmethod
    def transcript(subtask_key: str) -> str:
        return Keys.TRANSCRIPT + subtask_key

    @staticmethod
    def merged(phase: str, count: int) -> str:
        return f"{Keys.MERGED}{phase}:{count}"

    @staticmethod
    def answer() -> str:
        return Keys.ANSWER

    @staticmethod
    def tool_call(scope: str, tool: str, n: int) -> str:
        return f"{Keys.TOOL_CALL}{scope}:{tool}:{n}"

    @staticmethod
    def subtask(prefix: str, key: str) -> str | None:
        """What follows `prefix` (`Keys.FINDINGS`, ...) in registry key `key`, or None
        when `key` is not of that kind."""
        return key[len(prefix) :] if key.startswith(prefix) else None


def registry_lookup(docs: Docs, task_id: str, key: str) -> dict[str, Any] | None:
    """The record for `key`, every note merged: {key, ts, payload, path?, ...}."""
    found = docs.backend.get_subagent(task_id, key)
    return None if found is None else {**found.data, "key": key}


def registry_records(docs: Docs, task_id: str) -> dict[str, dict[str, Any]]:
    """Every key's record (used to rebuild state without LangGraph's database)."""
    subagents = docs.backend.list_subagents(task_id)
    return {r.agent_id: {**r.data, "key": r.agent_id} for r in subagents}


def registry_history(docs: Docs, task_id: str, prefix: str) -> list[tuple[str, dict, float]]:
    """`(key, record, last noted at)` of every record whose key starts with `prefix`."""
    found = docs.backend.list_subagents(task_id)
    return [
        (r.agent_id, dict(r.data), r.updated_at) for r in found if r.agent_id.startswith(prefix)
    ]


def registry_note(
    docs: Docs, task_id: str, key: str, status: Status = Status.NOTED, /, **fields: Any
) -> None:
    """Merge one note for `key` (an intent, a result or a path) into its record, durably;
    `status` says what the note is, and is stored with the record."""
    docs.backend.transition_subagent(
        task_id, key, from_status=(None, *STATUSES), to_status=str(status), data=fields
    )


def registry_status(docs: Docs, task_id: str, key: str) -> str | None:
    """The status stored with `key`'s record (None: no record)."""
    found = docs.backend.get_subagent(task_id, key)
    if found is None:
        return None
    return found.status if found.status in STATUSES else legacy_status(found.data)


def legacy_status(fields: dict[str, Any]) -> str:
    """The status of a record stored without one (by an older tether), from its fields."""
    for field, status in (("decided", "decided"), ("actions", "requested"), ("path", "written")):
        if field in fields:
            return status
    return "started" if "ts" in fields else "noted"


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
