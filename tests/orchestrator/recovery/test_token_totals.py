"""Token totals survive fallback resumes: they never shrink when LangGraph's state is gone.

A run is killed after some subagents finished (their findings and registry records are on
disk, the next JSON checkpoint is not); LangGraph's database is deleted; `resume` rebuilds
the state from the JSON checkpoint, the registry and the findings. The total it reports
must include what the finished subagents spent.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

CMD = [sys.executable, "-m", "orchestrator.cli"]


def _registry_tokens(memory_dir) -> int:
    """What the finished subagents spent, as their registry records (JSON files) say."""
    total = 0
    for path in (memory_dir / ".tether" / "records" / "subagents").glob("*/findings*.json"):
        total += int(json.loads(path.read_text())["data"].get("tokens") or 0)
    return total


def test_a_fallback_resume_keeps_the_tokens_of_finished_subagents(
    fixture_repo, tiny_workflow, memory_dir, cli_env
):
    run = [*CMD, "run", "Survey the shop", "--task", "t", "--workdir", str(fixture_repo),
           "--workflow", str(tiny_workflow), "--max-parallel", "1"]  # fmt: skip
    killed = subprocess.run(
        run, env={**cli_env, "TETHER_FAULT": "merge_before_write:1"}, capture_output=True
    )
    assert killed.returncode == -9, killed.stderr
    spent_before_kill = _registry_tokens(memory_dir)
    assert spent_before_kill > 0
    shutil.rmtree(memory_dir / ".langgraph")

    resumed = subprocess.run([*CMD, "resume", "--task", "t"], env=cli_env, capture_output=True)
    assert resumed.returncode == 0, resumed.stderr
    status = subprocess.run(
        [*CMD, "status", "--task", "t", "--json"], env=cli_env, capture_output=True, text=True
    )
    tokens = json.loads(status.stdout)["tokens"]
    assert tokens["total"] >= spent_before_kill
    subagents = {k: v for k, v in tokens.items() if k != "total" and ":" in k}
    assert sum(subagents.values()) >= spent_before_kill
    assert os.path.isdir(memory_dir / ".langgraph")  # the resumed run is durable again


def test_a_resume_from_a_snapshot_continues_the_totals(
    fixture_repo, tiny_workflow, memory_dir, cli_env
):
    run = [*CMD, "run", "Survey the shop", "--task", "t", "--workdir", str(fixture_repo),
           "--workflow", str(tiny_workflow)]  # fmt: skip
    killed = subprocess.run(
        run, env={**cli_env, "TETHER_FAULT": "spawn_after_checkpoint:2"}, capture_output=True
    )
    assert killed.returncode == -9, killed.stderr

    def total() -> int:
        out = subprocess.run([*CMD, "status", "--task", "t", "--json"], env=cli_env,
                             capture_output=True, text=True, check=True)  # fmt: skip
        return json.loads(out.stdout)["tokens"]["total"]

    at_handoff = total()
    handoff = subprocess.run(
        [*CMD, "handoff", "--task", "t"], env=cli_env, capture_output=True, text=True, check=True
    )
    snap = handoff.stdout.strip().splitlines()[-1].split()[-1]
    shutil.rmtree(memory_dir / ".langgraph")
    resumed = subprocess.run(
        [*CMD, "resume", "--from-snapshot", snap], env=cli_env, capture_output=True, text=True
    )
    assert resumed.returncode == 0, resumed.stderr
    assert total() >= at_handoff > 0
