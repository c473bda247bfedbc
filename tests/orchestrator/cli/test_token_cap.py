"""A per-agent token cap (`max_tokens` on an agent, `thresholds.subagent_max_tokens` for
the others): an agent that reaches it is asked to submit at its next call and its finding is
marked partial; one that does not submit gets a partial finding from what it did; the task
goes on to its end, and `status` shows why each finding is partial.

Through the `orchestrator` command and the real `langchain-openai` client against the
scripted server.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.orchestrator.openai_server import ScriptedOpenAI
from tests.orchestrator.scripted_agents import agents, findings

REPO = Path(__file__).resolve().parents[3]
CMD = [sys.executable, "-m", "orchestrator.cli"]
CAP = 300
WORKFLOW = f"""
phases: [exploration]
agents:
  obliging:
    description: Looks around, submits when told.
    prompt: AGENT=obliging
    tools: [list_files, read_file]
    max_steps: 12
    max_tokens: {CAP}
  stubborn:
    description: Looks around, never submits.
    prompt: AGENT=stubborn
    tools: [list_files, read_file]
    max_steps: 12
  free:
    description: No cap.
    prompt: AGENT=free
    tools: [list_files]
    max_tokens: 1000000
thresholds:
  subagent_max_tokens: {CAP}
"""


def plan(phase: str) -> dict:
    subs = [
        {"id": name, "title": f"Work of {name}", "description": "Look.", "agent": name}
        for name in ("obliging", "stubborn", "free")
    ]
    return {"strategy": "Three agents.", "subtasks": subs, "done": True, "reason": "once"}


def forced(body: dict) -> bool:
    choice = body.get("tool_choice")
    return isinstance(choice, dict) and choice["function"]["name"] == "SubmitFindings"


def obliging(body: dict) -> dict:
    if forced(body):
        return findings("Read notes.txt before the cap.", status="partial")
    return {"tool": "read_file", "args": {"path": "notes.txt"}}


STEPS = {
    "obliging": [obliging],
    "stubborn": [{"tool": "read_file", "args": {"path": "notes.txt"}}],
    "free": [{"tool": "list_files", "args": {"path": "."}}, findings("All looked at.")],
}


def orch(*args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([*CMD, *args], env=env, capture_output=True, text=True, timeout=180)


def test_an_agent_at_its_token_cap_stops_with_a_partial_finding(tmp_path, cli_env):
    (tmp_path / "wf.yaml").write_text(WORKFLOW)
    (tmp_path / "notes.txt").write_text("Some notes about the project.\n" * 20)
    env = {**cli_env, "TETHER_ALLOW_MODEL_REQUESTS": "1", "OPENAI_API_KEY": "sk-test",
           "PYTHONPATH": str(REPO)}  # fmt: skip
    with ScriptedOpenAI(responder=agents(plan, STEPS)) as server:
        env["OPENAI_BASE_URL"] = server.base_url
        run = orch(
            "run", "Look around", "--task", "cap1", "--workdir", str(tmp_path), "--workflow",
            str(tmp_path / "wf.yaml"), "--model", "openai:gpt-4o-mini", env=env,
        )  # fmt: skip
        stubborn_calls = [
            b for b in server.requests if "AGENT=stubborn" in json.dumps(b["messages"][:1])
        ]
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Task cap1: done" in run.stdout
    # the stubborn agent stopped at its cap: one call past it (forced), not its 12 steps
    assert 2 <= len(stubborn_calls) <= 3
    info = json.loads(orch("status", "--task", "cap1", "--json", env=env).stdout)
    assert info["status"] == "done" and info["findings"] == 3
    subs = info["subtasks"]
    assert "token cap" in subs["exploration/obliging"]["partial"]
    assert f"token cap of {CAP:,} (" in subs["exploration/stubborn"]["partial"]
    assert subs["exploration/free"]["partial"] is None
    text = orch("status", "--task", "cap1", env=env).stdout
    assert "exploration/stubborn [stubborn] (partial: stopped at its token cap" in text
    assert "exploration/free [free]\n" in text + "\n"
    # the findings files say partial; the stubborn one lists what it looked at
    files = {p.name: p.read_text() for p in Path(info["memory_dir"], "findings").glob("*.md")}
    stubborn = next(t for n, t in files.items() if n.startswith("stubborn"))
    assert "partial" in stubborn and "notes.txt" in stubborn
    obliging_text = next(t for n, t in files.items() if n.startswith("obliging"))
    assert "Read notes.txt before the cap." in obliging_text and "partial" in obliging_text


RESUMED = """
phases: [exploration]
agents:
  obliging:
    description: Reads, submits when told.
    prompt: AGENT=obliging
    tools: [read_file]
    max_steps: 12
    max_tokens: 3000
"""


def test_a_resumed_agent_s_cap_counts_what_it_spent_before_the_kill(tmp_path, cli_env):
    """Killed right after its second call (together past its cap, so its next call must
    submit), the agent resumed in a new process is asked to submit at its first call: the
    cap counts the calls of the killed process (the usage journal's), not from zero."""
    (tmp_path / "wf.yaml").write_text(RESUMED)
    (tmp_path / "notes.txt").write_text("Some notes about the project, line after line.\n" * 300)

    def one_agent(phase: str) -> dict:
        sub = {"id": "obliging", "title": "Read", "description": "Read.", "agent": "obliging"}
        return {"strategy": "One.", "subtasks": [sub], "done": True, "reason": "once"}

    env = {**cli_env, "TETHER_ALLOW_MODEL_REQUESTS": "1", "OPENAI_API_KEY": "sk-test",
           "PYTHONPATH": str(REPO)}  # fmt: skip
    args = ["--task", "cap2", "--workdir", str(tmp_path), "--workflow",
            str(tmp_path / "wf.yaml"), "--model", "openai:gpt-4o-mini"]  # fmt: skip
    with ScriptedOpenAI(responder=agents(one_agent, {"obliging": [obliging]})) as server:
        env["OPENAI_BASE_URL"] = server.base_url
        # the lead's plan, then the agent's two reads: killed after the third call
        killed = orch(
            "run", "Read the notes", *args, env={**env, "TETHER_FAULT": "agent_after_call:3"}
        )
        assert killed.returncode == -9, killed.stdout + killed.stderr
        mine = [b for b in server.requests if "AGENT=obliging" in json.dumps(b["messages"][:1])]
        assert len(mine) == 2 and not any(forced(b) for b in mine)  # under its cap so far
        spent = sum(r["total"] for r in server.log[1:])
        assert spent >= 3000, "the two reads should pass the cap together"
        before = len(server.requests)
        resumed = orch("resume", "--task", "cap2", env=env)
        after = [
            b for b in server.requests[before:] if "AGENT=obliging" in json.dumps(b["messages"][:1])
        ]
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert after and forced(after[0])  # its first call in the new process submits
    info = json.loads(orch("status", "--task", "cap2", "--json", env=env).stdout)
    assert "token cap of 3,000" in info["subtasks"]["exploration/obliging"]["partial"]
