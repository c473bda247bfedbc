"""Approvals under attack (issue 42): a decision recorded by an `approve` that died before
LangGraph saved it, a request line that hides its target, requests newer than the last
listing, an empty `--id`, a done task without a provider key, SIGTERM while MCP servers
start, and a task id that walks out of the task records.

Each `orchestrator` command runs in its own process with the real `langchain-openai`
client against the scripted server of this process (`openai_server.py`).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from orchestrator.api import Orchestrator
from orchestrator.approvals import answer, pending
from orchestrator.errors import UnknownTaskError
from orchestrator.graph.build import thread_state
from orchestrator.mcp_tools import register
from tests.orchestrator.fixtures.processes import processes_running
from tests.orchestrator.openai_server import ScriptedOpenAI
from tests.orchestrator.scripted_agents import agents, findings, one_subtask

REPO = Path(__file__).parents[3]
CMD = [sys.executable, "-m", "orchestrator.cli"]
MISBEHAVING = str(Path(__file__).parents[1] / "fixtures" / "mcp_misbehaving.py")
WORKFLOW = """
phases: [implementation]
agents:
  writer:
    description: Updates the notes of the project.
    prompt: AGENT=writer
    tools: [read_file, write_file]
    interrupt_on: [write_file]
"""
WRITE = {"tool": "write_file", "args": {"path": "notes.txt", "content": "new notes\n"}}


@pytest.fixture
def project(tmp_path, cli_env):
    work = tmp_path / "work"
    work.mkdir()
    (work / "notes.txt").write_text("old notes\n")
    (tmp_path / "wf.yaml").write_text(WORKFLOW)
    env = {**cli_env, "TETHER_ALLOW_MODEL_REQUESTS": "1", "OPENAI_API_KEY": "sk-test"}
    return work, tmp_path / "wf.yaml", env


def command(*args: str, env: dict, server: ScriptedOpenAI | None = None, **kw):
    if server is not None:
        env = {**env, "OPENAI_BASE_URL": server.base_url}
    return subprocess.run(
        [*CMD, *args], env=env, capture_output=True, text=True, timeout=120, cwd=REPO, **kw
    )


def start(project, server, *, env_extra: dict | None = None) -> subprocess.CompletedProcess:
    work, wf, env = project
    return command(
        "run", "Update the notes", "--task", "notes", "--workdir", str(work), "--workflow",
        str(wf), "--model", "openai:gpt-4o-mini", env={**env, **(env_extra or {})},
        server=server,
    )  # fmt: skip


def steps(*before: dict) -> dict:
    return {"writer": [*before, findings("Wrote the notes.")]}


@pytest.mark.parametrize("verb", ["resume", "approve"])
def test_a_decision_that_never_reached_langgraph_is_applied_next_time(project, memory_dir, verb):
    """Item 1: an `approve` killed right after it recorded its decision left the task
    stuck: `approve` said nothing waits, `resume` exited 0 printing "running" with
    nothing done, and the write never happened."""
    work, wf, _env = project
    with ScriptedOpenAI(responder=agents(one_subtask("writer"), steps(WRITE))) as server:
        assert start(project, server).returncode == 4
        # `approve` killed (-9) the moment its decision is recorded, before LangGraph has it
        killed = command("approve", "--task", "notes", server=server,
                         env={**project[2], "TETHER_FAULT": "approve_after_decision"})  # fmt: skip
        assert killed.returncode == -9, killed.stderr
        assert (work / "notes.txt").read_text() == "old notes\n"
        done = command(verb, "--task", "notes", env=project[2], server=server)
    assert done.returncode == 0, done.stderr + done.stdout
    assert "Task notes: done" in done.stdout
    assert (work / "notes.txt").read_text() == "new notes\n"


def test_a_resume_of_a_task_that_is_not_done_never_exits_0(project, memory_dir):
    """Item 1: whatever leaves a task unfinished, `resume` does not report success."""
    work, wf, env = project
    with ScriptedOpenAI(responder=agents(one_subtask("writer"), steps(WRITE))) as server:
        assert start(project, server).returncode == 4
        with Orchestrator(workdir=work, workflow=wf, model="offline") as orch:
            saved = thread_state(orch.docs, "notes")
            answer(orch.docs, "notes", pending(orch.docs, "notes", saved.interrupts), None,
                   approve=False, message="No.")  # fmt: skip
        resumed = command("resume", "--task", "notes", env=env, server=server)
        status = json.loads(command("status", "--json", env=env).stdout)
    assert resumed.returncode in (0, 3, 4), resumed.stderr
    assert (resumed.returncode == 0) == (status["status"] == "done"), (resumed, status)
    assert (work / "notes.txt").read_text() == "old notes\n"  # the rejection was applied


def test_the_request_line_shows_the_target_path_first_and_whole(project, memory_dir):
    """Item 5: arguments in the model's order, cut at 200 characters, hid the path."""
    work, _wf, env = project
    target = ".github/workflows/release.yml"
    sneaky = {"tool": "write_file", "args": {"content": "x" * 200 + "\n", "path": target}}
    with ScriptedOpenAI(responder=agents(one_subtask("writer"), steps(sneaky))) as server:
        paused = start(project, server)
        shown = command("status", "--task", "notes", env=env).stdout
    assert paused.returncode == 4
    for out in (paused.stdout, shown):
        [line] = [ln for ln in out.splitlines() if "waits for approval:" in ln]
        args = json.loads(line.split("write_file(", 1)[1].removesuffix(")"))
        assert list(args) == ["path", "content"] and args["path"] == target
        assert args["content"].endswith("...") and len(args["content"]) <= 80


def test_approve_answers_only_what_the_last_listing_showed(project, memory_dir):
    """Item 21: a request no listing has shown yet (its run died before recording that it
    waits) is not approved by an `approve` without `--id`; it is listed from then on."""
    work, _wf, env = project
    with ScriptedOpenAI(responder=agents(one_subtask("writer"), steps(WRITE))) as server:
        killed = start(project, server, env_extra={"TETHER_FAULT": "waiting_before_record"})
        assert killed.returncode == -signal.SIGKILL
        refused = command("approve", "--task", "notes", env=env, server=server)
        assert refused.returncode == 1
        assert refused.stderr.startswith(
            "Error: 1 request(s) appeared after the last listing and are not answered: "
        )
        assert (work / "notes.txt").read_text() == "old notes\n"
        listed = command("status", "--task", "notes", env=env)
        assert "waits for approval: " in listed.stdout
        approved = command("approve", "--task", "notes", env=env, server=server)
    assert approved.returncode == 0, approved.stderr
    assert (work / "notes.txt").read_text() == "new notes\n"


def test_an_empty_request_id_matches_nothing(project, memory_dir):
    """Item 21: `approve --id ""` was a prefix of every id, so it approved them all."""
    work, _wf, env = project
    with ScriptedOpenAI(responder=agents(one_subtask("writer"), steps(WRITE))) as server:
        assert start(project, server).returncode == 4
        done = command("approve", "--task", "notes", "--id", "", env=env, server=server)
    assert done.returncode == 1
    assert done.stderr == "Error: empty request id; give one from `orchestrator status` (--id)\n"
    assert (work / "notes.txt").read_text() == "old notes\n"


def test_approve_on_a_done_task_says_nothing_waits_without_a_provider_key(
    project, memory_dir, cli_env
):
    """Item 21: it complained about the missing key instead."""
    work, _wf, env = project
    with ScriptedOpenAI(responder=agents(one_subtask("writer"), steps(WRITE))) as server:
        assert start(project, server).returncode == 4
        assert command("approve", "--task", "notes", env=env, server=server).returncode == 0
    no_key = {k: v for k, v in cli_env.items() if k != "OPENAI_API_KEY"}
    done = command("approve", "--task", "notes", env={**no_key, "TETHER_ALLOW_MODEL_REQUESTS": "1"})
    assert done.returncode == 1
    assert done.stderr == (
        "Error: task 'notes' waits for no approval (status done); see `orchestrator status`\n"
    )


def test_sigterm_while_mcp_servers_start_advises_no_resume(tmp_path, cli_env):
    """Item 21: SIGTERM during a hung start-up advised resuming a task that does not
    exist; now it says nothing was recorded, and the server is gone too (item 17)."""
    marker = f"silent-sigterm-{tmp_path.name}"
    wf = tmp_path / "wf.yaml"
    wf.write_text(
        f"phases: [exploration]\nmcp_servers:\n  slow: {{command: {sys.executable!r}, "
        f"args: [{MISBEHAVING!r}, {marker!r}]}}\nagents:\n  probe:\n    tools: ['mcp:slow']\n"
    )
    err = tmp_path / "err.txt"
    with open(err, "w") as fh:
        proc = subprocess.Popen(
            [*CMD, "run", "Probe", "--task", "never", "--workdir", str(tmp_path), "--workflow",
             str(wf)], env=cli_env, stdout=subprocess.DEVNULL, stderr=fh, cwd=REPO,
        )  # fmt: skip
        # the server is started (it never answers `initialize`): however long the CLI's
        # start-up takes on a loaded machine, the signal comes while it waits for the server
        deadline = time.monotonic() + 120
        while not processes_running(marker) and proc.poll() is None:
            assert time.monotonic() < deadline, "the MCP server never started"
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(30)
    left = processes_running(marker)
    for pid in left:
        subprocess.run(["kill", "-9", str(pid)], check=False)
    assert rc == 143
    assert err.read_text().strip() == (
        "Terminated (SIGTERM) before task 'never' started; nothing was recorded, so there "
        "is nothing to resume: run it again"
    )
    assert left == []
    status = command("status", "--task", "never", env=cli_env)
    assert status.returncode == 1 and "unknown task 'never'" in status.stderr


class _Tools:
    """Stands in for FastMCP: keeps the tools `orchestrator.mcp_tools.register` adds."""

    def __init__(self):
        self.tools = {}

    def add_tool(self, fn, name, **_kw):
        self.tools[name] = fn


def test_a_task_id_that_walks_out_of_the_records_is_an_unknown_task(tmp_path, memory_dir):
    """Item 21: MCP `task_status` with `../../etc` answered about tether's storage."""
    from mcp.server.fastmcp.exceptions import ToolError

    from memory import MemoryStore

    Orchestrator(workdir=tmp_path, model="offline").run("Survey", task_id="real")
    server = _Tools()
    with MemoryStore(memory_dir) as store:
        register(server, store)
        for bad in ("../../etc", "..", "real/../real"):
            with pytest.raises(ToolError, match=f"unknown task {bad!r}"):
                server.tools["task_status"](bad)
        assert json.loads(server.tools["task_status"]("real"))["task_id"] == "real"
    with pytest.raises(UnknownTaskError):
        Orchestrator(workdir=tmp_path).status("../../etc")
