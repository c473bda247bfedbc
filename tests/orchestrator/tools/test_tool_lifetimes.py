"""Tools that never let go (issue 42): a Python tool that hangs past `tool_timeout`, MCP
servers that fail to start or write garbage on stdout, timeouts no thread can wait for,
and a user's tool named like tether's protocol.

Runs go through the real `langchain-openai` client against the scripted server
(`openai_server.py`); processes are looked for in `/proc`.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from langchain_openai import ChatOpenAI

from tests.orchestrator.fixtures.processes import processes_running
from tests.orchestrator.openai_server import ScriptedOpenAI
from tests.orchestrator.scripted_agents import agents, findings, one_subtask, tool_answers

REPO = Path(__file__).parents[3]
CMD = [sys.executable, "-m", "orchestrator.cli"]
MISBEHAVING = str(Path(__file__).parents[1] / "fixtures" / "mcp_misbehaving.py")


def client(server: ScriptedOpenAI) -> ChatOpenAI:
    return ChatOpenAI(model="gpt-4o-mini", base_url=server.base_url, api_key="k", max_retries=0)


def test_a_python_tool_hanging_past_its_timeout_does_not_keep_the_process(tmp_path, cli_env):
    """Item 4: after "Task done" the interpreter used to join the tool's thread forever."""
    wf = tmp_path / "wf.yaml"
    wf.write_text(
        "phases: [exploration]\ntool_timeout: 1\n"
        "python_tools: ['tests.orchestrator.fixtures.widget_tools:hang_forever']\n"
        "agents:\n  probe:\n    prompt: AGENT=probe\n    tools: [hang_forever]\n"
    )
    steps = {"probe": [{"tool": "hang_forever", "args": {}}, findings("The warehouse hung.")]}
    env = {**cli_env, "TETHER_ALLOW_MODEL_REQUESTS": "1", "OPENAI_API_KEY": "k"}
    with ScriptedOpenAI(responder=agents(one_subtask("probe"), steps)) as server:
        started = time.monotonic()
        done = subprocess.run(
            [*CMD, "run", "Probe", "--task", "hang", "--workdir", str(tmp_path), "--workflow",
             str(wf), "--model", "openai:gpt-4o-mini"],
            env={**env, "OPENAI_BASE_URL": server.base_url}, capture_output=True, text=True,
            timeout=120, cwd=REPO,
        )  # fmt: skip
        answers = [a for body in server.requests for a in tool_answers(body)]
    assert done.returncode == 0, done.stderr
    assert "Task hang: done" in done.stdout
    assert time.monotonic() - started < 60
    assert any("did not finish within 1 s" in a for a in answers)


@pytest.mark.parametrize("how", ["silent", "garbage"])
def test_an_mcp_server_that_fails_to_start_is_killed(tmp_path, cli_env, how):
    """Item 17: a server that never answers `initialize`, or prints garbage and sleeps, was
    left running with PPID 1 once the process that failed to start it had exited."""
    marker = f"{how}-{os.getpid()}-{tmp_path.name}"
    wf = tmp_path / "wf.yaml"
    wf.write_text(
        f"phases: [exploration]\nmcp_servers:\n  bad: {{command: {sys.executable!r}, "
        f"args: [{MISBEHAVING!r}, {marker!r}]}}\n"
        "agents:\n  probe:\n    tools: ['mcp:bad']\n"
    )
    code = (
        "from orchestrator.tools import mcp_client\n"
        "mcp_client.START_TIMEOUT = 2.0\n"
        "from orchestrator.api import Orchestrator\n"
        "try:\n"
        f"    Orchestrator(workdir={str(tmp_path)!r}, workflow={str(wf)!r}, model='offline')"
        ".run('Probe', task_id='p')\n"
        "except Exception as exc:\n"
        "    print(exc)\n"
    )
    out = tmp_path / "out.txt"
    with open(out, "w") as fh:  # a file: a leftover server keeps a pipe open
        subprocess.run(
            [sys.executable, "-c", code], env=cli_env, stdout=fh, stderr=fh, timeout=60,
            cwd=REPO,
        )  # fmt: skip
    left = processes_running(marker)
    for pid in left:  # what the code before the fix left behind
        os.kill(pid, 9)
    assert "MCP server 'bad' did not start within 2 s" in out.read_text()
    assert left == []


def test_garbage_on_an_mcp_servers_stdout_is_one_warning_naming_it(tmp_path, cli_env):
    """Item 18: the SDK's tracebacks for a non-JSON line reached the run's output."""
    wf = tmp_path / "wf.yaml"
    wf.write_text(
        f"phases: [exploration]\nmcp_servers:\n  noisy: {{command: {sys.executable!r}, "
        f"args: [{MISBEHAVING!r}, noisy]}}\n"
        "agents:\n  triage:\n    prompt: AGENT=triage\n    tools: ['mcp:noisy']\n"
    )
    steps = {
        "triage": [
            {"tool": "lookup_ticket", "args": {"ticket": "T-1"}},
            lambda body: findings(tool_answers(body)[-1]),
        ]
    }
    env = {**cli_env, "TETHER_ALLOW_MODEL_REQUESTS": "1", "OPENAI_API_KEY": "k"}
    with ScriptedOpenAI(responder=agents(one_subtask("triage"), steps)) as server:
        done = subprocess.run(
            [*CMD, "run", "Triage", "--task", "noisy", "--workdir", str(tmp_path), "--workflow",
             str(wf), "--model", "openai:gpt-4o-mini"],
            env={**env, "OPENAI_BASE_URL": server.base_url}, capture_output=True, text=True,
            timeout=120, cwd=REPO,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "Failed to parse" not in done.stderr
    warned = [ln for ln in done.stderr.splitlines() if "not JSON-RPC" in ln]
    assert warned == [
        "Warning: MCP server 'noisy' wrote a line that is not JSON-RPC on its stdout; "
        "skipped (a server must log to stderr)"
    ]


@pytest.mark.parametrize("value", [".inf", "1e308"])
def test_a_tool_timeout_no_thread_can_wait_for_is_one_error_line(tmp_path, cli_env, value):
    """Item 19: it was accepted, then every slow tool failed with OverflowError."""
    wf = tmp_path / "wf.yaml"
    wf.write_text(f"phases: [exploration]\ntool_timeout: {value}\n")
    done = subprocess.run(
        [*CMD, "run", "Probe", "--workdir", str(tmp_path), "--workflow", str(wf)],
        env=cli_env, capture_output=True, text=True, timeout=60, cwd=REPO,
    )  # fmt: skip
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"Error: workflow file {str(wf)!r}: ")
    assert "'tool_timeout': Input should be less than or equal to" in lines[0]


def test_a_python_tool_named_like_the_protocols_is_one_error_line(tmp_path, cli_env):
    """Item 21: a Python tool named `SubmitFindings` was silently dropped."""
    wf = tmp_path / "wf.yaml"
    wf.write_text(
        "phases: [exploration]\n"
        "python_tools: ['tests.orchestrator.fixtures.widget_tools:SubmitFindings']\n"
    )
    done = subprocess.run(
        [*CMD, "run", "Probe", "--workdir", str(tmp_path), "--workflow", str(wf)],
        env=cli_env, capture_output=True, text=True, timeout=60, cwd=REPO,
    )  # fmt: skip
    assert done.returncode == 1
    assert done.stderr.strip() == (
        "Error: tool name 'SubmitFindings' is provided twice: by tether's protocol and by "
        "python_tools 'tests.orchestrator.fixtures.widget_tools:SubmitFindings'; rename yours"
    )
