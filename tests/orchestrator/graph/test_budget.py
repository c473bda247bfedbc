"""A token budget: once the task's agents have spent it (prompt plus completion tokens, as
the provider reports them), no model call starts, the task stops `stopped` (exit code 6)
with a checkpoint, a plain `resume` says it is at its budget, and `resume --budget-tokens M`
finishes it without running a finished subagent again.

Through the `orchestrator` command and the real `langchain-openai` client against the
scripted server, which logs when each request arrived and what it reported.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from tests.orchestrator.openai_server import ScriptedOpenAI
from tests.orchestrator.scripted_agents import agents, findings, offered, text_of

REPO = Path(__file__).resolve().parents[3]
CMD = [sys.executable, "-m", "orchestrator.cli"]
WORKFLOW = """
phases: [exploration, review]
agents:
  scout:
    description: Looks around.
    prompt: AGENT=scout
    tools: [list_files]
"""
PARALLEL = 2


def plan(phase: str) -> dict:
    subs = [{"id": f"s{i}", "title": f"Part {i}", "description": "Look.", "agent": "scout"}
            for i in range(4)]  # fmt: skip
    return {"strategy": "Four scouts.", "subtasks": subs}


STEPS = {"scout": [{"tool": "list_files", "args": {"path": "."}}, findings("Looked.")]}


def orch(*args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([*CMD, *args], env=env, capture_output=True, text=True, timeout=120)


def test_a_run_stops_at_its_budget_and_resumes_with_a_larger_one(tmp_path, cli_env):
    (tmp_path / "wf.yaml").write_text(WORKFLOW)
    env = {**cli_env, "TETHER_ALLOW_MODEL_REQUESTS": "1", "OPENAI_API_KEY": "sk-test",
           "PYTHONPATH": str(REPO)}  # fmt: skip
    with ScriptedOpenAI(responder=agents(plan, STEPS)) as server:
        env["OPENAI_BASE_URL"] = server.base_url
        budget = 6_000
        stopped = orch(
            "run", "Look around", "--task", "b1", "--workdir", str(tmp_path), "--workflow",
            str(tmp_path / "wf.yaml"), "--model", "openai:gpt-4o-mini", "--budget-tokens",
            str(budget), "--max-parallel", str(PARALLEL), env=env,
        )  # fmt: skip
        assert stopped.returncode == 6, stopped.stdout + stopped.stderr
        assert "Task b1: stopped" in stopped.stdout
        assert f"of {budget:,} tokens spent" in stopped.stdout
        assert "--budget-tokens N" in stopped.stdout
        # no call started once the budget was reached: the calls past it are those that
        # were already in flight, at most one per running agent
        log = sorted(server.log, key=lambda r: r["done"])
        spent, reached = 0, None
        for record in log:
            spent += record["total"]
            if spent >= budget:
                reached = record["done"]
                break
        assert reached is not None
        assert len([r for r in server.log if r["arrived"] > reached]) <= PARALLEL
        info = json.loads(orch("status", "--task", "b1", "--json", env=env).stdout)
        assert info["status"] == "stopped" and "token budget reached" in info["stop_reason"]
        assert info["budget"]["budget"] == budget and info["budget"]["spent"] > 0
        assert set(info["budget"]["by_agent"]) <= {"lead", "scout"}
        before = len(server.requests)
        again = orch("resume", "--task", "b1", env=env)  # the budget is what was recorded
        assert again.returncode == 6 and "token budget reached" in again.stdout
        assert len(server.requests) == before  # at its budget: nothing was asked
        done_keys = {k for k, v in info["subtasks"].items() if v["state"] == "done"}
        resumed = orch("resume", "--task", "b1", "--budget-tokens", "10000000", env=env)
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        assert "Task b1: done" in resumed.stdout
        after = [b for b in server.requests[before:] if "SubmitFindings" in offered(b)]
    # no finished subagent ran again: no later request is a finished subtask's
    assert done_keys
    asked = {"{}/{}".format(*re.findall(r"^(?:Phase|Subtask): (\S+)", text_of(b["messages"][1]),
                                        re.M)) for b in after}  # fmt: skip
    assert asked and not asked & done_keys
    final = json.loads(orch("status", "--task", "b1", "--json", env=env).stdout)
    assert final["status"] == "done" and final["findings"] == 8
    assert final["budget"]["budget"] == 10_000_000  # the new budget is the task's
