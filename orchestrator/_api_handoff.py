"""`Orchestrator`'s verbs that read a task's state and write files only: `current_state`,
`handoff` (a context snapshot), `checkpoint_now` and `status`.

A mixin of `orchestrator.api.Orchestrator` (it uses `task_record`, `_store`, `_context`,
`_check_writable`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from orchestrator.artifacts.checkpoint import latest_valid_checkpoint
from orchestrator.artifacts.tasks import resume_command
from orchestrator.graph.build import thread_state
from orchestrator.graph.handoff import write_lead_snapshot
from orchestrator.graph.writes import write_checkpoint
from orchestrator.recovery.rebuild import state_from_checkpoint, with_recorded_findings
from orchestrator.recovery.status import task_status


class HandoffMixin:
    """The file-only verbs of `Orchestrator`."""

    def current_state(self, task_id: str | None = None) -> tuple[dict[str, Any], str]:
        """The task's latest state and where it came from (`langgraph` or `checkpoint`)."""
        record = self.task_record(task_id)
        saved = thread_state(
            self.docs, record.get("thread_id") or record["task_id"], self.checkpointer
        )
        if saved is not None:  # a crash may have left findings it does not hold yet
            return with_recorded_findings(self.docs, dict(saved.values)), "langgraph"
        cp, _path, _warnings = latest_valid_checkpoint(self.docs, record["task_id"])
        return state_from_checkpoint(self.docs, cp.model_dump(mode="json")), "checkpoint"

    def handoff(self, task_id: str | None = None) -> Path:
        """Write a context snapshot of the task's current state; returns its path."""
        self._check_writable("write a handoff snapshot")
        state, _source = self.current_state(task_id)
        with self._store() as store:
            record = self.task_record(state["task_id"])
            ctx = self._context(store, self.workflow, None, "", record)
            return write_lead_snapshot(ctx, state, reason="manual")

    def checkpoint_now(self, task_id: str | None = None, notes: str = "") -> Path:
        """Write a manual checkpoint of the task's current state; returns its path."""
        state, _source = self.current_state(task_id)
        task = state["task_id"]
        with self._store() as store:
            ctx = self._context(store, self.workflow, None, "", self.task_record(task))
            done = state.get("status") == "done"
            rel = write_checkpoint(
                ctx,
                state,
                trigger="manual",
                next_action=(
                    "Task complete; nothing to do"
                    if done
                    else f"Resume with `{resume_command(task, self.docs)}`"
                ),
                extra={"notes": notes},
            )
            return ctx.docs.path(rel)

    def status(self, task_id: str | None = None) -> dict[str, Any]:
        """A JSON-able summary of the task: phase, subtasks, tokens, latest files
        (see `orchestrator.recovery.status.task_status`)."""
        return task_status(self.docs, task_id, checkpointer=self.checkpointer)
