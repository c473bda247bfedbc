"""The lead's lines in `working/{task}/messages.jsonl`: each turn once.

The lead's earlier turns are sent again in every later call (`lead_log`), and a resume
replays nodes; neither may add a second line for a turn the log already holds.
"""

from __future__ import annotations

import collections
import json
import subprocess
import sys

import pytest

from orchestrator.api import Orchestrator

CMD = [sys.executable, "-m", "orchestrator.cli"]


def _lines(memory_dir, task):
    path = memory_dir / "working" / task / "messages.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _lead_turns(lines):
    """The lead's own turns: phase instructions, plan summaries, merged digests."""
    starts = ("Objective:", "Plan for phase", "Findings of phase")
    return [str(r.get("content")) for r in lines if str(r.get("content")).startswith(starts)]


def _assert_each_once(lines):
    ids = collections.Counter(r["id"] for r in lines)
    assert [i for i, n in ids.items() if n > 1] == []
    turns = collections.Counter(_lead_turns(lines))
    assert [t[:60] for t, n in turns.items() if n > 1] == []


@pytest.fixture
def three_phases(tmp_path):
    path = tmp_path / "three.yaml"
    path.write_text("name: three\nphases: [exploration, planning, review]\n")
    return path


def test_an_uninterrupted_run_logs_each_lead_turn_once(fixture_repo, three_phases, memory_dir):
    Orchestrator(workdir=fixture_repo, workflow=three_phases).run("Survey the shop", task_id="t")
    lines = _lines(memory_dir, "t")
    _assert_each_once(lines)
    # 3 phase instructions, 3 plan summaries, 3 merged digests
    assert len(_lead_turns(lines)) == 9
    # every tool call of the lead is answered in the log, its final PhasePlan call too
    calls = [
        c["id"] for r in lines if r.get("role") == "assistant" for c in r.get("tool_calls") or []
    ]
    answers = {r["tool_call_id"]: r.get("name") for r in lines if r.get("role") == "tool"}
    assert calls and all(c in answers for c in calls)
    assert list(answers.values()).count("PhasePlan") == 3


@pytest.mark.parametrize("fault", ["spawn_after_checkpoint:2", "merge_after_checkpoint:1"])
def test_a_resumed_run_logs_each_lead_turn_once(
    fixture_repo, three_phases, memory_dir, cli_env, fault
):
    run = [*CMD, "run", "Survey the shop", "--task", "t", "--workdir", str(fixture_repo),
           "--workflow", str(three_phases)]  # fmt: skip
    killed = subprocess.run(run, env={**cli_env, "TETHER_FAULT": fault}, capture_output=True)
    assert killed.returncode == -9, killed.stderr
    resumed = subprocess.run([*CMD, "resume", "--task", "t"], env=cli_env, capture_output=True)
    assert resumed.returncode == 0, resumed.stderr
    lines = _lines(memory_dir, "t")
    _assert_each_once(lines)
    assert len(_lead_turns(lines)) == 9
