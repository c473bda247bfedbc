"""A subagent's finding: the whole record tether's files hold, and the reference the graph
state holds.

The texts of a finding (summary, discoveries, files, open questions, recommendations) are
written durably twice by tether before the graph state says the subagent ran: as a line of
the task's artifact registry (`findings:{key}`) and as `findings/{agent}_{ts}.md`. The graph
state, which LangGraph's checkpointer stores again at every super-step, therefore carries
a `FindingRef` only: where the file is, who wrote it, its status and counts. Whoever needs
the texts (the merge, the final synthesis, a snapshot) expands the reference with
`finding_record`, from the registry (read once per run) or, failing that, from the file.

Invariant: a reference in the state always names a findings file or a registry record
that holds the whole finding; expanding it never needs the graph state.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from typing_extensions import TypedDict

from orchestrator.run_model import Finding, finding_values

TEXT_FIELDS = tuple(k for k in Finding.model_fields if k != "status")
"""The fields of a finding that are texts (what the graph state does not carry)."""


class FindingRef(TypedDict, total=False):
    """What the graph state holds of one finished subagent's finding."""

    path: str
    """The findings file, relative to the memory root."""
    agent: str
    title: str
    phase: str
    id: str
    """The subtask's id (its key is `phase/id`)."""
    tokens: int
    status: str
    """`completed`, `partial` or `failed`, as the agent reported it."""
    counts: dict[str, int]
    """How many `key_discoveries`, `files` (examined) and `files_written` it holds."""


def finding_ref(record: Mapping[str, Any]) -> FindingRef:
    """The reference of a whole finding record (identity, status and counts; no texts)."""
    return FindingRef(
        path=str(record.get("path") or ""),
        agent=str(record.get("agent") or "researcher"),
        title=str(record.get("title") or ""),
        phase=str(record.get("phase") or ""),
        id=str(record.get("id") or ""),
        tokens=int(record.get("tokens") or 0),
        status=str(record.get("status") or "completed"),
        counts={
            "key_discoveries": len(record.get("key_discoveries") or []),
            "files": len(record.get("files") or []),
            "files_written": len(record.get("files_written") or []),
        },
    )


def texts_of(payload: Mapping[str, Any] | None) -> dict[str, Any]:
    """The text fields of a finding from a registry payload or a findings file's values."""
    return finding_values(payload, exclude=("status",))


def finding_record(
    key: str,
    ref: Mapping[str, Any],
    registry: Callable[[str], Mapping[str, Any] | None],
    read_file: Callable[[str], Mapping[str, Any] | None],
) -> dict[str, Any]:
    """The whole finding of subtask `key` (its reference plus its texts).

    Args:
        registry: `registry key -> record` (e.g. `RunContext.registry_record` bound to the
            task); its `findings:{key}` record holds the finding as the agent submitted it.
        read_file: `path -> the values a findings file was written with`, or None when it
            cannot be read (used when the registry has no record, e.g. an older task).
    """
    rec = registry(f"findings:{key}") or {}
    payload = rec.get("findings")
    if payload is None and ref.get("path"):
        payload = read_file(str(ref["path"]))
    # a reference of an older run may still carry the texts: they stand when nothing else does
    out: dict[str, Any] = {**ref, **texts_of(payload if payload is not None else ref)}
    out.pop("counts", None)
    if payload is not None and payload.get("status") and not ref.get("status"):
        out["status"] = payload["status"]
    return out
