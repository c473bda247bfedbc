"""With LangGraph's database gone, a resume prefers the latest checkpoint to any snapshot.

The README's order: LangGraph's state, then the latest valid JSON checkpoint, then a
snapshot. A task killed after a snapshot was written (the closing `phase_end` snapshot, or
a manual handoff) has both a checkpoint and a snapshot; with `.langgraph/` deleted, the
resume must come from the checkpoint (`result.source == "checkpoint"`) and end exactly as
an uninterrupted run: a snapshot would start a fresh lead and plan again.
"""

from __future__ import annotations

import shutil

from orchestrator.api import Orchestrator
from tests.orchestrator.e2e.test_recovery import (
    TASK,
    agent_runs,
    assert_same_as_baseline,
    fork_run,
    setup,  # noqa: F401 - the module fixture of the crash tests
)


def _snapshots(memory):
    return sorted((memory / "context_snapshots").glob("snap_*.md"))


def test_the_closing_snapshot_does_not_win_over_the_checkpoint(setup):  # noqa: F811
    base, repo, workflow, baseline = setup
    memory = base / "closing-snapshot"
    assert fork_run("run", memory, repo, workflow, "finish_before_reflect:1") == -9
    assert _snapshots(memory)  # the task's closing snapshot is there
    shutil.rmtree(memory / ".langgraph")
    runs_before = agent_runs(memory)
    result = Orchestrator(memory_dir=memory).resume(TASK)
    assert (result.status, result.source) == ("done", "checkpoint")
    assert agent_runs(memory) == runs_before  # nothing planned or run again
    assert_same_as_baseline(memory, baseline)


def test_a_handoff_snapshot_does_not_win_over_the_checkpoint(setup):  # noqa: F811
    base, repo, workflow, baseline = setup
    memory = base / "handoff-snapshot"
    assert fork_run("run", memory, repo, workflow, "advance_after_checkpoint:1") == -9
    Orchestrator(memory_dir=memory).handoff(TASK)
    assert _snapshots(memory)
    shutil.rmtree(memory / ".langgraph")
    result = Orchestrator(memory_dir=memory).resume(TASK)
    assert (result.status, result.source) == ("done", "checkpoint")
    assert_same_as_baseline(memory, baseline)
