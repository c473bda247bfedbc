"""What several nodes write: checkpoints, the research plan, the overview, merged findings.

* `checkpoint_state` writes `checkpoints/cp_{phase}_{ts}.json` from the state
  (`checkpoint_payload`), reports it, and after a phase's or the task's end refreshes the
  workdir's `STATUS.md` when the run asks for it (`RunContext.status_file`);
  `checkpoint_update` is the state update that records it.
* `write_plan_file` rewrites `research_plans/{task_id}.md` from the state (a person's edits
  are kept, see `orchestrator.artifacts.plan.keep_hand_edits`).
* `update_overview` keeps `working/{task}/overview.md` current.
* `merge_findings` writes a batch's `findings/merged_{ts}.md` once, through the artifact
  registry (`orchestrator.artifacts.registry`), so a replayed step never writes a second file.

Every node imports from here and from `orchestrator.graph.lead` and
`orchestrator.graph.handoff`, never from another node.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memory.errors import MemoryStoreError
from memory.task.status_file import write_status_file
from memory.task.working import WorkingMemory
from orchestrator.artifacts.checkpoint import write_checkpoint
from orchestrator.artifacts.checkpoint_model import Checkpoint
from orchestrator.artifacts.decisions import decision_lines, key_decisions
from orchestrator.artifacts.documents import FINDINGS
from orchestrator.artifacts.finding import FindingRecord
from orchestrator.artifacts.findings import merged_name, read_merged, write_merged
from orchestrator.artifacts.names import iso_timestamp, utc
from orchestrator.artifacts.plan import addressed_by, write_plan
from orchestrator.artifacts.registry import (
    Keys,
    Status,
    find_written,
    registry_lookup,
    registry_note,
)
from orchestrator.artifacts.text import sections
from orchestrator.config.workflow import WRITE_TOOLS
from orchestrator.faults import fault
from orchestrator.graph.context import RunContext
from orchestrator.state import (
    LEAD_FIELDS,
    OrchestratorState,
    current_phase,
    merge_key,
    phase_subtasks,
    skipped_phases,
    wave_subtasks,
)
from orchestrator.types import Plan, model_values

if TYPE_CHECKING:
    from orchestrator.types import JsonObject

# -- plan and overview ----------------------------------------------------------------------


def write_plan_file(ctx: RunContext, state: OrchestratorState) -> Path:
    """(Re)write `research_plans/{task_id}.md` from the state."""
    findings = state.get("findings") or {}
    failed = state.get("failed") or {}
    subtasks = state.get("subtasks") or {}
    phase = current_phase(state)
    current = phase_subtasks(state, phase)
    completed = [f"{k}: {v['title']}" for k, v in subtasks.items() if k in findings]
    if len(completed) > COMPLETED_SHOWN:  # the plan is in the lead's every prompt
        earlier = len(completed) - COMPLETED_SHOWN
        completed = [
            f"{earlier} earlier (in the merged files under findings/)",
            *completed[-COMPLETED_SHOWN:],
        ]
    in_progress = [
        f"{k}: {v['title']}" for k, v in current.items() if k not in findings and k not in failed
    ]
    skipped = skipped_phases(state)
    pending = [
        f"phase {p}" for p in state["phases"][state["phase_index"] + 1 :] if p not in skipped
    ]
    blocked = [
        f"{k}: {v['title']} (failed, retried on resume)"
        for k, v in current.items()
        if k in failed and k not in findings
    ]
    if ctx.workflow.approve_plan and phase not in (state.get("approved") or []):
        waiting, in_progress = in_progress, []  # nothing runs before a person approves
    else:
        waiting = []
    return write_plan(
        ctx.docs,
        state["task_id"],
        objective=state["objective"],
        **{
            **model_values(Plan, state),  # the lead's plan, as the state carries it
            "strategy": state.get("strategy") or "Plan each phase, fan out, merge, checkpoint.",
            "key_questions": _questions(ctx, state),
        },
        completed=completed,
        in_progress=in_progress + blocked,
        waiting=waiting,
        pending=pending,
        skipped=[f"phase {p} ({state.get('done_reason')})" for p in skipped],
        waves=_waves(state),
        phase=phase,
        project_dir=ctx.project_dir,
        answer=state.get("answer") or "",
        answer_path=(state.get("answer_info") or {}).get("path") or "",
        notes=state.get("plan_notes") or [],
    )


COMPLETED_SHOWN = 20
"""Completed subtasks the plan names (the newest; the others are counted)."""


def _waves(state: OrchestratorState) -> list[str]:
    """`phase: N waves, M subtasks (current: wave W)` for each phase that ran in waves."""
    count: dict[str, set[int]] = {}
    subtasks: dict[str, int] = {}
    for sub in (state.get("subtasks") or {}).values():
        phase = sub.get("phase", "")
        count.setdefault(phase, set()).add(int(sub.get("wave") or 1))
        subtasks[phase] = subtasks.get(phase, 0) + 1
    now, wave = current_phase(state), int(state.get("wave") or 1)
    running = state.get("status") != "done"
    out = []
    for phase in state["phases"]:
        waves = max(len(count.get(phase, ())), wave if phase == now else 0)
        if waves > 1:
            current = f" (current: wave {wave})" if phase == now and running else ""
            out.append(f"{phase}: {waves} waves, {subtasks.get(phase, 0)} subtasks{current}")
    return out


def _questions(ctx: RunContext, state: OrchestratorState) -> list[dict[str, Any]]:
    """The key questions with whether the lead answered them (`PhasePlan.answered`) and,
    once the task is done, what addressed the others (`artifacts.plan.addressed_by`)."""
    answered = set(state.get("answered") or [])
    questions = [
        {"text": q, "answered": i in answered}
        for i, q in enumerate(state.get("key_questions") or [], 1)
    ]
    if state.get("status") != "done" or all(q["answered"] for q in questions):
        return questions
    subtasks = state.get("subtasks") or {}
    records = [
        {**r.model_dump(), "scope": (subtasks.get(r.key) or {}).get("scope") or []}
        for r in phase_findings(ctx, state)
    ]
    for q in questions:
        if not q["answered"]:
            q["addressed_by"] = addressed_by(
                q["text"], records, phases=state["phases"], answer=state.get("answer") or ""
            )
    return questions


RECENT_OPERATIONS = 10


def update_overview(ctx: RunContext, state: OrchestratorState, operation: str) -> None:
    """Keep `working/{task}/overview.md` current: the task, where it runs, the decisions
    people made on its approval requests, what just happened.

    Only `Current Task`, `Known Context` (its `Workdir` line; the section is otherwise the
    agents' and people's), tether's block of `Key Decisions` and `Recent Operations` are
    written; the other sections belong to the agents and to people editing the file.
    """
    wm = WorkingMemory(ctx.store, state["task_id"]).ensure(objective=state["objective"])
    k, n = state["phase_index"] + 1, len(state["phases"])
    plan = ctx.docs.plan(state["task_id"])
    stamp = utc().strftime("%Y-%m-%d %H:%M")
    decided = decision_lines(ctx.docs, state["task_id"])  # approvals and rejections

    def bodies(text: str) -> dict[str, str]:  # one durable write for all three sections
        parts = sections(text)
        out = {
            "Current Task": f"{state['objective']}\n\nPhase: {current_phase(state)} ({k}/{n}: "
            f"{', '.join(state['phases'])}). Plan: `{plan}`."
        }
        known = parts.get("Known Context", "")
        if not re.sub(r"<!--.*?-->", "", known, flags=re.S).strip():
            out["Known Context"] = workdir_line(ctx, state)
        elif any(ln.startswith("Workdir") for ln in known.splitlines()):
            # tether's line, kept true (an older one said "read-only" whatever the tools)
            out["Known Context"] = "\n".join(
                workdir_line(ctx, state) if ln.startswith("Workdir") else ln
                for ln in known.splitlines()
            )
        out["Key Decisions"] = key_decisions(parts.get("Key Decisions", ""), decided)
        recent = parts.get("Recent Operations", "")
        earlier = [ln for ln in recent.splitlines() if ln.startswith("- ")]
        out["Recent Operations"] = "\n".join(
            [f"- {stamp} {operation}", *earlier][:RECENT_OPERATIONS]
        )
        return out

    wm.update_overview_sections(bodies)


def workdir_line(ctx: RunContext, state: OrchestratorState) -> str:
    """The overview's line on the workdir: which agents may change it (a workdir write
    tool in their tools: `config.workflow.WRITE_TOOLS`) and whether their writes wait for
    a person (`interrupt_on`)."""
    writers = []
    for name, spec in sorted(ctx.workflow.agents.items()):
        tools = [t for t in spec.tools if t in WRITE_TOOLS]
        if tools:
            gated = [t for t in tools if spec.interrupt_on.get(t)]
            note = "each write approved by a person" if gated == tools else "without approval"
            if gated and gated != tools:
                note = f"{', '.join(gated)} approved by a person"
            writers.append(f"{name} ({', '.join(tools)}; {note})")
    where = f"`{state['workdir']}`"
    if not writers:
        return f"Workdir (read-only for the agents): {where}"
    writable = "; ".join(writers)
    return f"Workdir: {where}; agents that may write to it: {writable}; read-only for the others."


# -- checkpoints --------------------------------------------------------------------------
CHECKPOINT_LEAD_TURNS = 40
"""The lead's newest turns kept in a checkpoint (enough to continue, small and fast)."""


def checkpoint_payload(
    ctx: RunContext,
    state: OrchestratorState,
    *,
    trigger: str,
    next_action: str,
    active: list[str] | None = None,
    phase: str | None = None,
    extra: dict | None = None,
    pending_approvals: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The fields of a JSON checkpoint for the current state.

    A checkpoint holds the current wave (its subtasks, their findings), what is not
    finished anywhere (pending or failed subtasks), counts and references; the subtasks
    and findings of earlier waves are in the artifact registry and the findings files,
    which a rebuild reads (`recovery.rebuild.state_from_checkpoint`). So a checkpoint's
    size follows one wave, and the bytes of all of a task's checkpoints grow linearly
    with its subagents, not with waves x subagents.
    """
    docs = ctx.docs
    phase = phase or current_phase(state)
    findings = state.get("findings") or {}
    failed = state.get("failed") or {}
    subtasks = state.get("subtasks") or {}
    current = phase_subtasks(state, phase)
    wave = set(wave_subtasks(state)) if phase == current_phase(state) else set(current)
    # the current wave, and whatever is not finished anywhere (pending, failed: retried)
    listed = {k: v for k, v in subtasks.items() if k in wave or k not in findings}
    completed = sorted(k for k in listed if k in findings)
    pending = sorted(k for k in current if k not in findings)
    blocked = sorted({v.get("agent", k) + ":" + k for k, v in failed.items() if k not in findings})
    plan = docs.plan(state["task_id"])
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
        "plan": plan if docs.exists(plan) else None,
        "findings": sorted(findings[k]["path"] for k in completed if findings[k].get("path")),
        "entries": [],
        "langgraph": {"thread_id": ctx.thread_id or None, "checkpoint_id": None},
        "objective": state["objective"],
        "workdir": state.get("workdir"),
        "phases": list(state["phases"]),
        "phase_index": state["phase_index"],
        "subtasks": [{**v, "key": k} for k, v in sorted(listed.items())],
        "completed_findings": {k: findings[k]["path"] for k in completed},
        "pending_approvals": list(pending_approvals or []),
        "skipped_phases": skipped_phases(state) if state.get("status") == "done" else [],
        "extra": {
            "trigger": trigger,
            "status": state.get("status", "running"),
            "merged": _current_merged(state),
            "tokens": _unfinished(state.get("tokens"), findings, listed),
            "snapshots": list(state.get("snapshots") or []),
            "failed": dict(state.get("failed") or {}),  # errors, for `orchestrator status`
            **{f: state.get(f) for f in LEAD_FIELDS if f in state},
            # the newest turns are enough to continue; keeps checkpoints small and fast
            "lead_log": list(state.get("lead_log") or [])[-CHECKPOINT_LEAD_TURNS:],
            "lead_calls": list(state.get("lead_calls") or [])[-CHECKPOINT_LEAD_TURNS:],
            "usage": _usage(state.get("usage"), findings, listed),
            **(extra or {}),
        },
    }


EARLIER = "subagents (earlier waves)"
"""The usage key under which a checkpoint sums the subagents of earlier waves."""


def _finished_earlier(key: str, findings: dict[str, Any], listed: dict[str, Any]) -> bool:
    """Whether a `tokens`/`usage` key (`{agent}:{subtask key}`) is a subagent of an earlier
    wave that finished (its spend is in its registry record)."""
    agent, _, subtask = key.partition(":")
    return bool(subtask) and subtask in findings and subtask not in listed


def _unfinished(
    tokens: dict[str, int] | None, findings: dict[str, Any], listed: dict[str, Any]
) -> dict[str, int]:
    """The agents' tokens but those of finished subagents of earlier waves (a rebuild adds
    theirs back from the registry: `recovery.rebuild.with_findings_tokens`)."""
    return {k: v for k, v in (tokens or {}).items() if not _finished_earlier(k, findings, listed)}


def _usage(
    usage: dict[str, dict[str, int]] | None, findings: dict[str, Any], listed: dict[str, Any]
) -> dict[str, dict[str, int]]:
    """The agents' usage with the finished subagents of earlier waves summed under one key."""
    out: dict[str, dict[str, int]] = {}
    for key, value in (usage or {}).items():
        name = EARLIER if _finished_earlier(key, findings, listed) else key
        into = out.setdefault(name, {})
        for field, n in (value or {}).items():
            into[field] = into.get(field, 0) + int(n or 0)
    return out


def _current_merged(state: OrchestratorState) -> dict[str, str]:
    """The merged batches a continuing run still looks up: the current wave's (`merge`
    skips a batch it finds), the final synthesis."""
    batch = merge_key(current_phase(state), int(state.get("wave") or 1))
    return {k: v for k, v in (state.get("merged") or {}).items() if k in (batch, "final")}


def _context_summary(state: OrchestratorState, phase: str) -> str:
    k, n = state["phase_index"] + 1, len(state["phases"])
    done = len(state.get("findings") or {})
    return (
        f"Task {state['task_id']!r}: {state['objective']} Phase {phase} ({k}/{n}); "
        f"{done} subtask(s) finished so far."
    )


def checkpoint_state(
    ctx: RunContext,
    state: OrchestratorState,
    *,
    trigger: str,
    next_action: str,
    status_file: bool = True,
    **kwargs: object,
) -> str | None:
    """Write `checkpoints/cp_{phase}_{ts}.json`; returns its path relative to the root, or
    None when the external-memory skill turned this trigger off (`before_spawning`,
    `agent_completion`, `phase_transition`: false). Checkpoints of a failure, an
    interruption, a wait for approval, the task's end or a person's request are always
    written.

    `status_file=False`: leave STATUS.md to a checkpoint that follows at once (the task's
    last phase transition, right before `task_complete`).
    """
    if trigger in OPTIONAL_TRIGGERS and not getattr(ctx.triggers, trigger):
        if trigger in STATUS_TRIGGERS and status_file and ctx.status_file:
            refresh_status_file(ctx, state)
        return None
    payload = checkpoint_payload(ctx, state, trigger=trigger, next_action=next_action, **kwargs)
    path = write_checkpoint(ctx.docs, Checkpoint.own(payload), project_dir=ctx.project_dir)
    ctx.emit("checkpoint", path=str(path), trigger=trigger, phase=payload["phase"])
    if trigger in STATUS_TRIGGERS and status_file and ctx.status_file:
        refresh_status_file(ctx, state, latest=ctx.docs.rel(path))
    return ctx.docs.rel(path)


#: Checkpoints the external-memory skill's triggers can turn off.
OPTIONAL_TRIGGERS = frozenset({"before_spawning", "agent_completion", "phase_transition"})

#: Checkpoints after which the workdir's STATUS.md is refreshed: a phase's end and the
#: task's end (not every subagent, which would cost a scan of the memory per finding).
STATUS_TRIGGERS = frozenset({"phase_transition", "phase_failed", "task_complete", "interrupted"})


def refresh_status_file(
    ctx: RunContext, state: OrchestratorState, latest: str | None = None
) -> None:
    """Rewrite tether's block in `<workdir>/STATUS.md`; a failure is a warning, not a crash.

    `latest`: the checkpoint just written (the status reads it instead of looking for the
    newest among every checkpoint of the memory).
    """
    workdir = state.get("workdir")
    if not workdir:
        return
    try:
        write_status_file(ctx.store, workdir, task_id=state["task_id"], latest=latest)
    except (OSError, MemoryStoreError) as exc:
        ctx.emit("warning", message=f"STATUS.md not updated in {workdir}: {exc}")


def checkpoint_update(path: str | None) -> JsonObject:
    """The state update recording checkpoint `path` (relative to the memory root; None: no
    checkpoint was written, nothing to record)."""
    if path is None:
        return {}
    return {"checkpoints": {path.rsplit("/", 1)[-1].removesuffix(".json"): path}}


# -- merged findings ----------------------------------------------------------------------
def phase_findings(
    ctx: RunContext,
    state: OrchestratorState,
    phase: str | None = None,
    *,
    keys: set[str] | None = None,
) -> list[FindingRecord]:
    """Whole findings (texts included) of `phase` (None: every phase; `keys`: only those
    subtasks, e.g. one wave's), in subtask-key order (stable across runs), expanded from
    the state's references."""
    findings = state.get("findings") or {}
    chosen = findings if phase is None else phase_subtasks(state, phase)
    keys = sorted(k for k in chosen if keys is None or k in keys)
    task_id = state["task_id"]
    return [ctx.finding(task_id, k, findings[k]) for k in keys if k in findings]


def merged_digest(
    phase: str, records: list[FindingRecord], failed: dict[str, Any], *, wave: int = 1
) -> str:
    """A compact text of the batch for the lead's conversation (`FindingRecord.for_lead`)."""
    where = f"phase {phase}" + (f", wave {wave}" if wave > 1 else "")
    lines = [f"Findings of {where} ({len(records)} subagent(s)):"]
    for r in records:
        lines += r.for_lead()
    for key, info in sorted(failed.items()):
        lines.append(f"- {key} FAILED: {info.get('error', '')}")
    return "\n".join(lines)


def merge_findings(
    ctx: RunContext,
    state: OrchestratorState,
    phase: str,
    records: list[FindingRecord],
    *,
    answer: dict[str, Any] | None = None,
    batch: str | None = None,
) -> str:
    """Write (once) the merged findings of `records` as `phase`'s batch; returns its path.
    `answer` (the task's final synthesis): the lead's answer, which opens the file;
    `batch`: the batch's name when it is not the phase (a later wave: `state.merge_key`).

    The batch is registered under `merged:{batch}:{number of findings}`, so a replay after
    a crash reuses the file it wrote instead of adding a second one.
    """
    key = Keys.merged(batch or phase, len(records))
    task_id = state["task_id"]
    docs = ctx.docs
    rec = registry_lookup(docs, task_id, key) or {}
    if rec.get("path") and docs.exists(rec["path"]):
        return rec["path"]
    ts = rec.get("ts")
    found = ts and find_written(docs, FINDINGS, ts, read_merged, task_id=task_id, phase=phase)
    if found:
        registry_note(docs, task_id, key, Status.WRITTEN, path=docs.rel(found))
        return docs.rel(found)
    if not ts:
        ts = iso_timestamp()
        registry_note(docs, task_id, key, Status.STARTED, ts=ts)
    fault("merge_before_write")
    path = write_merged(
        docs,
        task_id,
        phase,
        [r.merged_input(task_id) for r in records],
        timestamp=ts,
        project_dir=ctx.project_dir,
        answer=answer,
    )
    relative = docs.rel(path)
    if relative != merged_name(ts):
        # the name was taken: record where the file is (by default the timestamp recorded
        # above names it, and a replay finds the file by it)
        registry_note(docs, state["task_id"], key, Status.WRITTEN, path=relative)
    fault("merge_after_write")
    return relative
