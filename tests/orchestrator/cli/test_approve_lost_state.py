"""`approve` on a waiting task whose LangGraph database is gone says, in one line, that the
decision could not be applied and that the plan is asked again (it used to re-plan and ask
again without a word)."""

from __future__ import annotations

import json
import shutil

from click.testing import CliRunner

from orchestrator.cli.app import cli


def test_approve_with_langgraph_gone_says_the_decision_was_not_applied(
    fixture_repo, tmp_path, memory_dir
):
    workflow = tmp_path / "gate.yaml"
    workflow.write_text("name: gate\nphases: [exploration, review]\napprove_plan: true\n")
    runner = CliRunner()
    run = ["run", "Survey", "--task", "g", "--workdir", str(fixture_repo), "--workflow"]
    assert runner.invoke(cli, [*run, str(workflow)]).exit_code == 4
    shutil.rmtree(memory_dir / ".langgraph")
    approved = runner.invoke(cli, ["approve", "--task", "g"])
    assert approved.exit_code == 4, approved.output  # the plan waits again
    said = [ln for ln in approved.output.splitlines() if "could not be applied" in ln]
    assert len(said) == 1, approved.output
    assert "LangGraph's saved state of the task is gone" in said[0]
    assert "plan is made and asked for approval again" in said[0]
    info = json.loads(runner.invoke(cli, ["status", "--task", "g", "--json"]).stdout)
    assert info["status"] == "waiting" and info["pending_approvals"]
