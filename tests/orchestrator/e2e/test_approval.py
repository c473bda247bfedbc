"""Human approval, durable: a write that waits (exit 4), is approved or rejected by a second
process, happens once, keeps the old content in memory, and survives a kill.

Each `orchestrator` command runs in its own process with the real `langchain-openai`
client against the scripted server of this process (`openai_server.py`); the writer agent
is played by `scripted_agents`.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.orchestrator.openai_server import ScriptedOpenAI
from tests.orchestrator.scripted_agents import agents, findings, one_subtask, tool_answers

REPO = Path(__file__).parents[3]
CMD = [sys.executable, "-m", "orchestrator.cli"]
WORKFLOW = """
phases: [implementation, review]
python_tools: [tests.orchestrator.fixtures.widget_tools:count_widgets]
agents:
  writer:
    description: Updates the notes of the project.
    prompt: AGENT=writer Keep the notes short.
    tools: [read_file, write_file, count_widgets]
    interrupt_on: [write_file]
"""
WRITER = [
    {"tool": "count_widgets", "args": {"color": "red"}},
    {"tool": "write_file", "args": {"path": "notes.txt", "content": "7 red widgets\n"}},
    lambda body: findings("Notes: " + " | ".join(tool_answers(body))),
]


@pytest.fixture
def project(tmp_path, cli_env):
    """A workdir with notes.txt, the workflow, and the environment of the commands."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "notes.txt").write_text("old notes: 3 red widgets\n")
    (tmp_path / "wf.yaml").write_text(WORKFLOW)
    calls = tmp_path / "widget-calls.txt"
    env = {
        **cli_env,
        "TETHER_ALLOW_MODEL_REQUESTS": "1",
        "OPENAI_API_KEY": "sk-test",
        "PYTHONPATH": str(REPO),
        "WIDGET_CALLS": str(calls),
    }
    return work, tmp_path / "wf.yaml", calls, env


def command(*args: str, env: dict, server: ScriptedOpenAI) -> subprocess.CompletedProcess:
    env = {**env, "OPENAI_BASE_URL": server.base_url}
    return subprocess.run(
        [*CMD, *args], env=env, capture_output=True, text=True, timeout=90, cwd=REPO
    )


def start(project, server) -> subprocess.CompletedProcess:
    work, wf, _calls, env = project
    return command(
        "run", "Update the notes with the red widget count", "--task", "notes",
        "--workdir", str(work), "--workflow", str(wf), "--model", "openai:gpt-4o-mini",
        env=env, server=server,
    )  # fmt: skip


def memory(*args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "memory.cli", *args], env=env, capture_output=True, text=True
    )


def test_a_write_waits_and_a_second_process_approves_it_once(project, memory_dir):
    work, _wf, calls, env = project
    with ScriptedOpenAI(responder=agents(one_subtask("writer"), {"writer": WRITER})) as server:
        paused = start(project, server)
        assert paused.returncode == 4, paused.stderr
        assert (work / "notes.txt").read_text() == "old notes: 3 red widgets\n"  # not yet
        out = paused.stdout
        assert "Task notes: waiting" in out
        line = re.search(r"waits for approval: (\w+)  writer \(implementation/writer-1\)  "
                         r"write_file\((.*)\)", out)  # fmt: skip
        assert line, out
        assert json.loads(line.group(2)) == {"path": "notes.txt", "content": "7 red widgets\n"}
        assert "orchestrator approve --task notes" in out
        assert "--reject" in out

        status = command("status", "--json", env=env, server=server)
        info = json.loads(status.stdout)
        assert info["status"] == "waiting"
        [request] = info["pending_approvals"]
        assert (request["agent"], request["tool"]) == ("writer", "write_file")
        assert request["id"].startswith(line.group(1))
        shown = command("status", env=env, server=server).stdout
        assert f"waits for approval: {line.group(1)}" in shown

        before = len(server.requests)
        approved = command("approve", "--task", "notes", env=env, server=server)
        assert approved.returncode == 0, approved.stderr
        assert "Task notes: done" in approved.stdout
        assert "Skipped:  review" in approved.stdout  # the lead said one phase answers it
    assert (work / "notes.txt").read_text() == "7 red widgets\n"
    assert calls.read_text() == "red\n"  # the agent's earlier tool call did not run again
    assert len(server.requests) == before + 2  # the writer's last step, then the answer
    findings_file = next((memory_dir / "findings").glob("writer-writer-1_*.md")).read_text()
    entry = re.search(r"`notes.txt` \(modified; previous content: (mem-[\w-]+)\)", findings_file)
    assert entry, findings_file
    fetched = memory("fetch", entry.group(1), env=env)
    assert fetched.stdout == "old notes: 3 red widgets\n"  # byte-exact
    backups = memory("list", "--tag", "previous-content", "--json", env=env)
    assert len(json.loads(backups.stdout)) == 1  # one write, one backup
    found = memory("search", "old notes red widgets", "--scope", "entries", env=env)
    assert entry.group(1) in found.stdout


def test_a_rejection_reaches_the_agent_and_leaves_the_file(project, memory_dir):
    work, _wf, _calls, env = project
    with ScriptedOpenAI(responder=agents(one_subtask("writer"), {"writer": WRITER})) as server:
        assert start(project, server).returncode == 4
        rejected = command(
            "approve", "--reject", "--message", "Keep notes.txt as it is",
            env=env, server=server,
        )  # fmt: skip
        assert rejected.returncode == 0, rejected.stderr
    assert (work / "notes.txt").read_text() == "old notes: 3 red widgets\n"
    answers = [a for body in server.requests for a in tool_answers(body)]
    assert any("rejected" in a and "Keep notes.txt as it is" in a for a in answers), answers
    assert not any(a.startswith("Modified notes.txt") for a in answers)


def _asked_after_the_write(server: ScriptedOpenAI) -> bool:
    """Some agent's model request answers a `write_file` call: the write has run."""
    for body in list(server.requests):
        messages = body.get("messages", [])
        calls = [c for m in messages for c in m.get("tool_calls") or []]
        if (
            messages
            and messages[-1].get("role") == "tool"
            and any(c["function"]["name"] == "write_file" for c in calls)
        ):
            return True
    return False


def test_a_kill_after_approval_then_resume_writes_once(project, memory_dir):
    """The approving process dies (SIGKILL) while the writer's next model call hangs; a
    resume finishes the task and the write is not made (nor backed up) twice."""
    work, _wf, calls, env = project
    hang = {"hang": 30}
    steps = {"writer": [*WRITER[:2], hang, WRITER[2]]}
    with ScriptedOpenAI(responder=agents(one_subtask("writer"), steps)) as server:
        assert start(project, server).returncode == 4
        env_here = {**env, "OPENAI_BASE_URL": server.base_url}
        approving = subprocess.Popen(
            [*CMD, "approve"], env=env_here, cwd=REPO,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while (work / "notes.txt").read_text() != "7 red widgets\n":
            assert time.monotonic() < deadline and approving.poll() is None
            time.sleep(0.05)
        while not _asked_after_the_write(server):  # the writer's next (hanging) model call
            assert time.monotonic() < deadline and approving.poll() is None
            time.sleep(0.05)
        os.kill(approving.pid, signal.SIGKILL)
        approving.wait()
        server.responder = agents(one_subtask("writer"), {"writer": WRITER})
        resumed = command("resume", "--task", "notes", env=env, server=server)
        assert resumed.returncode == 0, resumed.stderr + resumed.stdout
        assert "Task notes: done" in resumed.stdout
    assert (work / "notes.txt").read_text() == "7 red widgets\n"
    assert calls.read_text() == "red\n"
    backups = memory("list", "--tag", "previous-content", "--json", env=env)
    assert len(json.loads(backups.stdout)) == 1


def test_on_postgres_another_orchestrator_approves_a_waiting_write(tmp_path):
    """`--memory-url`: the wait, the request and the approval live in PostgreSQL (documents
    and `PostgresSaver`); a second `Orchestrator` (another process or machine) approves."""
    from langchain_openai import ChatOpenAI

    from orchestrator.api import Orchestrator
    from tests.pg import private_schema

    work = tmp_path / "work"
    work.mkdir()
    (work / "notes.txt").write_text("old\n")
    wf = tmp_path / "wf.yaml"
    wf.write_text(
        "phases: [implementation]\nagents:\n  writer:\n    prompt: AGENT=writer\n"
        "    tools: [write_file]\n    interrupt_on: [write_file]\n"
    )
    steps = {"writer": [WRITER[1], findings("Wrote the notes.")]}
    with (
        private_schema() as url,
        ScriptedOpenAI(responder=agents(one_subtask("writer"), steps)) as server,
    ):
        model = ChatOpenAI(
            model="gpt-4o-mini", base_url=server.base_url, api_key="k", max_retries=0
        )
        with Orchestrator(workdir=work, workflow=wf, model=model, memory_url=url) as first:
            assert first.run("Update the notes", task_id="pg").status == "waiting"
            assert first.status("pg")["status"] == "waiting"
        with Orchestrator(workdir=work, workflow=wf, model=model, memory_url=url) as second:
            done = second.approve("pg")
    assert done.status == "done"
    assert (work / "notes.txt").read_text() == "7 red widgets\n"


def test_two_parallel_writers_wait_and_are_approved_one_by_one(tmp_path):
    """Both of a phase's writers wait; approving one request id lets that one go on while
    the other still waits; then the last one is approved and both files are written."""
    from langchain_openai import ChatOpenAI

    from orchestrator.api import Orchestrator

    wf = tmp_path / "wf.yaml"
    wf.write_text(
        "phases: [implementation]\nagents:\n  writer:\n    prompt: AGENT=writer\n"
        "    tools: [write_file]\n    interrupt_on: [write_file]\n"
    )

    def plan(phase: str) -> dict:
        subtasks = [
            {"id": name, "title": f"Write {name}", "description": name, "agent": "writer"}
            for name in ("a", "b")
        ]
        return {"strategy": "Two files.", "subtasks": subtasks, "done": True}

    def write(body: dict) -> dict:
        name = "a" if "Title: Write a\n" in body["messages"][1]["content"] else "b"
        return {"tool": "write_file", "args": {"path": f"{name}.txt", "content": name}}

    steps = {"writer": [write, findings("Wrote it.")]}
    with ScriptedOpenAI(responder=agents(plan, steps)) as server:
        model = ChatOpenAI(
            model="gpt-4o-mini", base_url=server.base_url, api_key="k", max_retries=0
        )
        orch = Orchestrator(workdir=tmp_path, workflow=wf, model=model)
        first = orch.run("Write two files", task_id="two")
        assert first.status == "waiting" and len(first.pending_approvals) == 2
        waiting = {r["key"]: r["id"] for r in first.pending_approvals}
        assert set(waiting) == {"implementation/a", "implementation/b"}
        one = orch.approve("two", request_id=waiting["implementation/a"][:10])
        assert one.status == "waiting"
        assert [r["key"] for r in one.pending_approvals] == ["implementation/b"]
        assert (tmp_path / "a.txt").read_text() == "a" and not (tmp_path / "b.txt").exists()
        done = orch.approve("two")
    assert done.status == "done" and len(done.findings) == 2
    assert (tmp_path / "b.txt").read_text() == "b"
