"""Your agents and your tools: agent prompts and descriptions, Python tools, MCP tools,
tool failures and timeouts, and the one-line errors of a bad tool or agent setup.

The model is the real `langchain-openai` client against the scripted server
(`openai_server.py`), with the lead and the subagents played by `scripted_agents`.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from langchain_openai import ChatOpenAI

from orchestrator.api import Orchestrator
from orchestrator.cli.app import cli
from orchestrator.errors import ToolConfigError
from tests.orchestrator.fixtures.widget_tools import count_widgets
from tests.orchestrator.openai_server import ScriptedOpenAI
from tests.orchestrator.scripted_agents import agents, findings, one_subtask, tool_answers

FIXTURES = Path(__file__).parents[1] / "fixtures"
MCP_SERVER = [sys.executable, str(FIXTURES / "mcp_tickets.py")]


def client(server: ScriptedOpenAI) -> ChatOpenAI:
    return ChatOpenAI(
        model="gpt-4o-mini", base_url=server.base_url, api_key="sk-test", max_retries=0
    )


def workflow(tmp_path: Path, text: str, name: str = "wf") -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def systems(server: ScriptedOpenAI) -> list[str]:
    return [m["content"] for b in server.requests for m in b["messages"] if m["role"] == "system"]


def tool_messages(server: ScriptedOpenAI) -> list[str]:
    return [a for b in server.requests for a in tool_answers(b)]


def servers_running() -> list[int]:
    """Pids of this process's children that run the test MCP server."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes()
            ppid = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if b"mcp_tickets.py" in cmdline and ppid == os.getpid():
            found.append(int(proc.name))
    return found


def finding_text(memory_dir: Path, result) -> str:
    return "\n".join((memory_dir / p).read_text() for p in result.findings)


COUNTER = """
phases: [exploration]
agents:
  counter:
    description: Counts the widgets of the warehouse by color.
    prompt: "AGENT=counter You count widgets and report the exact numbers."
    tools: [count_widgets, recall_memory]
"""


def test_a_python_tool_and_the_agents_own_prompt_reach_the_model(tmp_path, memory_dir):
    steps = {
        "counter": [
            {"tool": "count_widgets", "args": {"color": "red"}},
            lambda body: findings(f"Counted: {tool_answers(body)[-1]}"),
        ]
    }
    with ScriptedOpenAI(responder=agents(one_subtask("counter"), steps)) as server:
        orch = Orchestrator(
            workdir=tmp_path, workflow=workflow(tmp_path, COUNTER), model=client(server),
            tools=[count_widgets],
        )  # fmt: skip
        result = orch.run("How many red widgets are there?", task_id="w1")
    assert result.status == "done", result.failed
    sub = [s for s in systems(server) if "AGENT=counter" in s]
    assert sub and "You are a subagent of a tether run" in sub[0]  # protocol text stays
    lead = [s for s in systems(server) if "lead agent" in s]
    assert "- counter: Counts the widgets of the warehouse by color." in lead[0]
    assert "7 red widgets in stock" in tool_messages(server)  # the tool ran, its answer sent
    assert "Counted: 7 red widgets in stock" in finding_text(memory_dir, result)
    counter = [r for r in server.requests if "AGENT=counter" in json.dumps(r["messages"][:1])]
    offered = {t["function"]["name"] for t in counter[-1]["tools"]}
    assert {"count_widgets", "recall_memory", "memory_fetch"} <= offered
    assert "read_file" not in offered  # only what the agent lists (and memory_fetch)


def test_an_mcp_servers_tools_by_server_name(tmp_path, memory_dir):
    wf = workflow(
        tmp_path,
        f"""
phases: [exploration]
mcp_servers:
  tickets: {{command: {sys.executable!r}, args: [{str(FIXTURES / "mcp_tickets.py")!r}]}}
agents:
  triage:
    description: Reads tickets.
    prompt: AGENT=triage
    tools: ["mcp:tickets"]
""",
    )
    steps = {
        "triage": [
            {"tool": "lookup_ticket", "args": {"ticket": "T-42"}},
            lambda body: findings(tool_answers(body)[-1]),
        ]
    }
    with ScriptedOpenAI(responder=agents(one_subtask("triage"), steps)) as server:
        result = Orchestrator(workdir=tmp_path, workflow=wf, model=client(server)).run(
            "What is ticket T-42 about?", task_id="m1"
        )
    assert result.status == "done", result.failed
    assert servers_running() == []  # the server was started for the run and closed after it
    answer = "Ticket T-42: login fails after a password reset (status: open, owner: dana)"
    assert answer in tool_messages(server)
    assert answer in finding_text(memory_dir, result)
    triage = [r for r in server.requests if "AGENT=triage" in json.dumps(r["messages"][:1])]
    offered = {t["function"]["name"] for t in triage[-1]["tools"]}
    assert {"lookup_ticket", "slow_lookup"} <= offered


def test_a_failing_and_a_hanging_tool_answer_the_model_with_errors(tmp_path, memory_dir):
    def explode(path: str) -> str:
        """Always fails."""
        raise ValueError(f"cannot open {path}")

    wf = workflow(
        tmp_path,
        f"""
phases: [exploration]
tool_timeout: 1
mcp_servers:
  tickets: {{command: {sys.executable!r}, args: [{str(FIXTURES / "mcp_tickets.py")!r}]}}
agents:
  probe:
    prompt: AGENT=probe
    tools: [explode, slow_lookup]
""",
    )
    steps = {
        "probe": [
            {"tool": "explode", "args": {"path": "a.txt"}},
            {"tool": "slow_lookup", "args": {"seconds": 5}},
            lambda body: findings(" | ".join(tool_answers(body))),
        ]
    }
    with ScriptedOpenAI(responder=agents(one_subtask("probe"), steps)) as server:
        result = Orchestrator(
            workdir=tmp_path, workflow=wf, model=client(server), tools=[explode]
        ).run("Probe the tools", task_id="e1")
    assert result.status == "done", result.failed  # tool failures never fail the agent
    answers = tool_messages(server)
    assert any("ValueError: cannot open a.txt" in a and a.startswith("Error") for a in answers)
    assert any("did not" in a and "1 s" in a and a.startswith("Error") for a in answers)
    assert server.statuses.count(400) == 0  # every call answered


BAD_SETUPS = [
    (
        "phases: [a]\nagents:\n  r:\n    tools: [read_file, rm_rf]\n",
        "Error: agent 'r' lists unknown tool 'rm_rf'; known tools: ",
    ),
    (
        "phases: [a]\npython_tools: ['tests.orchestrator.fixtures.widget_tools:nope']\n",
        "Error: python_tools 'tests.orchestrator.fixtures.widget_tools:nope': module "
        "'tests.orchestrator.fixtures.widget_tools' has no 'nope'",
    ),
    (
        "phases: [a]\npython_tools: ['no_such_module_x:tool']\n",
        "Error: python_tools 'no_such_module_x:tool': cannot import 'no_such_module_x'",
    ),
    (
        "phases: [a]\nmcp_servers:\n  gone: {command: /nonexistent/mcp-server}\n",
        "Error: MCP server 'gone' could not be started (",
    ),
    (
        "phases: [a]\nmcp_servers:\n  one: {command: PY, args: [SRV]}\n"
        "  two: {command: PY, args: [SRV]}\n",
        "Error: tool name 'lookup_ticket' is provided twice: by MCP server 'one' and by MCP "
        "server 'two'",
    ),
    (
        "phases: [a]\nagents:\n  r:\n    tools: ['mcp:nothere']\n",
        "Error: agent 'r' lists 'mcp:nothere', but no MCP server 'nothere' is declared",
    ),
    (
        "phases: [a]\nagents:\n  r:\n    prompt: hi\n    prompt_file: p.md\n",
        "Error: workflow file WF: 'agents.r': give 'prompt' or 'prompt_file', not both",
    ),
    (
        "phases: [a]\nagents:\n  r:\n    prompt_file: ../outside.md\n",
        "Error: workflow file WF: agent 'r': prompt_file '../outside.md' is outside the "
        "workflow file's folder",
    ),
    (
        "phases: [a]\nagents:\n  r:\n    model: nosuchprovider:model-1\n",
        "Error: unknown model provider 'nosuchprovider'",
    ),
    (
        "phases: [a]\nagents:\n  r:\n    tools: [read_file]\n    interrupt_on: [write_file]\n",
        "Error: agent 'r': interrupt_on names 'write_file', which is not among its tools",
    ),
]


@pytest.mark.parametrize(("text", "message"), BAD_SETUPS)
def test_a_bad_tool_or_agent_setup_is_one_error_line_before_anything_is_written(
    tmp_path, memory_dir, text, message
):
    folder = tmp_path / "flow"
    folder.mkdir()
    (tmp_path / "outside.md").write_text("secret prompt")
    wf = folder / "wf.yaml"
    wf.write_text(
        text.replace("PY", sys.executable).replace("SRV", str(FIXTURES / "mcp_tickets.py"))
    )
    os.chdir(Path(__file__).parents[3])  # the fixtures' package is importable from here
    result = CliRunner().invoke(
        cli, ["run", "Survey", "--workdir", str(tmp_path), "--workflow", str(wf)]
    )
    assert result.exit_code == 1, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output
    assert lines[0].startswith(message.replace("WF", repr(str(wf)))), lines[0]
    assert not memory_dir.exists()  # nothing written


def test_a_function_without_docstring_is_refused(tmp_path):
    def nameless(x: int) -> int:
        return x

    with pytest.raises(ToolConfigError, match="function 'nameless' has no docstring"):
        Orchestrator(workdir=tmp_path, tools=[nameless]).run("x")


def test_in_process_tools_must_be_given_again_to_continue_a_task(tmp_path, memory_dir):
    """A task whose tools were given in-process only cannot be continued by a process
    without them (one line naming them); named by import path, any process rebuilds them."""
    steps = {"counter": [findings("nothing counted")]}
    for task, tools, text in (
        ("c1", [count_widgets], COUNTER),
        (
            "c2",
            [],
            COUNTER + "python_tools: [tests.orchestrator.fixtures.widget_tools:count_widgets]\n",
        ),
    ):
        with ScriptedOpenAI(responder=agents(one_subtask("counter"), steps)) as server:
            wf = workflow(tmp_path, text, task)
            orch = Orchestrator(workdir=tmp_path, workflow=wf, model=client(server), tools=tools)
            assert orch.run("Count", task_id=task).status == "done"
    os.chdir(Path(__file__).parents[3])
    # continued from a checkpoint (a done task's plain `resume` has nothing to do)
    for task in ("c1", "c2"):
        listed = CliRunner().invoke(cli, ["checkpoint", "list", "--task", task, "--json"])
        newest = json.loads(listed.output.splitlines()[0])["path"]  # newest first
        (tmp_path / f"{task}.cp").write_text(newest)
    refused = CliRunner().invoke(
        cli, ["resume", "--task", "c1", "--model", "offline", "--from-checkpoint",
              (tmp_path / "c1.cp").read_text()],
    )  # fmt: skip
    assert refused.exit_code == 1
    assert refused.output.strip() == (
        "Error: task 'c1' uses tools given in-process (count_widgets), which this process "
        "cannot rebuild; continue it from Python with Orchestrator(tools=[...]), or name "
        "them in the workflow's python_tools"
    )
    rebuilt = CliRunner().invoke(
        cli, ["resume", "--task", "c2", "--model", "offline", "--from-checkpoint",
              (tmp_path / "c2.cp").read_text()],
    )  # fmt: skip
    assert rebuilt.exit_code == 0, rebuilt.output
    assert "Task c2: done" in rebuilt.output
