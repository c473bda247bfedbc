"""Recovery: rebuild a run's state from durable files, and fault injection for tests.

Recovery order (DESIGN §4), chosen by `orchestrator.api.Orchestrator.resume`:

1. **LangGraph state** of the task's thread in `<memory root>/.langgraph/state.sqlite`:
   the graph continues with `graph.stream(None, config)`; subagents whose writes were
   saved are not run again.
2. **The latest valid JSON checkpoint** (`checkpoints.latest_valid_checkpoint`, corrupt
   or truncated files are skipped with a warning each): `state_from_checkpoint` rebuilds
   the state from it plus the findings files and the artifact registry (findings written
   after the checkpoint), and the run continues on a new thread. Every node is
   idempotent, so entering at `plan` only does what is left.
3. **A snapshot** (`--from-snapshot FILE`, or the task's latest snapshot when nothing
   else is left): `state_from_snapshot` starts a fresh lead seeded with it; finished
   subtasks of earlier phases are carried over from the registry.

Fault injection: set `TETHER_FAULT=<point>[:<n>]` and the process kills itself with
SIGKILL the `n`-th time (default 1st) execution reaches `fault("<point>")`. Several
points can be given, comma-separated. Points (see `POINTS`) sit on both sides of every
durable write of the graph, so a test can crash the run anywhere a real power cut could
and check that `orchestrator resume` finishes it. Tests only; unset, `fault()` costs one
dict lookup.
"""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path
from typing import Any

ENV_VAR = "TETHER_FAULT"

POINTS = (
    "run_before_graph",  # task recorded, nothing else durable yet
    "plan_after_write",  # plan written, PhasePlan not yet in the state
    "spawn_after_checkpoint",  # before_spawning checkpoint written, no Send yet
    "subagent_before_run",  # a subagent started, nothing written
    "subagent_before_findings",  # agent finished, registry intent written, no file
    "subagent_after_findings",  # findings file written, not yet in LangGraph's state
    "merge_before_write",
    "merge_after_write",  # merged file written, checkpoint not yet
    "merge_after_checkpoint",
    "monitor_after_snapshot",
    "advance_before_checkpoint",
    "advance_after_checkpoint",  # phase checkpoint written, phase index not yet moved
    "finish_before_reflect",
)

_counts: dict[str, int] = {}
_lock = threading.Lock()


def _parse(spec: str) -> dict[str, int]:
    wanted: dict[str, int] = {}
    for item in filter(None, (s.strip() for s in spec.split(","))):
        name, _, n = item.partition(":")
        wanted[name] = int(n) if n else 1
    return wanted


def fault(point: str) -> None:
    """Kill the process here if `$TETHER_FAULT` names this point (and occurrence)."""
    spec = os.environ.get(ENV_VAR)
    if not spec:
        return
    target = _parse(spec).get(point)
    if target is None:
        return
    with _lock:
        _counts[point] = _counts.get(point, 0) + 1
        hit = _counts[point] == target
    if hit:
        os.kill(os.getpid(), signal.SIGKILL)


# -- rebuilding state ---------------------------------------------------------------------


def _findings_record(
    layout: Any, key: str, sub: dict[str, Any], path: str, payload: dict[str, Any] | None
) -> dict[str, Any] | None:
    """A state findings record from the registry payload, else the findings file."""
    from orchestrator import artifacts

    full = layout.root / path
    if not full.exists():
        return None
    if payload is None:
        try:
            meta = artifacts.read_findings(full)
        except (artifacts.ArtifactError, OSError):
            return None
        payload = {
            k: meta.get(k)
            for k in (
                "status",
                "summary",
                "key_discoveries",
                "files",
                "files_written",
                "open_questions",
                "recommendations",
            )
        }
    return {
        "path": path,
        "agent": sub.get("agent", "researcher"),
        "title": sub.get("title", key),
        "phase": sub.get("phase") or key.split("/", 1)[0],
        "id": sub.get("id") or key,
        "tokens": 0,
        **payload,
    }


def registry_findings(layout: Any, task_id: str) -> tuple[dict[str, dict], dict[str, dict]]:
    """`(subtasks, findings)` recorded in the artifact registry with an existing file."""
    from orchestrator import artifacts
    from orchestrator.nodes._common import find_written, registry_records

    subtasks: dict[str, dict] = {}
    findings: dict[str, dict] = {}
    for rkey, rec in registry_records(layout, task_id).items():
        if not rkey.startswith("findings:") or rec.get("findings") is None:
            continue
        key = rkey.removeprefix("findings:")
        sub = dict(rec.get("subtask") or {})
        path = rec.get("path")
        if not path:
            found = find_written(
                layout.findings, rec["ts"], artifacts.read_findings, task_id=task_id, subtask_id=key
            )
            path = layout.relative(found) if found else None
        record = path and _findings_record(layout, key, sub, path, rec["findings"])
        if record:
            record["tokens"] = rec.get("tokens", 0)
            findings[key] = record
            if sub:
                subtasks[key] = sub
    return subtasks, findings


def scan_findings(layout: Any, task_id: str) -> dict[str, str]:
    """`subtask key -> findings path` from the metadata of the findings files of a task."""
    from orchestrator import artifacts

    found: dict[str, str] = {}
    for path in sorted(artifacts.list_findings(layout, merged=False)):
        try:
            meta = artifacts.read_findings(path)
        except (artifacts.ArtifactError, OSError):  # unreadable file: not ours to reuse
            continue
        if meta.get("task_id") == task_id and meta.get("subtask_id"):
            found.setdefault(meta["subtask_id"], layout.relative(path))
    return found


def state_from_checkpoint(layout: Any, cp: Any) -> dict[str, Any]:
    """Rebuild the graph state from a JSON checkpoint plus findings and the registry."""
    from orchestrator.state import initial_state

    state = initial_state(
        task_id=cp.task_id,
        objective=cp.objective,
        workdir=cp.workdir or ".",
        phases=list(cp.phases),
        phase_index=cp.phase_index,
    )
    subtasks = {}
    for sub in cp.subtasks:
        sub = dict(sub)
        key = str(sub.pop("key", None) or f"{sub.get('phase', cp.phase)}/{sub['id']}")
        subtasks[key] = sub
    findings: dict[str, dict] = {}
    for key, path in cp.completed_findings.items():
        record = _findings_record(layout, key, subtasks.get(key, {}), path, None)
        if record:
            findings[key] = record
    reg_subtasks, reg_findings = registry_findings(layout, cp.task_id)
    for key, record in reg_findings.items():
        if key in subtasks:  # findings written after the checkpoint, for a known subtask
            findings[key] = record
    missing = [k for k in subtasks if k not in findings]
    if missing:  # the registry may be gone too: findings files name their subtask
        on_disk = scan_findings(layout, cp.task_id)
        for key in missing:
            if key in on_disk:
                record = _findings_record(layout, key, subtasks[key], on_disk[key], None)
                if record:
                    findings[key] = record
    extra = dict(cp.extra or {})
    merged = {ph: p for ph, p in (extra.get("merged") or {}).items() if (layout.root / p).exists()}
    state.update(
        subtasks=subtasks,
        findings=findings,
        merged=merged,
        tokens=dict(extra.get("tokens") or {}),
        snapshots=list(extra.get("snapshots") or []),
        plan_path=cp.plan or "",
    )
    if extra.get("status") == "done":  # a finished task stays finished without LangGraph's db
        state["status"] = "done"
    state["tokens"] = with_findings_tokens(state["tokens"], subtasks, findings)
    from orchestrator.nodes._common import LEAD_FIELDS

    for field in LEAD_FIELDS:
        if field in extra:
            state[field] = extra[field]
    return state


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


def missing_findings(layout: Any, snap: dict[str, Any]) -> dict[str, str]:
    """Findings the snapshot names that this memory directory lacks: `{key: path}`.

    A snapshot carried to another memory directory (or one whose findings files were
    removed) must not silently drop that work: the resume names the files and runs those
    subtasks again.
    """
    extra = dict(snap.get("extra") or {})
    named = dict(extra.get("completed_findings") or {})
    if not named or not snap.get("task_id"):
        return {}
    _subtasks, present = registry_findings(layout, snap["task_id"])
    return {
        k: p
        for k, p in sorted(named.items())
        if k not in present and not (p and (layout.root / p).is_file())
    }


def state_from_snapshot(layout: Any, snap: dict[str, Any]) -> dict[str, Any]:
    """A state whose lead starts fresh from `snap` (a `read_snapshot` result)."""
    from orchestrator.errors import RecoveryError
    from orchestrator.state import initial_state

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
    missing = missing_findings(layout, snap)
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
    reg_subtasks, reg_findings = registry_findings(layout, task_id)
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
    path = Path(snap["path"])
    try:
        state["seed_snapshot"] = layout.relative(path.resolve())
    except ValueError:
        state["seed_snapshot"] = None
    if state["seed_snapshot"] is None or state["seed_snapshot"].startswith(".."):
        state["seed_snapshot"] = None
        state["lead_log"] = [
            {
                "role": "user",
                "content": "Context snapshot you continue from:\n" + snap.get("text", ""),
            }
        ]
    state["first_call_done"] = True
    return state


def normalise(state: dict[str, Any]) -> dict[str, Any]:
    """Fill in any state field a rebuilt state lacks with its initial value."""
    from orchestrator.state import initial_state

    base = initial_state(
        task_id=state["task_id"],
        objective=state["objective"],
        workdir=state.get("workdir") or ".",
        phases=state["phases"],
        phase_index=state.get("phase_index", 0),
    )
    return {**base, **{k: v for k, v in state.items() if v is not None or k in base}}


def task_snapshots(layout: Any, task_id: str) -> list[Path]:
    """Snapshots written for `task_id`, newest first."""
    from orchestrator import artifacts

    out = []
    for path in artifacts.list_snapshots(layout):
        try:
            if artifacts.read_snapshot(path).get("task_id") == task_id:
                out.append(path)
        except (artifacts.ArtifactError, OSError):  # unreadable file: not ours to reuse
            continue
    return out


def retry_failed(values: dict[str, Any]) -> dict[str, Any]:
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
