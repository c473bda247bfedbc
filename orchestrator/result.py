"""`RunResult`: what a run, resume or approval of a task produced.

Built from the graph's final state (`RunResult.from_state`); paths are relative to the
memory directory (or document paths of a shared memory).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from orchestrator.artifacts.checkpoint import list_checkpoints
from orchestrator.artifacts.documents import Docs
from orchestrator.artifacts.names import name_timestamp
from orchestrator.graph.context import RunContext
from orchestrator.state import current_phase, skipped_phases, usage_totals

if TYPE_CHECKING:
    from orchestrator.types import JsonObject


@dataclass
class RunResult:
    """What a run or resume produced (paths relative to `memory_dir`)."""

    task_id: str
    status: str
    memory_dir: str
    phases: list[str]
    phase: str
    plan: str | None
    findings: list[str]
    merged: dict[str, str]
    checkpoints: list[str]
    snapshots: list[str]
    failed: dict[str, Any]
    tokens: dict[str, int]
    lead_calls: list[dict[str, Any]]
    final_summary: str | None
    model: str
    offline: bool
    source: str = "run"
    """`run`, `langgraph`, `checkpoint`, `snapshot`, `restart` or `approve`: where the state
    came from."""
    warnings: list[str] = field(default_factory=list)
    usage: dict[str, int] = field(default_factory=dict)
    """Model calls and prompt tokens of the whole task: `{"calls", "input_tokens"}` (from
    its usage journal: calls cut in flight included)."""
    pending_approvals: list[dict[str, Any]] = field(default_factory=list)
    """With status `waiting`: the requests waiting for `approve` (`PendingApproval`s)."""
    skipped_phases: list[str] = field(default_factory=list)
    """Phases not run because the lead declared the objective answered."""
    done_reason: str | None = None
    answer: str | None = None
    """The lead's answer to the objective (Markdown), once the task is `done`."""
    answer_path: str | None = None
    """The final synthesis that opens with the answer (`findings/merged_{ts}.md`)."""
    stop_reason: str | None = None
    """With status `stopped`: why (the token budget was reached)."""
    budget: dict[str, Any] | None = None
    """With a token budget: `{"budget", "spent", "by_phase", "by_agent"}` (prompt plus
    completion tokens; the splits when the task has a usage journal)."""

    def to_dict(self) -> JsonObject:
        return asdict(self)

    def finish_fields(self) -> JsonObject:
        """The fields of the `finish` event that closes the run (`orchestrator.events`)."""
        return {
            "task_id": self.task_id, "status": self.status, "plan": self.plan,
            "memory_dir": self.memory_dir, "findings": len(self.findings),
            "snapshots": self.snapshots, "checkpoints": len(self.checkpoints),
            "usage": self.usage, "pending_approvals": self.pending_approvals,
            "skipped": self.skipped_phases, "reason": self.done_reason,
        }  # fmt: skip

    @classmethod
    def from_state(
        cls, values: JsonObject, ctx: RunContext, *, source: str, warnings: list[str]
    ) -> RunResult:
        """The result of a run that ended in the graph state `values`."""
        docs = ctx.docs
        task_id = values["task_id"]
        # what the task spent, one reading of its usage journal (every figure shown of it)
        journal = ctx.journal
        spent = journal.spend() if journal is not None and journal.existed else None
        plan = docs.plan(task_id)
        return cls(
            task_id=task_id,
            status=values.get("status", "running"),
            memory_dir=docs.location,
            phases=list(values["phases"]),
            phase=current_phase(values),
            plan=plan if docs.exists(plan) else None,
            findings=sorted(v["path"] for v in (values.get("findings") or {}).values()),
            merged=dict(values.get("merged") or {}),
            checkpoints=_checkpoints_of(values, docs, source),
            snapshots=list(values.get("snapshots") or []),
            failed=dict(values.get("failed") or {}),
            tokens=dict(values.get("tokens") or {}),
            lead_calls=list(values.get("lead_calls") or []),
            final_summary=values.get("final_summary"),
            model=ctx.model_name,
            offline=ctx.offline,
            source=source,
            warnings=warnings,
            usage=spent.usage() if spent else usage_totals(values.get("usage")),
            pending_approvals=list(values.get("pending_approvals") or []),
            skipped_phases=(
                skipped_phases(values)  # type: ignore[arg-type]
                if values.get("status") == "done"
                else []
            ),
            done_reason=values.get("done_reason"),
            answer=values.get("answer") if values.get("status") == "done" else None,
            answer_path=(values.get("answer_info") or {}).get("path"),
            stop_reason=values.get("stop_reason"),
            budget=ctx.budget.summary(spent) if ctx.budget.limit else None,
        )


def _checkpoints_of(values: JsonObject, docs: Docs, source: str) -> list[str]:
    """The task's checkpoint files, newest first. A new task's are all this run's, which
    its state records; a resumed one's are looked for among the memory's (which holds a
    dozen per task it ever ran)."""
    if source != "run":
        return [docs.rel(p) for p in list_checkpoints(docs, values["task_id"])]
    recorded = (values.get("checkpoints") or {}).values()
    return sorted(recorded, key=lambda rel: (name_timestamp(rel) or "", rel), reverse=True)
