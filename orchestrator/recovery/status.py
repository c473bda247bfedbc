"""Where a task stands, read from tether's own files (`orchestrator status`).

Status never imports LangGraph or LangChain and never opens the graph, so it answers in a
fraction of a second. It reads:

* the task's record (`orchestrator.artifacts.tasks`): the task, its objective, a recorded failure
  of the lead's model;
* the task's newest JSON checkpoint that parses, rebuilt into a state together with the
  findings written since (`orchestrator.recovery.rebuild.state_from_checkpoint`, which reads the
  artifact registry and the findings files); before the task's first checkpoint, the
  phases recorded with the task;
* whether LangGraph's checkpointer holds the task's thread (one query, `holds_thread` of the
  backend, or the injected checkpointer), which is what `resume` continues from first:
  `source` is `langgraph`, else `checkpoint`;
* whether a live process holds the task's run lock: an unfinished task nobody runs is
  `interrupted`, with the command that resumes it;
* the snapshots, newest first, for the task's newest (written by the run or on request);
* each finished subtask's grounding (`grounded`, `ungrounded`: its agent made no tool
  call, `unknown`), from its finding's reference (`orchestrator.artifacts.finding`);
* for a task with remote agents (its record says so), where each remote subtask ran: the
  `remote:{key}` records of the artifact registry (server, graph, thread, run, attempt),
  and from its finding's record whether its usage was reported.

Token totals of a task run by the offline model are LangChain's estimates
(`tokens_estimated`): no provider counted them and nothing was spent.

A subtask whose agent asked for approval of a tool call is `waiting` (the request is among
the task's pending approvals), as the live view and the `agent` events call it.

`standing_events` is where a continued task stands as progress events (its phase, the
subagents of that phase that have not finished, the lead's gauge against the run's real
threshold), sent by `resume` and `approve` before the graph runs, so a view shows them from
its first frame instead of waiting for the next phase.

Checkpoints are written at every step that changes what status shows (before spawning,
after merging, at each phase's end, at the task's end or failure), so the answer is the
state LangGraph holds, give or take the lead's planning call in progress.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from memory.contract.capabilities import HoldsGraphState
from orchestrator.agents.chat_models import OFFLINE_SPECS
from orchestrator.agents.gauge import total_tokens
from orchestrator.artifacts.checkpoint import checkpoint_infos, task_of
from orchestrator.artifacts.documents import CHECKPOINTS, Docs
from orchestrator.artifacts.registry import Keys, registry_records
from orchestrator.artifacts.snapshot import list_snapshots, read_snapshot
from orchestrator.artifacts.tasks import (
    TaskInfo,
    TaskList,
    approve_command,
    resume_command,
    task_running,
    thread_of,
    usable_checkpoint,
)
from orchestrator.artifacts.text import loads_strict
from orchestrator.artifacts.usage import Spend, read_spend
from orchestrator.errors import ArtifactError, RecoveryError
from orchestrator.recovery.rebuild import state_from_checkpoint
from orchestrator.state import (
    OrchestratorState,
    current_phase,
    initial_state,
    phase_subtasks,
    spend,
    usage_totals,
)

if TYPE_CHECKING:
    from orchestrator.artifacts.documents import MemoryTarget
    from orchestrator.types import JsonObject


def task_status(
    memory: MemoryTarget, task_id: str | None = None, *, checkpointer: Any = None
) -> JsonObject:
    """A JSON-able summary of the task: phase, subtasks, tokens, latest files.

    Args:
        memory: a `Docs`, `MemoryStore`, backend or `Layout` (see `artifacts.documents`).
        task_id: the task (default: the most recent one).
        checkpointer: the LangGraph checkpointer runs use instead of the backend's own
            (asked only whether it holds the task's thread).

    Raises:
        UnknownTaskError: no such task.
        RecoveryError: the task has no checkpoint yet and no recorded phases.
    """
    docs = Docs.of(memory)
    record = TaskList(docs).record(task_id)
    task = record["task_id"]
    newest, data = _latest_checkpoint(docs, task)
    state = _state(docs, record, data)
    extra = dict((data or {}).get("extra") or {})
    failed = _failed(data)
    status = state.get("status", "running")
    if status == "running" and extra.get("status") == "failed" and extra.get("trigger") != "failed":
        status = "failed"  # a phase ended with failed subagents
    if status == "running" and record.get("status") == "failed":
        status = "failed"  # the lead's model failed (recorded with the task)
        failed = {**failed, "lead": {"error": record.get("error")}}
    waiting = list(record.get("pending_approvals") or [])
    if record.get("status") == "waiting" and waiting and status not in ("done", "failed"):
        status = "waiting"  # requests wait for `orchestrator approve`
    if status == "running" and record.get("status") == "stopped":
        status = "stopped"  # at its token budget (`resume --budget-tokens M` goes on)
    if status == "running" and not task_running(docs, task):
        status = "interrupted"
    findings = state.get("findings") or {}
    thread = thread_of(record)
    source = "langgraph" if _langgraph_holds(docs, thread, checkpointer) else "checkpoint"
    remote = _remote_places(docs, task) if record.get("remote_agents") else {}
    journal = read_spend(docs, task)  # every call's record: the one figure, when it exists
    tokens = dict(state.get("tokens") or {})
    tokens = {"total": total_tokens(tokens), **tokens}
    if journal is not None:
        tokens = {"total": journal.tokens, **journal.by_key}
    return {
        "task_id": task,
        "objective": state["objective"],
        "status": status,
        "source": source,
        "errors": {k: v.get("error") for k, v in sorted(failed.items())},
        "resume": None if status in ("done", "waiting") else resume_command(task, docs),
        "stop_reason": record.get("stop_reason") if status == "stopped" else None,
        "answer": _answer(docs, state) if status == "done" else None,
        "budget": _budget(record, state, journal),
        "pending_approvals": waiting if status == "waiting" else [],
        "approve": approve_command(task, docs) if status == "waiting" else None,
        "usage": journal.usage() if journal else usage_totals(state.get("usage")),
        "phase": current_phase(state),
        "phase_number": state["phase_index"] + 1,  # 1-based, as shown to people
        "wave": int(state.get("wave") or 1),  # of the current phase, 1-based
        "phases": list(state["phases"]),
        "subtasks": _subtasks(
            state, findings, failed, remote, _asking(waiting), _partial(docs, task, findings)
        ),
        "usage_unknown": sorted(k for k, v in remote.items() if v.get("usage_known") is False),
        "findings": len(findings),
        "ungrounded": sorted(k for k, v in findings.items() if _grounding(v) == "ungrounded"),
        "failed": sorted(failed),
        "tokens": tokens,
        "model": record.get("model"),
        # the offline model reports LangChain's estimates: no provider counted or billed them
        "tokens_estimated": str(record.get("model") or "").lower() in OFFLINE_SPECS,
        "plan": str(docs.path(docs.plan(task))) if docs.exists(docs.plan(task)) else None,
        "latest_checkpoint": str(newest) if newest else None,
        "latest_snapshot": _latest_snapshot(docs, state),
        "memory_dir": docs.location,
    }


def _answer(docs: Docs, state: OrchestratorState) -> JsonObject | None:
    """`{"path", "text"}` of a done task's answer (the final synthesis opens with it)."""
    text = state.get("answer")
    if not text:
        return None
    path = (state.get("answer_info") or {}).get("path")
    return {"path": str(docs.path(path)) if path else None, "text": text}


def _budget(record: JsonObject, state: OrchestratorState, journal: Spend | None) -> JsonObject:
    """What the task spent (prompt plus completion tokens), in all, by phase and by agent,
    against its budget (`budget`: None when it has none): its usage journal, every call
    (a task from before journals: its state's counters, or what its record says)."""
    if journal is not None:
        return {"budget": record.get("budget_tokens"), **journal.parts()}
    parts = spend(state.get("tokens"), state.get("lead_calls"))
    parts["spent"] = max(parts["spent"], int(record.get("spent_tokens") or 0))
    return {"budget": record.get("budget_tokens"), **parts}


def _latest_checkpoint(docs: Docs, task_id: str) -> tuple[Path | None, dict | None]:
    """`(newest checkpoint file of the task, newest usable checkpoint data)`.

    Files are read newest first and only until a usable one of the task is found.
    """
    newest: Path | None = None
    for info in checkpoint_infos(docs):
        if task_of(docs, info) not in (task_id, None):
            continue  # another task's, found without reading it whole
        try:
            data = loads_strict(docs.read_bytes(info.path) or b"")
        except (OSError, ValueError):
            continue  # torn or corrupt: an older checkpoint is read instead
        if not isinstance(data, dict) or data.get("task_id") != task_id:
            continue
        newest = newest or docs.path(info.path)
        if usable_checkpoint(data):
            return newest, data
    return newest, None


def _state(docs: Docs, record: TaskInfo, data: JsonObject | None) -> OrchestratorState:
    """The task's state from its checkpoint; before the first one, from its record."""
    if data is not None:
        state = state_from_checkpoint(docs, data)
        last = state["phase_index"] + 1 >= len(state["phases"])
        extra = data.get("extra") or {}
        if extra.get("trigger") == "phase_transition" and not last:
            state["phase_index"] += 1  # the phase is over: the run has moved on to the next
        return state
    phases = record.get("phases")
    if not phases:
        raise RecoveryError(
            f"no valid checkpoint for task {record['task_id']!r} in "
            f"{str(docs.path(CHECKPOINTS))!r}; resume from a snapshot with --from-snapshot or "
            "start again with `orchestrator run`"
        )
    start = record.get("start_phase")
    return initial_state(
        task_id=record["task_id"],
        objective=record.get("objective") or "",
        workdir=record.get("workdir") or ".",
        phases=phases,
        phase_index=phases.index(start) if start in phases else 0,
    )


def _failed(data: JsonObject | None) -> dict[str, JsonObject]:
    """Failed subagents (`key -> {agent, error}`) the checkpoint names."""
    if data is None:
        return {}
    extra = data.get("extra") or {}
    if isinstance(extra.get("failed"), dict):
        return dict(extra["failed"])
    blocked = (data.get("state") or {}).get("blocked_agents") or []
    pairs = (str(item).partition(":") for item in blocked)
    return {key: {"agent": agent, "error": None} for agent, _, key in pairs}


REMOTE_FIELDS = ("server", "graph", "thread_id", "run_id", "attempt")


def _remote_places(docs: Docs, task_id: str) -> dict[str, JsonObject]:
    """Where each remote subtask ran (its latest attempt), by subtask key."""
    records = registry_records(docs, task_id)
    out = {}
    for rkey, rec in records.items():
        key = Keys.subtask(Keys.REMOTE, rkey)
        if key is not None and rec.get("thread_id"):
            place = {k: rec.get(k) for k in REMOTE_FIELDS}
            finished = (records.get(Keys.findings(key)) or {}).get("remote")
            if isinstance(finished, dict) and "usage_known" in finished:
                place["usage_known"] = bool(finished["usage_known"])
            out[key] = place
    return out


def _partial(docs: Docs, task_id: str, findings: JsonObject) -> dict[str, str]:
    """Why tether marked a finding partial (its agent stopped at its token cap), by subtask
    key: the `partial_reason` of its registry record. Read only when some finding is
    partial."""
    if not any((ref or {}).get("status") == "partial" for ref in findings.values()):
        return {}
    records = registry_records(docs, task_id)
    out = {}
    for key in findings:
        reason = (records.get(Keys.findings(key)) or {}).get("partial_reason")
        if reason:
            out[key] = str(reason)
    return out


def _asking(waiting: list[JsonObject]) -> set[str]:
    """The subtask keys whose agent waits for approval of a tool call (not the lead's plan
    gate, `phase/plan`, whose subtasks are only planned)."""
    return {str(r.get("key")) for r in waiting if r.get("agent") != "lead" and r.get("key")}


def _subtasks(
    state: OrchestratorState,
    findings: JsonObject,
    failed: JsonObject,
    remote: dict[str, JsonObject],
    asking: set[str] = frozenset(),  # type: ignore[assignment]
    partial: dict[str, str] | None = None,
) -> dict[str, JsonObject]:
    """Each planned subtask's agent, title, phase and state (`done`, `failed`, `waiting`
    for approval, `pending`), in the workflow's phase order, where it ran (`ran_on`: a
    remote agent's server and thread; None: in the lead's process), once done, its
    finding's `grounding` (`grounded`, `ungrounded`, `unknown`; None before), and why its
    finding is partial (`partial`: its agent's token cap; None otherwise)."""

    def state_of(key: str) -> str:
        if key in findings:
            return "done"
        if key in failed:
            return "failed"
        return "waiting" if key in asking else "pending"

    return {
        key: {
            "agent": sub.get("agent"),
            "title": sub.get("title"),
            "phase": sub.get("phase"),
            "wave": int(sub.get("wave") or 1),
            "state": state_of(key),
            "grounding": _grounding(findings[key]) if key in findings else None,
            "ran_on": remote.get(key),
            "partial": (partial or {}).get(key),
        }
        for key, sub in sorted(
            (state.get("subtasks") or {}).items(), key=lambda item: _phase_order(state, item)
        )
    }


def _grounding(ref: Any) -> str:
    """A finding reference's grounding (`unknown` for one of an older run)."""
    value = ref.get("grounding") if isinstance(ref, dict) else None
    return str(value) if value else "unknown"


def _phase_order(state: OrchestratorState, item: tuple[str, dict]) -> tuple[int, str]:
    """Sort key of a subtask: its phase's position in the workflow, then its key."""
    key, subtask = item
    phases = list(state.get("phases") or [])
    phase = subtask.get("phase") or key.split("/", 1)[0]
    return (phases.index(phase) if phase in phases else len(phases), key)


def _latest_snapshot(docs: Docs, state: OrchestratorState) -> str | None:
    """The task's newest snapshot: one the run wrote, its closing one, or one written on
    request since (`orchestrator handoff`), not another task's. Snapshots are read newest
    first, and only those newer than the newest one the run lists."""
    written = set(state.get("snapshots") or [])
    for path in list_snapshots(docs):
        if docs.rel(path) in written or _of_task(docs, path, state["task_id"]):
            return str(path)
    return None


def _of_task(docs: Docs, path: Path, task_id: str) -> bool:
    """Whether snapshot `path` is of task `task_id` (False when it cannot be read)."""
    try:
        return read_snapshot(path, docs).get("task_id") == task_id
    except (ArtifactError, OSError):
        return False


def _langgraph_holds(docs: Docs, thread_id: str, checkpointer: Any) -> bool:
    """Whether LangGraph has saved state for `thread_id`, asked without loading LangGraph:
    one query by the backend (read-only), or the injected checkpointer."""
    if checkpointer is not None:
        try:
            return checkpointer.get_tuple({"configurable": {"thread_id": thread_id}}) is not None
        except Exception:  # an unreachable backend: resume would fall back to the files
            return False
    backend = docs.backend
    return isinstance(backend, HoldsGraphState) and backend.holds_thread(thread_id)


def standing_events(
    values: JsonObject, *, threshold: int, warning_ratio: float
) -> list[tuple[str, JsonObject]]:
    """Where a continued task stands, as `(kind, fields)` progress events: its phase, the
    current phase's subtasks that have not finished (`pending`: one that failed runs again;
    the finished ones are `recovery.resume.finished_agents`), and the lead's gauge:
    its last context against `threshold`, the run's own (the model's window may lower the
    configured one). Nothing for a task that is done, or a state without phases.
    """
    if values.get("status") == "done":
        return []
    try:
        phase = current_phase(values)  # type: ignore[arg-type]
    except (KeyError, IndexError, TypeError):
        return []
    out: list[tuple[str, dict[str, Any]]] = [
        (
            "phase",
            {"phase": phase, "index": values["phase_index"] + 1, "total": len(values["phases"])},
        )
    ]
    findings = values.get("findings") or {}
    # a plan not past its approval may be planned again: `spawn` names what runs
    spawned = phase in (values.get("approved") or [])
    for key, sub in sorted(phase_subtasks(values).items()) if spawned else ():  # type: ignore[arg-type]
        if key not in findings:  # an earlier failure is run again: pending too
            fields = {"key": key, "agent": str(sub.get("agent") or "?"), "state": "pending"}
            out.append(("agent", {**fields, "title": sub.get("title")}))
    calls = values.get("lead_calls") or []
    gauge: dict[str, Any] = {
        "agent": "lead",
        "context": int(calls[-1].get("tokens") or 0) if calls else 0,
        "threshold": int(threshold),
        "warning_ratio": float(warning_ratio),
        "total": total_tokens(values.get("tokens")),
        "tokens": int((values.get("tokens") or {}).get("lead") or 0),
        "calls": usage_totals(values.get("usage"))["calls"],
    }
    if calls:  # before the lead's first call there is nothing to estimate
        gauge["estimated"] = not calls[-1].get("reported")
    out.append(("tokens", gauge))
    return out
