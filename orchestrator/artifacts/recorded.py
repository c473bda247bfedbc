"""A subagent's finding as the artifact registry records it: read back, and its file repaired.

The subagent node (`orchestrator.graph.nodes.subagent`) records each finding under
`Keys.findings(subtask_key)` (the agent's finding, the chosen timestamp, the subtask, the
tokens) before it writes the findings file, without fsync. This module reads such a record
back as a `FindingRecord` (`recorded_finding`: a replayed subagent reuses it instead of
running again) and, before a resume, writes again the files a crash of the machine lost or
cut short (`repair_findings`), under the names recorded for them.

Invariant: a repair only writes a file that does not read back as its subtask's findings,
under its recorded name; it never deletes anything.
"""

from __future__ import annotations

from typing import Any

from orchestrator.artifacts.documents import FINDINGS, Docs
from orchestrator.artifacts.finding import FindingRecord
from orchestrator.artifacts.findings import finding_file_name, finding_text, findings_meta
from orchestrator.artifacts.registry import (
    Keys,
    Status,
    find_written,
    registry_note,
    registry_records,
)
from orchestrator.artifacts.text import parse_meta


def _reads_back(data: bytes | None, meta: dict[str, str]) -> bool:
    """Whether `data` is a whole findings file with these metadata values."""
    try:
        found = parse_meta(data.decode("utf-8"), "findings") if data else None
    except UnicodeDecodeError:
        return False
    return found is not None and all(found.get(k) == v for k, v in meta.items())


def repaired_message(rel: str) -> str:
    """The warning for a findings file `repair_findings` wrote again."""
    return (
        f"findings file {rel} was missing or cut short (a crash of the machine?); "
        "written again from the artifact registry"
    )


def repair_findings(docs: Docs, task_id: str, project_dir: str | None) -> list[str]:
    """Write again, durably, the findings files of `task_id` that a crash of the machine
    lost or cut short; returns their paths (relative to the memory directory).

    A subagent's file is written without fsync: its registry record, appended durably
    just before, holds the findings. So a resume first checks that every recorded file
    reads back as its subtask's findings. A file that does not (empty, cut short: its
    metadata comment ends it) is replaced in place, since its name is the one recorded for
    it; a missing one is created under that name.
    """
    repaired = []
    for rkey, rec in registry_records(docs, task_id).items():
        sub, findings = rec.get("subtask"), rec.get("findings")
        key = Keys.subtask(Keys.FINDINGS, rkey)
        if not (
            key is not None
            and isinstance(findings, dict)
            and isinstance(sub, dict)
            and sub.get("agent")
            and sub.get("id")
            and isinstance(rec.get("ts"), str)
        ):
            continue  # not a subagent's record, or not one tether wrote whole
        record = recorded_finding(key, rec)
        noted = rec.get("path")
        expected = noted if isinstance(noted, str) and noted else None
        expected = expected or finding_file_name(record, rec["ts"])
        meta = {"task_id": task_id, "subtask_id": key}
        if _reads_back(docs.read_bytes(expected), meta):
            continue
        found = find_written(docs, FINDINGS, rec["ts"], findings_meta, **meta)
        if found is not None:  # under another name of its time (taken; killed before noting)
            registry_note(docs, task_id, rkey, Status.WRITTEN, path=docs.rel(found))
            continue
        text = finding_text(record, task_id, rec["ts"], project_dir)
        docs.write_text(expected, text)
        repaired.append(expected)
    return repaired


def recorded_finding(key: str, rec: dict[str, Any]) -> FindingRecord:
    """The finding of subtask `key` from its registry record (as the agent submitted it)."""
    sub = rec.get("subtask") or {}
    return FindingRecord.of(
        {
            **rec["findings"],
            "key": key,
            "agent": sub.get("agent"),
            "title": sub.get("title"),
            "phase": rec.get("phase") or sub.get("phase"),
            "id": sub.get("id"),
            "tokens": rec.get("tokens"),
        }
    )
