"""The lead's context snapshot: the handoff document a fresh lead (or agent) continues from.

`write_lead_snapshot` writes `context_snapshots/snap_{ts}.md` from the run's state: what
was found, what is left and what was said (`orchestrator.artifacts.snapshot_content`), what is in
play (findings and merged files, pending subtasks), how to resume, and in its metadata
block what a resume needs (objective, phases, planned subtasks, their findings, per-agent
tokens). `monitor` writes one at the token threshold, `advance` at the end of the task,
`Orchestrator.handoff` on request.
"""

from __future__ import annotations

import shlex
from dataclasses import asdict
from pathlib import Path
from typing import Any

from orchestrator.artifacts.decisions import decision_lines, waiting_lines
from orchestrator.artifacts.snapshot import write_snapshot
from orchestrator.artifacts.snapshot_content import lead_content
from orchestrator.graph.context import RunContext
from orchestrator.graph.lead import lead_context_tokens
from orchestrator.state import current_phase, phase_subtasks


def write_lead_snapshot(
    ctx: RunContext, state: dict[str, Any], *, reason: str, token_count: int | None = None
) -> Path:
    """Write `context_snapshots/snap_{ts}.md` for the lead's current context."""
    docs = ctx.docs
    phase = current_phase(state)
    findings = state.get("findings") or {}
    current = phase_subtasks(state, phase)
    plan = docs.plan(state["task_id"])
    files = [
        (v["path"], f"findings of {k} ({v.get('status', 'completed')})")
        for k, v in sorted(findings.items())
    ]
    files += [
        (p, f"merged findings of phase {ph}")
        for ph, p in sorted((state.get("merged") or {}).items())
    ]
    pending = [f"{k}: {v['title']}" for k, v in sorted(current.items()) if k not in findings]
    if token_count is None:
        token_count = lead_context_tokens(ctx, state)
    # the command works from any directory: a memory directory is named (a database's URL
    # is the environment's, with its password)
    where = f" --memory-dir {shlex.quote(str(docs.root))}" if docs.root is not None else ""
    return write_snapshot(
        docs,
        task_id=state["task_id"],
        phase=phase,
        reason=reason,
        token_count=token_count,
        **asdict(lead_content(ctx, state)),  # what was found, what is left, what was said
        active_agents=sorted({v["agent"] for v in current.values()}),
        important_context=(
            f"Objective: {state['objective']}\n"
            f"Workdir (paths of findings are relative to it): {state.get('workdir') or '.'}\n"
            f"Strategy: {state.get('strategy') or '-'}\n"
            + "".join(f"Key question: {q}\n" for q in (state.get("key_questions") or [])[-3:])
        ).strip(),
        files_in_play=files,
        decisions=decision_lines(docs, state["task_id"]),
        pending_decisions=[
            *(waiting_lines(docs, state["task_id"]) if state.get("status") != "done" else []),
            *pending,
        ],
        resume_instructions=(
            f"The task is done; nothing to resume. Read the final summary "
            f"`{(state.get('merged') or {}).get('final', 'findings/merged_*.md')}` and the plan."
            if state.get("status") == "done"
            else lambda own: (
                f"Run `orchestrator resume --task {state['task_id']} --from-snapshot "
                f"{shlex.quote(own)}{where}` to continue phase {phase} ({state['phase_index'] + 1}"
                f"/{len(state['phases'])}) with a fresh lead; finished subtasks are not run again."
            )
        ),
        plan_path=plan if docs.exists(plan) else None,
        extra={
            "objective": state["objective"],
            "workdir": state.get("workdir"),
            "phases": list(state["phases"]),
            "phase_index": state["phase_index"],
            "status": state.get("status", "running"),
            # per agent, so a resume from this snapshot continues the task's totals
            "tokens": dict(state.get("tokens") or {}),
            # what was planned and found, so a resume into a memory directory that lacks
            # some findings files can name them and run those subtasks again
            "subtasks": dict(state.get("subtasks") or {}),
            "completed_findings": {
                k: v.get("path") for k, v in sorted((state.get("findings") or {}).items())
            },
        },
    )
