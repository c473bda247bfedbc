"""merge: synthesise the phase's findings into `findings/merged_{ts}.md`, update the plan,
checkpoint `agent_completion`.

Idempotent: the merged file of a batch is registered like findings (key
`merged:{phase}:{number of findings}`), so a replay after a crash reuses the file it
wrote instead of adding a second one, and a phase already merged in the state is not
merged again. The merged summary also enters the lead's conversation (`lead_log`), which
is what makes the lead's context grow from phase to phase (and what the token monitor
watches).
"""

from __future__ import annotations

from typing import Any

from orchestrator.nodes._common import (
    find_written,
    registry_lookup,
    registry_note,
    update_overview,
    write_checkpoint,
    write_plan_file,
)
from orchestrator.nodes.plan import log_lead
from orchestrator.recovery import fault
from orchestrator.state import OrchestratorState, current_phase, phase_subtasks


def phase_findings(state: OrchestratorState, phase: str) -> list[dict[str, Any]]:
    """Findings records of `phase`, in subtask-key order (stable across runs)."""
    findings = state.get("findings") or {}
    keys = sorted(k for k in phase_subtasks(state, phase) if k in findings)
    return [{"key": k, **findings[k]} for k in keys]


def merged_digest(phase: str, records: list[dict[str, Any]], failed: dict[str, Any]) -> str:
    """A compact text of the batch for the lead's conversation."""
    lines = [f"Findings of phase {phase} ({len(records)} subagent(s)):"]
    for r in records:
        lines.append(f"- {r['key']} [{r.get('status', 'completed')}]: {r.get('summary', '')}")
        lines += [f"  * {d}" for d in (r.get("key_discoveries") or [])[:5]]
    for key, info in sorted(failed.items()):
        lines.append(f"- {key} FAILED: {info.get('error', '')}")
    return "\n".join(lines)


MERGED_FIELDS = (
    "agent",
    "summary",
    "status",
    "key_discoveries",
    "files",
    "files_written",
    "open_questions",
    "recommendations",
    "path",
    "phase",
)


def merged_input(task_id: str, record: dict[str, Any]) -> dict[str, Any]:
    """A findings record of the state in the shape `artifacts.write_merged` takes."""
    out = {k: record[k] for k in MERGED_FIELDS if record.get(k) is not None}
    return {
        **out,
        "task": record.get("title", ""),
        "subtask_id": record.get("key"),
        "task_id": task_id,
    }


def _write_merged(ctx: Any, state: OrchestratorState, phase: str, records: list[dict]) -> str:
    from orchestrator import artifacts

    key = f"merged:{phase}:{len(records)}"
    task_id = state["task_id"]
    rec = registry_lookup(ctx.layout, task_id, key) or {}
    if rec.get("path") and (ctx.layout.root / rec["path"]).exists():
        return rec["path"]
    ts = rec.get("ts")
    found = ts and find_written(
        ctx.layout.findings, ts, artifacts.read_merged, task_id=task_id, phase=phase
    )
    if found:
        registry_note(ctx.layout, task_id, key, path=ctx.layout.relative(found))
        return ctx.layout.relative(found)
    if not ts:
        ts = artifacts.iso_timestamp()
        registry_note(ctx.layout, task_id, key, ts=ts)
    fault("merge_before_write")
    path = artifacts.write_merged(
        ctx.layout,
        task_id,
        phase,
        [merged_input(task_id, r) for r in records],
        timestamp=ts,
        project_dir=ctx.project_dir,
    )
    relative = ctx.layout.relative(path)
    registry_note(ctx.layout, state["task_id"], key, path=relative)
    fault("merge_after_write")
    return relative


def merge_node(state: OrchestratorState, runtime: Any) -> dict[str, Any]:
    ctx = runtime.context
    phase = current_phase(state)
    if phase in (state.get("merged") or {}):
        return {}
    records = phase_findings(state, phase)
    failed = {
        k: v
        for k, v in (state.get("failed") or {}).items()
        if k in phase_subtasks(state, phase) and k not in (state.get("findings") or {})
    }
    merged_path = _write_merged(ctx, state, phase, records)
    digest = merged_digest(phase, records, failed)
    new_state = {**state, "merged": {**(state.get("merged") or {}), phase: merged_path}}
    write_plan_file(ctx, new_state)
    update_overview(
        ctx, new_state, f"merged {len(records)} finding(s) of phase {phase} into `{merged_path}`"
    )
    log_lead(ctx, state["task_id"], "user", digest, phase=phase, node="merge")
    ctx.emit(
        "merged",
        phase=phase,
        path=str(ctx.layout.root / merged_path),
        findings=len(records),
        failed=sorted(failed),
    )
    cp = write_checkpoint(
        ctx,
        new_state,
        trigger="agent_completion",
        next_action=f"Check the token gauge, then finish phase {phase}",
    )
    fault("merge_after_checkpoint")
    return {
        "merged": {phase: merged_path},
        "lead_log": [*(state.get("lead_log") or []), {"role": "user", "content": digest}],
        "checkpoints": {cp.rsplit("/", 1)[-1].removesuffix(".json"): cp},
    }
