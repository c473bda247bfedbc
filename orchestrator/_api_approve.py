"""`Orchestrator.approve`: answering what a waiting task waits for, and continuing it.

A mixin of `orchestrator.api.Orchestrator` (it uses the orchestrator's own helpers:
`_continuing`, `_context`, `_drive`, `_resume`); see `orchestrator.approvals` for the
requests and the decision payload.
"""

from __future__ import annotations

from typing import Any

from langgraph.types import Command

from orchestrator.approvals import decisions_for, note_decisions, pending, select
from orchestrator.errors import ApprovalError
from orchestrator.graph.build import ThreadState, thread_state
from orchestrator.graph.context import RunContext
from orchestrator.result import RunResult
from orchestrator.state import current_phase


class ApprovalMixin:
    """The approval verbs of `Orchestrator`."""

    def _still_waiting(self, ctx: RunContext, saved: ThreadState, task_id: str) -> RunResult:
        """The result of a task that waits for approval (nothing runs)."""
        waiting = [p.model_dump() for p in pending(self.docs, task_id, saved.interrupts)]
        values = {**saved.values, "status": "waiting", "pending_approvals": waiting}
        self._emit("waiting_approval", task_id=task_id, requests=waiting)
        return RunResult.from_state(values, ctx, source="langgraph", warnings=[])

    # -- approval --------------------------------------------------------------------
    def approve(
        self,
        task_id: str | None = None,
        approve: bool = True,
        message: str | None = None,
        request_id: str | None = None,
    ) -> RunResult:
        """Answer the requests a waiting task has (all, or the one `request_id` names) and
        continue it to its end (or its next wait); blocks like `resume`.

        Args:
            approve: True approves; False rejects, and the agent gets `message` as the
                refused tool's result (a rejected phase plan is planned again).
            request_id: a request id from `status` (a unique prefix is enough).

        Raises:
            UnknownTaskError: no such task.
            ApprovalError: the task waits for nothing, or no request matches.
            Interrupted: Ctrl-C or SIGTERM.
        """
        self._check_writable("approve a request")
        record = self.task_record(task_id)
        task_id = record["task_id"]
        with self._continuing(record) as (store, workflow, resolved, toolbox):
            thread = record.get("thread_id") or task_id
            saved = thread_state(self.docs, thread, self.checkpointer)
            waiting = pending(self.docs, task_id, saved.interrupts) if saved is not None else []
            if not waiting:
                if record.get("status") == "waiting" and saved is None:
                    # LangGraph's database is gone: the run continues from its JSON
                    # checkpoint, and whoever asked asks again
                    return self._resume(store, record, None, None, workflow, resolved, toolbox)
                raise ApprovalError(
                    f"task {task_id!r} waits for no approval (status "
                    f"{record.get('status') or 'unknown'}); see `orchestrator status`"
                )
            ids = select(waiting, request_id)
            answers = {i: decisions_for(waiting, i, approve=approve, message=message) for i in ids}
            note_decisions(self.docs, task_id, answers)
            ctx = self._context(store, workflow, resolved, thread, record, toolbox)
            self._emit_continuing(ctx, saved.values, ids, approve, message)  # type: ignore[union-attr]
            self.tasks.note(task_id, status="running", pending_approvals=[])
            return self._drive(ctx, Command(resume=answers), task_id, source="approve")

    def _emit_continuing(
        self, ctx: RunContext, values: dict[str, Any], ids: list[str], approve: bool, message: Any
    ) -> None:
        """The events that open an approved run (task, phase, what finished, the answers)."""
        self._emit("model", name=ctx.model_name, offline=ctx.offline)
        self._emit(
            "resume", task_id=values["task_id"], source="approve", path=None,
            memory_dir=self.docs.location, model=ctx.model_name, offline=ctx.offline,
        )  # fmt: skip
        phase = current_phase(values)  # type: ignore[arg-type]
        self._emit(
            "phase", phase=phase, index=values["phase_index"] + 1, total=len(values["phases"])
        )
        self._emit_finished(values)
        for ident in ids:
            self._emit("approved" if approve else "rejected", id=ident, message=message or "")
