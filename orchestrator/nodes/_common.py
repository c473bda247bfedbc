"""Helpers shared by the nodes: hidden paths, the artifact registry, plan and checkpoints.

The **artifact registry** makes file-writing steps idempotent across crashes. Before a
step writes a named artifact (a subagent's findings, a batch's merged findings) it looks
the artifact's key up in `<memory root>/.tether/registry/{task_id}.jsonl`:

* a `done` record whose file exists -> the step is skipped and the recorded result reused;
* an `intent` record (killed between choosing a name and finishing) -> the step writes
  again with the *same* timestamp, hence the same file name, so a crash can never leave
  two findings files for one subtask;
* nothing -> the step records its intent (with the timestamp and the payload needed to
  write the file without rerunning the agent), writes, then records `done`.

Records are whole fsynced jsonl lines (`memory.durable.append_jsonl`); the folder is
hidden, so recall and the index ignore it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from memory.durable import append_jsonl, read_jsonl
from memory.errors import MemoryStoreError
from memory.status_file import write_status_file
from orchestrator.paths import iso_timestamp, utc
from orchestrator.state import OrchestratorState, current_phase, phase_subtasks


def registry_path(layout: Any, task_id: str) -> Path:
    from memory.paths import check_name

    return layout.root / ".tether" / "registry" / f"{check_name(task_id, 'task id')}.jsonl"


def langgraph_db(layout: Any) -> Path:
    """LangGraph's SQLite checkpointer file (hidden from the index)."""
    return layout.root / ".langgraph" / "state.sqlite"


def registry_lookup(layout: Any, task_id: str, key: str) -> dict[str, Any] | None:
    """The latest record for `key` merged over its intent: {ts, payload, path?}."""
    found: dict[str, Any] | None = None
    for _line, rec in read_jsonl(registry_path(layout, task_id)).records:
        if rec.get("key") != key:
            continue
        found = {**(found or {}), **rec}
    return found


def registry_records(layout: Any, task_id: str) -> dict[str, dict[str, Any]]:
    """Every key's merged record (used to rebuild state without LangGraph's database)."""
    out: dict[str, dict[str, Any]] = {}
    for _line, rec in read_jsonl(registry_path(layout, task_id)).records:
        key = rec.get("key")
        if key:
            out[key] = {**out.get(key, {}), **rec}
    return out


def registry_note(layout: Any, task_id: str, key: str, **fields: Any) -> None:
    append_jsonl(registry_path(layout, task_id), {"key": key, **fields})


def find_written(folder: Path, iso_ts: str, reader: Any, **meta: Any) -> Path | None:
    """An artifact written at `iso_ts` whose metadata matches `meta` (crash leftovers).

    Artifact names embed the timestamp, so a step that recorded its timestamp before a
    crash finds the file it may already have written instead of writing a second one.
    """
    from orchestrator import artifacts

    stamp = artifacts.timestamp(iso_ts)
    for path in sorted(folder.glob(f"*_{stamp}*.md")):
        try:
            values = reader(path)
        except (artifacts.ArtifactError, OSError):  # unreadable file: not ours to reuse
            continue
        if all(values.get(k) == v for k, v in meta.items()):
            return path
    return None


# -- plan ---------------------------------------------------------------------------------


def _cited(question: str, by: list[str]) -> tuple[str, bool]:
    """A key question, ticked and citing the findings that address it (if any)."""
    return (f"{question} (see {', '.join(by[:3])})", True) if by else (question, False)


def write_plan_file(ctx: Any, state: OrchestratorState) -> Path:
    """(Re)write `research_plans/{task_id}.md` from the state."""
    from orchestrator import artifacts
    from orchestrator.offline.evidence import answered_by

    findings = state.get("findings") or {}
    failed = state.get("failed") or {}
    subtasks = state.get("subtasks") or {}
    phase = current_phase(state)
    current = phase_subtasks(state, phase)
    completed = [f"{k}: {v['title']}" for k, v in subtasks.items() if k in findings]
    in_progress = [
        f"{k}: {v['title']}" for k, v in current.items() if k not in findings and k not in failed
    ]
    pending = [f"phase {p}" for p in state["phases"][state["phase_index"] + 1 :]]
    blocked = [
        f"{k}: {v['title']} (failed, retried on resume)"
        for k, v in current.items()
        if k in failed and k not in findings
    ]
    questions = [_cited(q, answered_by(q, findings)) for q in state.get("key_questions") or []]
    return artifacts.write_plan(
        ctx.layout,
        state["task_id"],
        objective=state["objective"],
        strategy=state.get("strategy") or "Plan each phase, fan out, merge, checkpoint.",
        key_questions=questions,
        completed=completed,
        in_progress=in_progress + blocked,
        pending=pending,
        constraints=list(state.get("constraints") or []),
        next_actions=list(state.get("next_actions") or []),
        phase=phase,
        project_dir=ctx.project_dir,
    )


RECENT_OPERATIONS = 10


def update_overview(ctx: Any, state: OrchestratorState, operation: str) -> None:
    """Keep `working/{task}/overview.md` current: the task, where it runs, what just happened.

    Only `Current Task`, `Known Context` (when still empty) and `Recent Operations` are
    written; the other sections belong to the agents and to people editing the file.
    """
    from memory.working import WorkingMemory
    from orchestrator import artifacts

    wm = WorkingMemory(ctx.store, state["task_id"]).ensure(objective=state["objective"])
    k, n = state["phase_index"] + 1, len(state["phases"])
    plan = ctx.layout.relative(ctx.layout.plan(state["task_id"]))
    wm.update_overview_section(
        "Current Task",
        f"{state['objective']}\n\nPhase: {current_phase(state)} ({k}/{n}: "
        f"{', '.join(state['phases'])}). Plan: `{plan}`.",
    )
    sections = artifacts.sections(wm.overview_text())
    if not re.sub(r"<!--.*?-->", "", sections.get("Known Context", ""), flags=re.S).strip():
        wm.update_overview_section(
            "Known Context", f"Workdir (read-only for the agents): `{state['workdir']}`"
        )
    earlier = [
        ln for ln in sections.get("Recent Operations", "").splitlines() if ln.startswith("- ")
    ]
    stamp = utc().strftime("%Y-%m-%d %H:%M")
    lines = [f"- {stamp} {operation}", *earlier][:RECENT_OPERATIONS]
    wm.update_overview_section("Recent Operations", "\n".join(lines))


# -- checkpoints --------------------------------------------------------------------------


#: State fields kept in a checkpoint's `extra` so a rebuilt lead continues where it was.
CHECKPOINT_LEAD_TURNS = 40
LEAD_FIELDS = (
    "strategy",
    "key_questions",
    "constraints",
    "next_actions",
    "lead_log",
    "lead_calls",
    "seed_snapshot",
    "first_call_done",
    "warned",
)


def checkpoint_payload(
    ctx: Any,
    state: OrchestratorState,
    *,
    trigger: str,
    next_action: str,
    active: list[str] | None = None,
    phase: str | None = None,
    extra: dict | None = None,
) -> dict[str, Any]:
    """The fields of a JSON checkpoint for the current state."""
    layout = ctx.layout
    phase = phase or current_phase(state)
    findings = state.get("findings") or {}
    failed = state.get("failed") or {}
    current = phase_subtasks(state, phase)
    completed = sorted(k for k in (state.get("subtasks") or {}) if k in findings)
    pending = sorted(k for k in current if k not in findings)
    blocked = sorted({v.get("agent", k) + ":" + k for k, v in failed.items() if k not in findings})
    plan = layout.plan(state["task_id"])
    return {
        "task_id": state["task_id"],
        "phase": phase,
        "timestamp": iso_timestamp(),
        "state": {
            "completed_subtasks": completed,
            "pending_subtasks": pending,
            "active_agents": list(active or []),
            "blocked_agents": blocked,
            "findings_count": len(findings),
        },
        "context_summary": _context_summary(state, phase),
        "next_action": next_action,
        "recovery_instructions": (
            f"Run `orchestrator resume --task {state['task_id']}`; finished subtasks "
            "(completed_findings) are not run again."
        ),
        "plan": layout.relative(plan) if plan.exists() else None,
        "findings": sorted(v["path"] for v in findings.values() if v.get("path")),
        "entries": [],
        "langgraph": {"thread_id": ctx.thread_id or None, "checkpoint_id": None},
        "objective": state["objective"],
        "workdir": state.get("workdir"),
        "phases": list(state["phases"]),
        "phase_index": state["phase_index"],
        "subtasks": [{**v, "key": k} for k, v in sorted((state.get("subtasks") or {}).items())],
        "completed_findings": {k: v["path"] for k, v in sorted(findings.items())},
        "extra": {
            "trigger": trigger,
            "status": state.get("status", "running"),
            "merged": dict(state.get("merged") or {}),
            "tokens": dict(state.get("tokens") or {}),
            "snapshots": list(state.get("snapshots") or []),
            **{f: state.get(f) for f in LEAD_FIELDS if f in state},
            # the newest turns are enough to continue; keeps checkpoints small and fast
            "lead_log": list(state.get("lead_log") or [])[-CHECKPOINT_LEAD_TURNS:],
            **(extra or {}),
        },
    }


def _context_summary(state: OrchestratorState, phase: str) -> str:
    k, n = state["phase_index"] + 1, len(state["phases"])
    done = len(state.get("findings") or {})
    return (
        f"Task {state['task_id']!r}: {state['objective']} Phase {phase} ({k}/{n}); "
        f"{done} subtask(s) finished so far."
    )


def write_checkpoint(
    ctx: Any, state: OrchestratorState, *, trigger: str, next_action: str, **kwargs: Any
) -> str:
    """Write `checkpoints/cp_{phase}_{ts}.json`; returns its path relative to the root."""
    from orchestrator import checkpoints

    payload = checkpoint_payload(ctx, state, trigger=trigger, next_action=next_action, **kwargs)
    path = checkpoints.write_checkpoint(
        ctx.layout, checkpoints.Checkpoint(**payload), project_dir=ctx.project_dir
    )
    ctx.emit("checkpoint", path=str(path), trigger=trigger, phase=payload["phase"])
    if trigger in STATUS_TRIGGERS:
        refresh_status_file(ctx, state)
    return ctx.layout.relative(Path(path))


#: Checkpoints after which the workdir's STATUS.md is refreshed: a phase's end and the
#: task's end (not every subagent, which would cost a scan of the memory per finding).
STATUS_TRIGGERS = frozenset({"phase_transition", "phase_failed", "task_complete", "interrupted"})


def refresh_status_file(ctx: Any, state: OrchestratorState) -> None:
    """Rewrite tether's block in `<workdir>/STATUS.md`; a failure is a warning, not a crash."""
    workdir = state.get("workdir")
    if not workdir:
        return
    try:
        write_status_file(ctx.store, workdir, task_id=state["task_id"])
    except (OSError, MemoryStoreError) as exc:
        ctx.emit("warning", message=f"STATUS.md not updated in {workdir}: {exc}")
