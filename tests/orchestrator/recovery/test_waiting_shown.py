"""What a task that waits for approval shows: the plan's request as lines, its strategy and
a line per subtask (each long title cut on its own, none dropped), and `status` calls a
subagent that waits for approval of a tool call `waiting`, not `pending`.

The agents are played by the scripted OpenAI-compatible server through the real client,
in process; the CLI's `status` runs through click's runner.
"""

from __future__ import annotations

import json

from click.testing import CliRunner
from langchain_openai import ChatOpenAI

from orchestrator.api import Orchestrator
from orchestrator.cli import cli
from tests.orchestrator.openai_server import ScriptedOpenAI
from tests.orchestrator.scripted_agents import agents, findings, one_subtask

LONG_TITLE = "Trace how a refund flows " + "through every ledger and audit table " * 4


def _client(server: ScriptedOpenAI) -> ChatOpenAI:
    return ChatOpenAI(model="gpt-4o-mini", base_url=server.base_url, api_key="k", max_retries=0)


def _plan(phase: str) -> dict:
    titles = {"carts": "Map the carts", "orders": "Map the orders", "refunds": LONG_TITLE}
    return {
        "strategy": "Three readers, one area each. " + "Read every module of it closely. " * 5,
        "subtasks": [
            {"id": sid, "title": title, "description": "Read it.", "agent": "researcher"}
            for sid, title in titles.items()
        ],
    }


def _status(*args: str) -> str:
    result = CliRunner().invoke(cli, ["status", *args])
    assert result.exit_code == 0, result.output
    return result.output


def test_the_plans_waiting_line_lists_every_subtask(tmp_path):
    workflow = tmp_path / "gate.yaml"
    workflow.write_text("phases: [exploration]\napprove_plan: true\n")
    with ScriptedOpenAI(responder=agents(_plan, {})) as server:
        result = Orchestrator(workdir=tmp_path, workflow=workflow, model=_client(server)).run(
            "Survey the shop", task_id="gate"
        )
    assert result.status == "waiting"
    lines = _status("--task", "gate").splitlines()
    [at] = [i for i, ln in enumerate(lines) if "waits for approval: " in ln]
    assert lines[at].endswith("lead (exploration/plan)  plan of phase exploration: 3 subtask(s)")
    assert "{" not in lines[at]  # no raw JSON
    strategy, *subs = lines[at + 1 : at + 5]
    assert strategy.strip().startswith("strategy: Three readers, one area each.")
    assert strategy.endswith(" ...")  # a long strategy is cut, at a space
    assert subs[:2] == [
        "    - carts [researcher]: Map the carts",  # short: whole
        "    - orders [researcher]: Map the orders",
    ]
    assert subs[2].startswith("    - refunds [researcher]: Trace how a refund flows")
    shown = subs[2].split(": ", 1)[1]
    assert shown.endswith(" ...") and LONG_TITLE.startswith(shown[:-4])  # cut alone
    assert lines[at + 5].startswith("Approve:")


WRITER_FLOW = """
phases: [implementation]
agents:
  writer:
    description: Updates the notes.
    prompt: AGENT=writer Keep the notes short.
    tools: [read_file, write_file]
    interrupt_on: [write_file]
"""


def test_status_calls_a_writer_that_waits_for_approval_waiting(tmp_path):
    (tmp_path / "notes.txt").write_text("old notes\n")
    workflow = tmp_path / "wf.yaml"
    workflow.write_text(WRITER_FLOW)
    writer = [
        {"tool": "write_file", "args": {"path": "notes.txt", "content": "new notes\n"}},
        findings("Notes written."),
    ]
    responder = agents(one_subtask("writer"), {"writer": writer})
    with ScriptedOpenAI(responder=responder) as server:
        result = Orchestrator(workdir=tmp_path, workflow=workflow, model=_client(server)).run(
            "Update the notes", task_id="notes"
        )
    assert result.status == "waiting"
    info = json.loads(_status("--task", "notes", "--json"))
    assert info["subtasks"]["implementation/writer-1"]["state"] == "waiting"
    assert "  waiting implementation/writer-1 [writer]" in _status("--task", "notes").splitlines()
