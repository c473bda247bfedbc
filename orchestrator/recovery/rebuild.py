"""Rebuilding a run's state from tether's own files, without LangGraph's database.

The JSON checkpoints, the artifact registry (`orchestrator.artifacts.registry`) and the findings
files hold everything a run needs to continue:

* `state_from_checkpoint` rebuilds the state from a checkpoint (its JSON data) plus the
  findings written after it (registry records, else the findings files' metadata);
* `state_from_snapshot` starts a fresh lead from a context snapshot, carrying over the
  finished subtasks of earlier phases (and rewinding to a phase whose findings files this
  memory directory lacks, `missing_findings`);
* `retry_failed` reopens a finished state at the earliest phase with a failed subagent;
* `normalise` fills in what a rebuilt state lacks.

Which of them a resume uses is `orchestrator.recovery.resume.choose_recovery`'s decision;
`orchestrator status` reads a task through `state_from_checkpoint` too. Importing this
module is cheap (no pydantic, Jinja or LangGraph).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.artifacts.documents import FINDINGS, Docs
from orchestrator.artifacts.finding import FindingRecord
from orchestrator.artifacts.findings import (
    agent_file_name,
    findings_meta,
    findings_name,
    list_findings,
    read_findings,
)
from orchestrator.artifacts.registry import Keys, find_written, registry_records
from orchestrator.artifacts.snapshot import list_snapshots, read_snapshot
from orchestrator.errors import ArtifactError, RecoveryError
from orchestrator.state import LEAD_FIELDS, OrchestratorState, initial_state
from orchestrator.types import TEXT_FIELDS

if TYPE_CHECKING:
    from orchestrator.types import JsonObject


def _findings_record(
    docs: Docs, key: str, sub: JsonObject, path: str, payload: JsonObject | None
) -> JsonObject | None:
    """A state findings record from the registry payload, else the findings file."""
    if not docs.exists(path):
        return None
    if payload is None:
        try:
            meta = read_findings(docs.path(path), docs)
        except (ArtifactError, OSError):
            return None
        payload = {"status": meta.get("status"), **{k: meta.get(k) for k in TEXT_FIELDS}}
    record = FindingRecord.of(
        {
            **payload,
            "path": path,
            "agent": sub.get("agent", "researcher"),
            "title": sub.get("title", key),
            "phase": sub.get("phase") or key.split("/", 1)[0],
            "id": sub.get("id") or key,
            "tokens": 0,
        }
    )
    return dict(record.ref())


def registry_findings(docs: Docs, task_id: str) -> tuple[dict[str, dict], dict[str, dict]]:
    """`(subtasks, findings)` recorded in the artifact registry with an existing file."""
    subtasks: dict[str, dict] = {}
    findings: dict[str, dict] = {}
    for rkey, rec in registry_records(docs, task_id).items():
        key = Keys.subtask(Keys.FINDINGS, rkey)
        if key is None or not isinstance(rec.get("findings"), dict):
            continue  # not tether's (a hand edit, a tool): never stops a resume
        sub = rec.get("subtask") or {}
        path = rec.get("path")
        if not isinstance(sub, dict) or not isinstance(rec.get("ts"), str):
            continue
        if not path:
            named = sub.get("agent") and sub.get("id")
            try:
                expected = findings_name(agent_file_name(sub), rec["ts"]) if named else None
                found = find_written(
                    docs, FINDINGS, rec["ts"], findings_meta, expected=expected,
                    task_id=task_id, subtask_id=key,
                )  # fmt: skip
            except ValueError:  # a time that is not ISO 8601: not tether's record
                continue
            path = docs.rel(found) if found else None
        record = path and _findings_record(docs, key, sub, path, rec["findings"])
        if record:
            record["tokens"] = rec.get("tokens", 0)
            findings[key] = record
            if sub:
                subtasks[key] = sub
    return subtasks, findings


def with_recorded_findings(docs: Docs, state: JsonObject) -> JsonObject:
    """`state` plus every finding the artifact registry records with a file on disk.

    After a crash LangGraph's saved state (or the newest checkpoint) may lag behind the
    findings files: subagents that finished in the interrupted step are not in it yet. A
    snapshot or checkpoint written then must still count them, as `status` does.
    """
    reg_subtasks, reg_findings = registry_findings(docs, state["task_id"])
    findings = dict(state.get("findings") or {})
    added = {k: v for k, v in reg_findings.items() if k not in findings}
    if not added:
        return state
    failed = {k: v for k, v in (state.get("failed") or {}).items() if k not in added}
    subtasks = {**reg_subtasks, **(state.get("subtasks") or {})}
    tokens = with_findings_tokens(dict(state.get("tokens") or {}), subtasks, added)
    return {
        **state,
        "findings": {**findings, **added},
        "failed": failed,
        "subtasks": subtasks,
        "tokens": tokens,
    }


def scan_findings(docs: Docs, task_id: str) -> dict[str, str]:
    """`subtask key -> findings path` from the metadata of the findings files of a task."""
    found: dict[str, str] = {}
    for path in sorted(list_findings(docs, merged=False)):
        try:
            meta = findings_meta(path, docs)
        except (ArtifactError, OSError):  # unreadable file: not ours to reuse
            continue
        if meta.get("task_id") == task_id and meta.get("subtask_id"):
            found.setdefault(meta["subtask_id"], docs.rel(path))
    return found


def state_from_checkpoint(docs: Docs, cp: Mapping[str, object]) -> OrchestratorState:
    """Rebuild the graph state from a checkpoint's data plus findings and the registry.

    Args:
        cp: the checkpoint as JSON data (`Checkpoint.model_dump(mode="json")`, or a file's
            parsed JSON); fields it lacks take the checkpoint schema's defaults.
    """
    task_id = cp["task_id"]
    state = initial_state(
        task_id=task_id,
        objective=cp.get("objective") or "",
        workdir=cp.get("workdir") or ".",
        phases=list(cp.get("phases") or [cp["phase"]]),
        phase_index=cp.get("phase_index") or 0,
    )
    subtasks = {}
    for sub in cp.get("subtasks") or []:
        sub = dict(sub)
        key = str(sub.pop("key", None) or f"{sub.get('phase', cp['phase'])}/{sub['id']}")
        subtasks[key] = sub
    # the registry knows every finished subtask, also those finished after the checkpoint
    # and those of earlier waves, which a checkpoint only counts; findings files are read
    # only for what it lacks
    reg_subtasks, registered = registry_findings(docs, task_id)
    index = cp.get("phase_index") or 0
    reached = set((cp.get("phases") or [cp["phase"]])[: index + 1])
    for key, sub in reg_subtasks.items():
        if key not in subtasks and sub.get("phase") in reached and key in registered:
            subtasks[key] = sub
    findings = {k: record for k, record in registered.items() if k in subtasks}
    for key, path in (cp.get("completed_findings") or {}).items():
        if key not in findings:
            record = _findings_record(docs, key, subtasks.get(key, {}), path, None)
            if record:
                findings[key] = record
    missing = [k for k in subtasks if k not in findings]
    counted = int((cp.get("state") or {}).get("findings_count") or 0)
    if missing or len(findings) < counted:  # the registry may be gone: files name their subtask
        on_disk = scan_findings(docs, task_id)
        for key in missing:
            if key in on_disk:
                record = _findings_record(docs, key, subtasks[key], on_disk[key], None)
                if record:
                    findings[key] = record
        # earlier waves' subtasks, which a checkpoint only counts, from their files
        for key, path in on_disk.items():
            if key not in subtasks and key.split("/", 1)[0] in reached:
                sub = _subtask_from_file(docs, key, path)
                record = sub and _findings_record(docs, key, sub, path, None)
                if record:
                    subtasks[key], findings[key] = sub, record
    extra = dict(cp.get("extra") or {})
    merged = {ph: p for ph, p in (extra.get("merged") or {}).items() if docs.exists(p)}
    state.update(
        subtasks=subtasks,
        findings=findings,
        merged=merged,
        tokens=dict(extra.get("tokens") or {}),
        snapshots=list(extra.get("snapshots") or []),
        plan_path=cp.get("plan") or "",
    )
    if extra.get("status") == "done":  # a finished task stays finished without LangGraph's db
        state["status"] = "done"
    state["tokens"] = with_findings_tokens(state["tokens"], subtasks, findings)
    for field in LEAD_FIELDS:
        if field in extra:
            state[field] = extra[field]
    return state


def _subtask_from_file(docs: Docs, key: str, path: str) -> JsonObject | None:
    """A finished subtask as its findings file names it (id, title, agent, phase), for a
    rebuild with the artifact registry gone."""
    try:
        meta = findings_meta(docs.path(path), docs)
    except (ArtifactError, OSError):
        return None
    phase, _, sid = key.partition("/")
    named = str(meta.get("agent") or "")
    suffix = "-" + agent_file_name({"agent": "", "id": sid}).lstrip("-")
    agent = named[: -len(suffix)] if named.endswith(suffix) else named or "researcher"
    title = str(meta.get("task") or sid).removeprefix(f"[{key}] ")
    return {"id": sid, "title": title, "description": "", "agent": agent, "phase": phase,
            "scope": []}  # fmt: skip


def with_findings_tokens(
    tokens: dict[str, int], subtasks: dict[str, dict], findings: dict[str, dict]
) -> dict[str, int]:
    """`tokens` plus what each finished subagent spent, as its registry record says.

    A checkpoint or snapshot is older than the findings written after it; without this a
    fallback resume would forget those subagents' tokens and the task's total would shrink.
    """
    out = dict(tokens)
    for key, record in findings.items():
        agent = (subtasks.get(key) or {}).get("agent") or record.get("agent") or "agent"
        spent = int(record.get("tokens") or 0)
        if spent and out.get(f"{agent}:{key}", 0) < spent:
            out[f"{agent}:{key}"] = spent
    return out


def missing_findings(docs: Docs, snap: JsonObject) -> dict[str, str]:
    """Findings the snapshot names that this memory directory lacks: `{key: path}`.

    A snapshot carried to another memory directory (or one whose findings files were
    removed) must not silently drop that work: the resume names the files and runs those
    subtasks again.
    """
    extra = dict(snap.get("extra") or {})
    named = dict(extra.get("completed_findings") or {})
    if not named or not snap.get("task_id"):
        return {}
    _subtasks, present = registry_findings(docs, snap["task_id"])
    return {k: p for k, p in sorted(named.items()) if k not in present and not docs.exists(p)}


def state_from_snapshot(docs: Docs, snap: JsonObject) -> JsonObject:
    """A state whose lead starts fresh from `snap` (a `read_snapshot` result)."""
    extra = dict(snap.get("extra") or {})
    task_id = snap.get("task_id")
    objective = extra.get("objective") or snap.get("objective")
    phases = list(extra.get("phases") or ([snap["phase"]] if snap.get("phase") else []))
    if not task_id or not objective or not phases:
        raise RecoveryError(
            f"snapshot {snap.get('path')!r} lacks the task id, objective or phase; "
            "write one with `orchestrator handoff`"
        )
    index = int(
        extra.get("phase_index", phases.index(snap["phase"]) if snap.get("phase") in phases else 0)
    )
    planned = dict(extra.get("subtasks") or {})
    missing = missing_findings(docs, snap)
    redo = [phases.index(planned[k]["phase"]) for k in missing
            if planned.get(k, {}).get("phase") in phases]  # fmt: skip
    if redo:  # start again at the earliest phase with lost findings; spawn runs only those
        index = min(index, *redo)
    state = initial_state(
        task_id=task_id,
        objective=objective,
        workdir=extra.get("workdir") or ".",
        phases=phases,
        phase_index=min(index, len(phases) - 1),
    )
    reg_subtasks, reg_findings = registry_findings(docs, task_id)
    earlier = set(phases[: state["phase_index"]])
    keep = {k for k, v in reg_subtasks.items() if v.get("phase") in earlier}
    state["subtasks"] = {k: reg_subtasks[k] for k in keep}
    state["findings"] = {k: reg_findings[k] for k in keep}
    if redo:  # the rewound phase keeps its plan: its found subtasks are not run again
        current = phases[state["phase_index"]]
        for key, sub in planned.items():
            if sub.get("phase") == current:
                state["subtasks"][key] = sub
                if key in reg_findings:
                    state["findings"][key] = reg_findings[key]
    state["tokens"] = with_findings_tokens(
        dict(extra.get("tokens") or {}), state["subtasks"], state["findings"]
    )
    state["seed_snapshot"] = docs.inside(snap["path"])
    if state["seed_snapshot"] is not None and not docs.exists(state["seed_snapshot"]):
        state["seed_snapshot"] = None  # a file outside the memory (`--from-snapshot PATH`)
    if state["seed_snapshot"] is None:
        state["lead_log"] = [
            {
                "role": "user",
                "content": "Context snapshot you continue from:\n" + snap.get("text", ""),
            }
        ]
    state["first_call_done"] = True
    return state


def normalise(state: JsonObject) -> JsonObject:
    """Fill in any state field a rebuilt state lacks with its initial value."""
    base = initial_state(
        task_id=state["task_id"],
        objective=state["objective"],
        workdir=state.get("workdir") or ".",
        phases=state["phases"],
        phase_index=state.get("phase_index", 0),
    )
    return {**base, **{k: v for k, v in state.items() if v is not None or k in base}}


def task_snapshots(docs: Docs, task_id: str) -> list[Path]:
    """Snapshots written for `task_id`, newest first."""
    out = []
    for path in list_snapshots(docs):
        try:
            if read_snapshot(path, docs).get("task_id") == task_id:
                out.append(path)
        except (ArtifactError, OSError):  # unreadable file: not ours to reuse
            continue
    return out


def retry_failed(values: JsonObject) -> JsonObject:
    """A finished state with failed subagents, reopened at the earliest failed phase.

    Finished subagents keep their findings (the registry returns them without running);
    the failed ones have none, so `spawn` runs them again, and each later phase is merged
    again (a merged file is keyed by its phase and finding count, so only changed
    batches get a new file).
    """
    phases = list(values["phases"])
    failed_phases = {
        values["subtasks"][k]["phase"]
        for k in values.get("failed") or {}
        if k in (values.get("subtasks") or {})
    }
    index = min((phases.index(p) for p in failed_phases if p in phases), default=0)
    redo = set(phases[index:]) | {"final"}
    state = dict(values)
    state.update(
        status="running",
        phase_index=index,
        final_summary=None,
        merged={p: v for p, v in (values.get("merged") or {}).items() if p not in redo},
    )
    return state
