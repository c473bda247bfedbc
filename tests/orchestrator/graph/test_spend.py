"""What a task spent is one figure, from each model call's durable record (the usage
journal): a kill -9 loses none of it, a call cut by SIGTERM in flight still counts, and a
budget stop's report agrees with itself.

Through the `orchestrator` command and the real `langchain-openai` client against the
scripted server, which counts what it was sent and what it reported.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.orchestrator.openai_server import ScriptedOpenAI
from tests.orchestrator.scripted_agents import agents, findings, offered

REPO = Path(__file__).resolve().parents[3]
CMD = [sys.executable, "-m", "orchestrator.cli"]
WORKFLOW = """
phases: [exploration]
agents:
  scout:
    description: Looks around.
    prompt: AGENT=scout
    tools: [list_files]
"""


def plan_of(n: int):
    def plan(phase: str) -> dict:
        subs = [{"id": f"s{i}", "title": f"Part {i}", "description": "Look.", "agent": "scout"}
                for i in range(n)]  # fmt: skip
        return {"strategy": "Scouts.", "subtasks": subs}

    return plan


LOOK = {"tool": "list_files", "args": {"path": "."}}
STEPS = {"scout": [LOOK, LOOK, LOOK, findings("Looked.")]}


def _env(cli_env: dict, server: ScriptedOpenAI) -> dict:
    return {**cli_env, "TETHER_ALLOW_MODEL_REQUESTS": "1", "OPENAI_API_KEY": "sk-test",
            "PYTHONPATH": str(REPO), "OPENAI_BASE_URL": server.base_url}  # fmt: skip


def _run_args(tmp_path: Path, task: str, *extra: str) -> list[str]:
    (tmp_path / "wf.yaml").write_text(WORKFLOW)
    return ["run", "Look around", "--task", task, "--workdir", str(tmp_path), "--workflow",
            str(tmp_path / "wf.yaml"), "--model", "openai:gpt-4o-mini", *extra]  # fmt: skip


def orch(*args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([*CMD, *args], env=env, capture_output=True, text=True, timeout=180)


def status(task: str, env: dict) -> dict:
    done = orch("status", "--task", task, "--json", env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)


def test_kill_9_mid_subagent_loses_no_spend(tmp_path, cli_env):
    """Killed right after the third model call (the lead's plan, then two of the scout's),
    the task's spend is what the server reported for every call it answered; the resumed
    run adds exactly what it was billed after."""
    with ScriptedOpenAI(responder=agents(plan_of(1), STEPS)) as server:
        env = _env(cli_env, server)
        killed = orch(*_run_args(tmp_path, "k1", "--budget-tokens", "10000000"),
                      env={**env, "TETHER_FAULT": "agent_after_call:3"})  # fmt: skip
        assert killed.returncode == -signal.SIGKILL, killed.stdout + killed.stderr
        assert len(server.log) == 3
        billed = sum(r["total"] for r in server.log)
        info = status("k1", env)
        assert info["budget"]["spent"] == billed
        assert info["tokens"]["total"] == billed
        assert info["usage"]["calls"] == 3
        resumed = orch("resume", "--task", "k1", env=env)
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        billed = sum(r["total"] for r in server.log)
        calls = len(server.log)
    final = status("k1", env)
    assert final["status"] == "done"
    assert final["budget"]["spent"] == billed
    assert sum(final["budget"]["by_agent"].values()) == billed
    assert sum(final["budget"]["by_phase"].values()) == billed
    assert final["usage"]["calls"] == calls


def test_kill_9_during_a_call_counts_the_call_cut(tmp_path, cli_env):
    """SIGKILL from outside while the scout's third request sits at the server: every
    call answered before counts as the server reported it, and the cut one as sent."""
    hung = threading.Event()
    respond = agents(plan_of(1), STEPS)

    def responder(body: dict) -> dict:
        mine = "SubmitFindings" in offered(body)
        if mine and sum(1 for m in body["messages"] if m["role"] == "assistant") == 2:
            hung.set()
            return {"hang": 300}
        return respond(body)

    with ScriptedOpenAI(responder=responder) as server:
        env = _env(cli_env, server)
        proc = subprocess.Popen(
            [*CMD, *_run_args(tmp_path, "k2", "--budget-tokens", "10000000")],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            assert hung.wait(120), "the scout's third call never reached the server"
            proc.kill()
            assert proc.wait(60) == -signal.SIGKILL
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        billed = sum(r["total"] for r in server.log)
        sent, answered = len(server.requests), len(server.log)
    assert (sent, answered) == (4, 3)
    info = status("k2", env)
    assert info["usage"]["calls"] == sent
    assert info["budget"]["spent"] > billed  # the cut call's prompt on top
    assert info["tokens"]["total"] == info["budget"]["spent"]


def _figure(pattern: str, text: str) -> int:
    found = re.search(pattern, text, re.MULTILINE)
    assert found, f"{pattern!r} not in:\n{text}"
    return int(found.group(1).replace(",", ""))


def _parts(line: str, what: str) -> dict[str, int]:
    found = re.search(rf"{what}: ([^;)]*)", line)
    assert found, line
    out = {}
    for part in found.group(1).split(", "):
        name, _, n = part.rpartition(" ")
        out[name] = int(n.replace(",", ""))
    return out


def test_a_budget_stop_reports_one_figure(tmp_path, cli_env):
    """At a budget stop: `Budget:` total == the `Stopped:` figure == the sum by agent == the
    sum by phase, and `Usage:` counts every call the server was sent (subagents stopped in
    flight included)."""
    budget = 6_000
    with ScriptedOpenAI(responder=agents(plan_of(4), STEPS)) as server:
        env = _env(cli_env, server)
        stopped = orch(*_run_args(tmp_path, "b1", "--budget-tokens", str(budget),
                                  "--max-parallel", "2"), env=env)  # fmt: skip
        assert stopped.returncode == 6, stopped.stdout + stopped.stderr
        sent = len(server.requests)
    out = stopped.stdout
    total = _figure(r"^Budget:\s+([\d,]+) of", out)
    assert _figure(r"^Stopped:.*?([\d,]+) of [\d,]+ tokens", out) == total
    line = next(ln for ln in out.splitlines() if ln.startswith("Budget:"))
    by_agent, by_phase = _parts(line, "by agent"), _parts(line, "by phase")
    assert sum(by_agent.values()) == total, line
    assert sum(by_phase.values()) == total, line
    assert _figure(r"^Usage:\s+([\d,]+) model call", out) == sent
    info = status("b1", env)
    assert info["budget"]["spent"] == total
    assert info["usage"]["calls"] == sent


def _hangs(who: str, body: dict) -> bool:
    """The lead's first call, or the scout's second."""
    if who == "lead":
        return "PhasePlan" in offered(body)
    return "SubmitFindings" in offered(body) and any(
        m["role"] == "assistant" for m in body["messages"]
    )


@pytest.mark.parametrize("who", ["lead", "scout"])
def test_sigterm_during_a_hung_request_stops_and_counts_the_cut_call(tmp_path, cli_env, who):
    """SIGTERM while the provider sits on a request (300 s), the lead's or a subagent's:
    the run stops well before the request ends (exit 143, the resume line once, no
    traceback), and `status` counts the cut call (its prompt, estimated)."""
    hung = threading.Event()
    respond = agents(plan_of(1), STEPS)

    def responder(body: dict) -> dict:
        if _hangs(who, body):
            hung.set()
            return {"hang": 300}
        return respond(body)

    with ScriptedOpenAI(responder=responder) as server:
        env = _env(cli_env, server)
        proc = subprocess.Popen(
            [*CMD, *_run_args(tmp_path, "t1")], env=env, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            assert hung.wait(120), "the scout's second call never reached the server"
            proc.send_signal(signal.SIGTERM)
            try:
                out, err = proc.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                out, err = proc.communicate()
                raise AssertionError("the run did not stop within 60 s of SIGTERM") from None
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        sent = len(server.requests)
        answered = len(server.log)
    assert proc.returncode == 143, out + err
    assert "Traceback" not in err
    said = [ln for ln in err.splitlines() if ln.startswith("Terminated (SIGTERM)")]
    assert len(said) == 1 and said[0].startswith("Terminated (SIGTERM); resume with"), err
    assert answered == sent - 1  # the hung one was never answered
    info = status("t1", env)
    assert info["usage"]["calls"] == sent
    assert info["tokens"]["total"] > 0
