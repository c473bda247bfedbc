"""Resume edge cases: a finished task, every checkpoint corrupt, copy-paste resume hints."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from orchestrator.api import Orchestrator


def _files(folder):
    return sorted(p.name for p in folder.iterdir())


def test_resume_from_snapshot_of_a_finished_task_does_nothing(
    fixture_repo, tiny_workflow, memory_dir
):
    orch = Orchestrator(workdir=fixture_repo, workflow=tiny_workflow)
    orch.run("Survey the shop service", task_id="shop")
    snapshot = orch.handoff("shop")
    before = {d: _files(memory_dir / d) for d in ("findings", "checkpoints")}
    events: list[dict] = []
    result = Orchestrator(on_event=events.append).resume(from_snapshot=str(snapshot))
    assert result.status == "done"
    assert "task 'shop' is already done; nothing to resume" in result.warnings
    assert {d: _files(memory_dir / d) for d in before} == before  # nothing planned again


def test_every_checkpoint_corrupt_warns_and_reuses_the_findings(
    fixture_repo, tiny_workflow, memory_dir
):
    first = Orchestrator(workdir=fixture_repo, workflow=tiny_workflow).run(
        "Survey the shop service", task_id="shop"
    )
    shutil.rmtree(memory_dir / ".langgraph")
    for snap in (memory_dir / "context_snapshots").iterdir():
        snap.unlink()
    for cp in (memory_dir / "checkpoints").iterdir():
        cp.write_bytes(cp.read_bytes()[:40])  # truncated by a crash
    result = Orchestrator(workdir=fixture_repo).resume("shop")
    assert result.status == "done"
    assert result.warnings[0].startswith("no valid checkpoint")
    assert "corrupt file(s) skipped" in result.warnings[0]
    assert "subtasks whose findings files exist are not rerun" in result.warnings[1]
    assert sorted(result.findings) == sorted(first.findings)  # reused, none duplicated


def test_printed_resume_hints_work_from_any_directory(fixture_repo, tiny_workflow, tmp_path):
    memory = tmp_path / "elsewhere" / "mem"
    env_free = {k: v for k, v in __import__("os").environ.items() if k != "TETHER_MEMORY_DIR"}
    done = subprocess.run(
        [sys.executable, "-m", "orchestrator.cli", "run", "Survey", "--task", "t1",
         "--workdir", str(fixture_repo), "--workflow", str(tiny_workflow),
         "--memory-dir", str(memory)],
        capture_output=True, text=True, env=env_free, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert not any(ln.startswith("Resume:") for ln in lines)  # done: nothing to resume
    assert f"Hand off: orchestrator handoff --task t1 --memory-dir {memory}" in lines
    other = tmp_path / "other"
    other.mkdir()
    hint = next(ln for ln in lines if ln.startswith("Hand off:")).split()[2:]
    again = subprocess.run(
        [sys.executable, "-m", "orchestrator.cli", *hint[1:]],
        capture_output=True, text=True, env=env_free, cwd=other,
    )  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert Path(again.stdout.strip()).parent == memory / "context_snapshots"


def test_a_finished_task_is_done_without_the_langgraph_database(
    fixture_repo, tiny_workflow, memory_dir
):
    """Status read from the JSON checkpoints (LangGraph's db gone, or a served task) keeps
    a finished task `done`, not `interrupted`."""
    Orchestrator(workdir=fixture_repo, workflow=tiny_workflow).run("Survey", task_id="shop")
    shutil.rmtree(memory_dir / ".langgraph")
    status = Orchestrator().status("shop")
    assert (status["status"], status["source"], status["resume"]) == ("done", "checkpoint", None)


def test_a_task_started_with_relative_paths_resumes_from_any_directory(
    fixture_repo, tiny_workflow, tmp_path
):
    """The workflow file and workdir given relative to where `run` started are recorded
    whole: the printed `Resume:` hint works from another folder."""
    env = {k: v for k, v in __import__("os").environ.items() if k != "TETHER_MEMORY_DIR"}
    memory = tmp_path / "mem"
    killed = subprocess.run(
        [sys.executable, "-m", "orchestrator.cli", "run", "Survey", "--task", "rel",
         "--workdir", fixture_repo.name, "--workflow", tiny_workflow.name,
         "--memory-dir", str(memory)],
        capture_output=True, text=True, env={**env, "TETHER_FAULT": "merge_after_write"},
        cwd=tmp_path,
    )  # fmt: skip
    assert killed.returncode == -9, killed.stderr
    status = subprocess.run(
        [sys.executable, "-m", "orchestrator.cli", "status", "--memory-dir", str(memory)],
        capture_output=True, text=True, env=env, cwd=tmp_path,
    )  # fmt: skip
    hint = next(ln for ln in status.stdout.splitlines() if ln.startswith("Resume:"))
    other = tmp_path / "other"
    other.mkdir()
    again = subprocess.run(
        [sys.executable, "-m", "orchestrator.cli", *hint.split()[2:]],
        capture_output=True, text=True, env=env, cwd=other,
    )  # fmt: skip
    assert again.returncode == 0, again.stdout + again.stderr
    assert "Task rel: done" in again.stdout
