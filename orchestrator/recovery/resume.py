"""Recovery: where a resumed run continues from, as a typed `RecoveryPlan`.

`choose_recovery` picks the first source that is there, in this order:

1. **LangGraph state** of the task's thread (`<memory root>/.langgraph/state.sqlite`, or the
   injected checkpointer): the graph continues with its saved state; subagents whose
   writes were saved are not run again. A finished thread with failed subagents is
   reopened at the earliest failed phase (`rebuild.retry_failed`).
2. **The latest valid JSON checkpoint** (`orchestrator.artifacts.checkpoint`
   `latest_valid_checkpoint`: corrupt or truncated files are skipped with a warning each):
   the state is rebuilt from it plus the findings files and the artifact registry
   (`rebuild.state_from_checkpoint`), and the run continues on a new thread. Every node is
   idempotent, so entering at `plan` only does what is left.
3. **A snapshot** (`--from-snapshot FILE`, or the task's latest snapshot when nothing else
   is left): a fresh lead starts from it (`rebuild.state_from_snapshot`); finished
   subtasks of earlier phases are carried over from the registry.
4. **A restart** of the recorded task from its first phase, when it was killed before
   anything durable; subtasks whose findings exist are not rerun.

An explicit `--from-checkpoint` or `--from-snapshot` wins over LangGraph's state, except
that a finished task is never planned again from a snapshot. Crash tests kill a run at the
points `orchestrator.faults` names.

`prepare_resume` is the whole decision of `Orchestrator.resume` before anything runs: the
findings files a crash lost are written again, a task waiting for approval stays waiting
(answering is `approve`'s), and a rebuilt state gets a thread of its own.
`resume_source` reads which task and snapshot the person named; `standing` and
`finished_agents` say where the task stands as events, before the graph runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrator.approvals import pending, recorded_decisions
from orchestrator.artifacts.checkpoint import (
    latest_valid_checkpoint,
    list_checkpoints,
    load_checkpoint,
)
from orchestrator.artifacts.documents import Docs
from orchestrator.artifacts.names import new_suffix
from orchestrator.artifacts.recorded import repair_findings
from orchestrator.artifacts.snapshot import read_snapshot
from orchestrator.artifacts.tasks import TaskInfo, TaskList, thread_of
from orchestrator.artifacts.usage import read_spend
from orchestrator.errors import OrchestratorUserError, RecoveryError
from orchestrator.graph.build import ThreadState, thread_state
from orchestrator.recovery.rebuild import (
    missing_findings,
    normalise,
    retry_failed,
    state_from_checkpoint,
    state_from_snapshot,
    task_snapshots,
    with_recorded_findings,
)
from orchestrator.recovery.status import standing_events
from orchestrator.state import OrchestratorState, current_phase, initial_state
from orchestrator.types import PendingApproval

if TYPE_CHECKING:
    from orchestrator.graph.context import RunContext
    from orchestrator.types import JsonObject


@dataclass(frozen=True)
class RecoveryPlan:
    """Where a resume continues from."""

    source: str
    """`langgraph`, `checkpoint`, `snapshot` or `restart`."""
    state: OrchestratorState | None
    """The state to run from; None: LangGraph's saved state continues as it is."""
    path: str | None = None
    """The checkpoint or snapshot file the state was rebuilt from."""
    warnings: list[str] = field(default_factory=list)
    """What the user should know (skipped corrupt checkpoints, findings to redo)."""


def choose_recovery(
    docs: Docs,
    record: JsonObject,
    *,
    phases: list[str],
    saved: ThreadState | None,
    snapshot: JsonObject | None = None,
    from_checkpoint: str | None = None,
) -> RecoveryPlan:
    """The recovery plan of the task `record` (see the module docstring).

    Args:
        phases: the workflow's phases, for a restart from the top.
        saved: LangGraph's saved state of the task's thread (`graph.thread_state`).
        snapshot: a `read_snapshot` result given with `--from-snapshot`.
        from_checkpoint: a checkpoint file given with `--from-checkpoint`.

    Raises:
        RecoveryError: nothing to resume from (and no objective to start again with).
        CheckpointError: `from_checkpoint` is not a valid checkpoint.
    """
    task_id = record["task_id"]
    if snapshot is not None and saved is not None and saved.finished:
        if not saved.values.get("failed"):  # a snapshot would only plan its last phase again
            return RecoveryPlan(
                "langgraph", None, warnings=[f"task {task_id!r} is already done; nothing to resume"]
            )
    if snapshot is not None:
        return _from_snapshot(docs, snapshot, snapshot["path"])
    if from_checkpoint:
        data = load_checkpoint(Path(from_checkpoint), docs).model_dump(mode="json")
        return RecoveryPlan("checkpoint", state_from_checkpoint(docs, data), str(from_checkpoint))
    if saved is not None:
        retry = saved.finished and saved.values.get("failed")
        return RecoveryPlan("langgraph", retry_failed(saved.values) if retry else None)
    try:
        cp, path, warnings = latest_valid_checkpoint(docs, task_id)
    except RecoveryError as exc:
        snaps = task_snapshots(docs, task_id)
        if snaps:
            return _from_snapshot(docs, read_snapshot(snaps[0], docs), str(snaps[0]), warn=False)
        plan = _restart(record, phases)
        if list_checkpoints(docs):
            plan.warnings.insert(0, str(exc).split(";")[0])
        return plan
    data = cp.model_dump(mode="json")
    return RecoveryPlan("checkpoint", state_from_checkpoint(docs, data), str(path), warnings)


def _from_snapshot(
    docs: Docs, snapshot: JsonObject, path: str, *, warn: bool = True
) -> RecoveryPlan:
    """A fresh lead from `snapshot`; with `warn`, name the findings this memory lacks."""
    missing = missing_findings(docs, snapshot) if warn else {}
    warnings = [
        f"findings {p!r} of subtask {k!r} named by the snapshot are not in "
        f"{docs.location!r}; the subtask runs again to restore them"
        for k, p in missing.items()
    ]
    return RecoveryPlan("snapshot", state_from_snapshot(docs, snapshot), path, warnings)


def _restart(record: JsonObject, phases: list[str]) -> RecoveryPlan:
    """Killed before anything durable: start the recorded task again from the top."""
    if not record.get("objective"):
        raise RecoveryError(
            f"task {record['task_id']!r} has no LangGraph state, checkpoint or snapshot "
            "to resume from; start it again with `orchestrator run`"
        )
    state = initial_state(
        task_id=record["task_id"],
        objective=record["objective"],
        workdir=record.get("workdir") or ".",
        phases=phases,
    )
    return RecoveryPlan(
        "restart",
        state,
        warnings=[
            "no usable LangGraph state, checkpoint or snapshot; the task starts again "
            "from its first phase, and subtasks whose findings files exist are not rerun"
        ],
    )


@dataclass
class Resumption:
    """What resuming a recorded task found, before anything runs (`prepare_resume`)."""

    thread: str
    """The LangGraph thread the run continues on (a new one for a rebuilt state)."""
    saved: ThreadState | None
    """LangGraph's saved state of the task's thread, if any."""
    waiting: list[PendingApproval]
    """The requests the task waits for; then nothing runs and `plan` is None."""
    plan: RecoveryPlan | None
    repaired: list[str]
    """Findings files a crash lost, written again from the artifact registry."""
    decisions: dict[str, Any] = field(default_factory=dict)
    """Decisions recorded on requests LangGraph still holds (an `approve` killed before
    LangGraph saved them): the run continues with `Command(resume=decisions)`."""

    @property
    def state(self) -> OrchestratorState | None:
        """The state to run from (None: LangGraph's saved state continues as it is)."""
        if self.plan is None or self.plan.state is None:
            return None
        return normalise(self.plan.state)


def prepare_resume(
    docs: Docs,
    tasks: TaskList,
    record: TaskInfo,
    *,
    phases: list[str],
    project_dir: str,
    checkpointer: Any = None,
    snapshot: JsonObject | None = None,
    from_checkpoint: str | None = None,
) -> Resumption:
    """Where the recorded task `record` continues (see the module docstring).

    Raises:
        RecoveryError: nothing to resume from.
        CheckpointError: `from_checkpoint` is not a valid checkpoint.
    """
    task_id = record["task_id"]
    thread = thread_of(record)
    repaired = repair_findings(docs, task_id, project_dir)
    saved = thread_state(docs, thread, checkpointer)
    waiting = pending(docs, task_id, saved.interrupts) if saved is not None else []
    if waiting and not (snapshot or from_checkpoint):
        # waiting for approval: continuing means answering (`approve`), not rerunning
        return Resumption(thread, saved, waiting, None, repaired)
    plan = choose_recovery(
        docs,
        record,
        phases=phases,
        saved=saved,
        snapshot=snapshot,
        from_checkpoint=from_checkpoint,
    )
    if plan.state is not None:  # a rebuilt state runs on a thread of its own
        thread = f"{task_id}~{new_suffix()}"
        tasks.note(task_id, thread_id=thread)
        return Resumption(thread, saved, [], plan, repaired)
    decided = recorded_decisions(docs, task_id, saved.interrupts) if saved is not None else {}
    return Resumption(thread, saved, [], plan, repaired, decided)


def finished_agents(values: dict[str, Any], docs: Docs) -> list[dict[str, Any]]:
    """The `agent` events (`done`, reused) of the current phase's subagents that finished
    before an interruption and that the graph will not enter again (their result is in the
    state), so a view counts the whole fan-out; none for a task that is done."""
    if values.get("status") == "done":
        return []  # nothing runs: the closing report says it all
    try:
        phase = current_phase(values)  # type: ignore[arg-type]
    except (KeyError, IndexError, TypeError):
        return []
    return [
        {
            "key": key,
            "agent": rec.get("agent", "?"),
            "state": "done",
            "reused": True,
            "tokens": rec.get("tokens", 0),
            "path": str(docs.path(rec["path"])),
        }
        for key, rec in sorted((values.get("findings") or {}).items())
        if rec.get("phase") == phase and rec.get("path")
    ]


def standing(
    docs: Docs, values: Any, *, threshold: int, warning_ratio: float, phase: bool = True
) -> list[tuple[str, JsonObject]]:
    """Where a task stands before the graph runs, as `(kind, fields)` events, so a view
    shows it from its first frame: its phase, unfinished agents and the lead's gauge
    against the run's threshold (`recovery.status.standing_events`) and what finished
    (`finished_agents`), counting the findings a crash left out of the saved state; the
    gauge comes last, so a view knows it has the whole standing when the gauge arrives;
    `phase` False: the gauge only (a new task)."""
    values = dict(values)
    if phase and values.get("task_id"):
        values = with_recorded_findings(docs, values)
    found = standing_events(values, threshold=threshold, warning_ratio=warning_ratio)
    gauge = [(kind, fields) for kind, fields in found if kind == "tokens"]
    spent = read_spend(docs, values["task_id"]) if values.get("task_id") else None
    if spent is not None:  # the task's spend is its usage journal's, as `status` says
        gauge = [(kind, {**fields, "total": spent.tokens, "calls": spent.calls})
                 for kind, fields in gauge]  # fmt: skip
    out = [(kind, fields) for kind, fields in found if phase and kind != "tokens"]
    if phase:
        out += [("agent", fields) for fields in finished_agents(values, docs)]
    return out + gauge


def resume_source(
    docs: Docs, task_id: str | None, from_checkpoint: str | None, from_snapshot: str | None
) -> tuple[str | None, JsonObject | None]:
    """The task a resume continues and the snapshot it starts from: `--from-snapshot` or
    `--from-checkpoint` may name the task, and must agree with `--task`.

    Raises:
        OrchestratorUserError: both given, or a checkpoint of another task.
    """
    if from_checkpoint and from_snapshot:
        raise OrchestratorUserError("give --from-checkpoint or --from-snapshot, not both")
    snap = None
    if from_snapshot:
        snap = read_snapshot(Path(from_snapshot), docs)
        task_id = task_id or snap.get("task_id")
    if from_checkpoint:
        cp_task = load_checkpoint(Path(from_checkpoint), docs).task_id
        if task_id and task_id != cp_task:
            raise OrchestratorUserError(
                f"checkpoint {from_checkpoint!r} belongs to task {cp_task!r}, "
                f"not {task_id!r}; drop --task or pass that task's checkpoint"
            )
        task_id = cp_task
    return task_id, snap


def lost_decision_line(record: JsonObject, approve: bool = True) -> str:
    """The one line `approve` says when LangGraph's saved state of a waiting task (its
    `record`) is gone: the decision cannot be applied (the interrupt it answers is in that
    state), so the task continues from its JSON checkpoint and what waited is asked again."""
    requests = list(record.get("pending_approvals") or [])
    verb = "approval" if approve else "rejection"
    plan = any(r.get("agent") == "lead" for r in requests) or not requests
    again = (
        "the phase's plan is made and asked for approval again"
        if plan
        else "the agent runs again and asks again"
    )
    return (
        f"your {verb} could not be applied: LangGraph's saved state of the task is gone, so "
        f"it continues from its JSON checkpoint and {again}"
    )


def approve_events(
    docs: Docs, ctx: RunContext, values: JsonObject, ids: list[str], approve: bool, message: Any
) -> list[tuple[str, JsonObject]]:
    """The events that open an approved run: the model, the task resumed, where it stands
    (`standing`), then each answered request."""
    budget = {"budget_tokens": ctx.budget.limit} if ctx.budget.limit else {}
    resumed = {
        "task_id": values["task_id"], "source": "approve", "path": None,
        "memory_dir": docs.location, "model": ctx.model_name, "offline": ctx.offline, **budget,
    }  # fmt: skip
    return [
        ("model", {"name": ctx.model_name, "offline": ctx.offline}),
        ("resume", resumed),
        *standing(docs, values, threshold=ctx.token_threshold, warning_ratio=ctx.warning_ratio),
        *[
            ("approved" if approve else "rejected", {"id": i, "message": message or ""})
            for i in ids
        ],  # fmt: skip
    ]
