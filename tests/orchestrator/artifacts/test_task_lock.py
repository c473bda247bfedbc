"""One process at a time runs a task: a second run or resume of the same task is refused."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from memory.backends.files import FilesBackend
from orchestrator.api import Orchestrator
from orchestrator.artifacts.documents import Docs
from orchestrator.errors import OrchestratorUserError


def _held(memory_dir, task_id):
    """The task's run lock, held as another process running it would hold it."""
    return Docs(FilesBackend(memory_dir)).run_lock(task_id)


def test_resume_is_refused_while_the_task_runs_elsewhere(fixture_repo, tiny_workflow, memory_dir):
    killed = subprocess.run(
        [sys.executable, "-m", "orchestrator.cli", "run", "Survey the shop service", "--task",
         "shop", "--workdir", str(fixture_repo), "--workflow", str(tiny_workflow)],
        capture_output=True, text=True, env={**os.environ, "TETHER_FAULT": "merge_after_write"},
    )  # fmt: skip
    assert killed.returncode == -9, killed.stderr  # a task to continue
    findings_before = sorted(p.name for p in (memory_dir / "findings").iterdir())
    with _held(memory_dir, "shop"):
        with pytest.raises(OrchestratorUserError, match="'shop' is already running"):
            Orchestrator(workdir=fixture_repo).resume("shop")
        cli = subprocess.run(
            [sys.executable, "-m", "orchestrator.cli", "resume", "--task", "shop"],
            capture_output=True,
            text=True,
        )
    assert cli.returncode == 1
    assert cli.stderr.strip().splitlines() == [
        "Error: task 'shop' is already running in another process; wait for it to finish, "
        "or stop it and run `orchestrator resume --task shop`"
    ]
    assert sorted(p.name for p in (memory_dir / "findings").iterdir()) == findings_before
    # once the other process is gone, the task can be resumed again
    assert Orchestrator(workdir=fixture_repo).resume("shop").status == "done"


def test_a_second_run_with_the_same_task_id_is_refused(fixture_repo, tiny_workflow, memory_dir):
    with _held(memory_dir, "twin"):
        with pytest.raises(OrchestratorUserError, match="'twin' is already running"):
            Orchestrator(workdir=fixture_repo, workflow=tiny_workflow).run("x", task_id="twin")
    assert not (memory_dir / "research_plans" / "twin.md").exists()
