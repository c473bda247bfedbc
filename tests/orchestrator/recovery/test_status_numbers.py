"""`orchestrator status` numbers that read true: an offline task's tokens are estimates
(nothing was spent), and "Latest snapshot" is the task's newest, a handoff's included."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from orchestrator.cli.app import cli


@pytest.fixture
def runner(fixture_repo, tiny_workflow, memory_dir):
    runner = CliRunner()
    for task in ("a", "b"):
        args = ["run", "Survey", "--task", task, "--workdir", str(fixture_repo)]
        result = runner.invoke(cli, [*args, "--workflow", str(tiny_workflow)])
        assert result.exit_code == 0, result.output
    return runner


def test_an_offline_tasks_tokens_are_estimates_and_its_status_says_nothing_was_spent(runner):
    info = json.loads(runner.invoke(cli, ["status", "--task", "a", "--json"]).output)
    assert info["model"] == "tether:offline" and info["tokens_estimated"] is True
    total = info["tokens"]["total"]
    assert total == sum(v for k, v in info["tokens"].items() if k != "total") > 0
    out = runner.invoke(cli, ["status", "--task", "a"]).output
    calls = info["usage"]["calls"]
    # the estimates stay in --json; the text names no figure that reads like a bill
    line = f"Spent: nothing ({calls:,} offline model call(s): no provider was called)"
    assert line in out.splitlines() and f"{total:,}" not in out


def test_the_latest_snapshot_is_the_tasks_newest_a_handoffs_included(runner, memory_dir):
    def latest(task: str) -> str:
        out = runner.invoke(cli, ["status", "--task", task]).output
        return next(ln for ln in out.splitlines() if ln.startswith("Latest snapshot: "))[17:]

    closing_a = latest("a")
    assert closing_a.startswith(str(memory_dir / "context_snapshots" / "snap_"))
    handoff = runner.invoke(cli, ["handoff", "--task", "a"]).output.strip().splitlines()[-1]
    assert latest("a") == handoff != closing_a
    # task b's newest is its own, not the handoff of a written after it
    assert latest("b") not in (handoff, closing_a)
    snaps = sorted((memory_dir / "context_snapshots").glob("snap_*.md"))
    assert len(snaps) == 3 and latest("b") in map(str, snaps)
