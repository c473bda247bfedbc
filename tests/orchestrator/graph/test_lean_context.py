"""What each agent is sent, kept small: a later phase's lead gets the earlier phases as plans
and findings digests (never their raw tool output), a later phase's subagent the earlier
findings on its scope, a subagent tether's short protocol text and the skills its spec names
(with `read_skill`), none by default.

Through the real `langchain-openai` client against the scripted server.
"""

from __future__ import annotations

import pytest
from langchain_openai import ChatOpenAI

from orchestrator.api import Orchestrator
from orchestrator.errors import WorkflowError
from orchestrator.graph.subagent_prompt import SUBAGENT_SYSTEM
from tests.orchestrator.openai_server import ScriptedOpenAI
from tests.orchestrator.scripted_agents import agents, findings, offered, text_of, tool_answers

WORKFLOW = """
phases: [exploration, review]
agents:
  scout:
    description: Looks around.
    prompt: AGENT=scout
    tools: [list_files, read_file]
  reader:
    description: Reads the skills it is given.
    prompt: AGENT=reader
    tools: [read_file]
    skills: [external-memory]
"""
MARKER = "zebra_marker.py"


def client(server: ScriptedOpenAI) -> ChatOpenAI:
    return ChatOpenAI(
        model="gpt-4o-mini", base_url=server.base_url, api_key="sk-test", max_retries=0
    )


def plan(phase: str) -> dict:
    agent = "scout" if phase == "exploration" else "reader"
    sub = {"id": f"{agent}-{phase}", "title": f"{agent} work", "description": "Do it.",
           "agent": agent, "scope": ["src"]}  # fmt: skip
    return {"strategy": f"Plan of {phase}.", "subtasks": [sub]}


def lead_plan_with_a_listing(body: dict) -> dict:
    """The lead lists the workdir in its first turn before planning."""
    phase = next(ln[7:] for m in body["messages"] if m["role"] == "user"
                 for ln in text_of(m).splitlines() if ln.startswith("Phase: "))  # fmt: skip
    if phase == "exploration" and not any(m["role"] == "tool" for m in body["messages"]):
        return {"tool": "list_files", "args": {"path": "src", "recursive": True}}
    return {"tool": "PhasePlan", "args": plan(phase)}


STEPS = {
    "scout": [
        {"tool": "read_file", "args": {"path": "src/a.py"}},  # what its finding rests on
        findings(
            "The scout found the handlers.", files=[{"path": "src/a.py", "description": "handlers"}]
        ),
    ],
    "reader": [
        {"tool": "read_skill", "args": {"name": "external-memory"}},
        lambda body: findings("Skill read: " + tool_answers(body)[-1][:40]),
    ],
}


@pytest.fixture
def run(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.py").write_text("def handle(x):\n    return x\n")
    (tmp_path / "src" / MARKER).write_text("x = 1\n")
    (tmp_path / "wf.yaml").write_text(WORKFLOW)
    responder = agents(lambda phase: plan(phase), STEPS)

    def respond(body: dict) -> dict:
        if "PhasePlan" in offered(body):
            return lead_plan_with_a_listing(body)
        return responder(body)

    with ScriptedOpenAI(responder=respond) as server:
        result = Orchestrator(
            workdir=tmp_path, workflow=tmp_path / "wf.yaml", model=client(server)
        ).run("How are handlers written?", task_id="lean")
    assert result.status == "done", result.failed
    return server, result


def _text(body: dict) -> str:
    return "\n".join(text_of(m) for m in body["messages"])


def test_a_later_lead_sees_plans_and_digests_not_earlier_tool_output(run):
    server, result = run
    leads = [b for b in server.requests if "PhasePlan" in offered(b)]
    assert MARKER in _text(leads[1])  # the listing, within the turn that made it
    later = _text(leads[-1])
    assert MARKER not in later  # the review phase's lead: no replay of that tool output
    assert "Plan for phase exploration: Plan of exploration." in later
    assert "- scout-exploration (scout): scout work" in later  # a line per subtask
    found = next(p for p in result.findings if "scout" in p)
    assert "The scout found the handlers." in later and found in later  # digest + reference


def test_a_later_subagent_is_told_the_earlier_findings_on_its_scope(run):
    server, result = run
    [first] = [b for b in server.requests if "AGENT=reader" in _text(b)][:1]
    task = text_of(first["messages"][1])
    assert "Earlier findings on this scope (build on them):" in task
    found = next(p for p in result.findings if "scout" in p)
    assert f"The scout found the handlers. ({found}; files: src/a.py)" in task


def test_subagents_get_a_short_protocol_text_and_only_the_skills_they_name(run):
    server, result = run
    assert len(SUBAGENT_SYSTEM) <= 400
    scout = next(b for b in server.requests if "AGENT=scout" in _text(b))
    reader = next(b for b in server.requests if "AGENT=reader" in _text(b))
    assert "Skills" not in text_of(scout["messages"][0]) and "read_skill" not in offered(scout)
    system = text_of(reader["messages"][0])
    assert "Skills (read one with read_skill):\n- external-memory: " in system
    assert "read_skill" in offered(reader)
    answered = [b for b in server.requests if "AGENT=reader" in _text(b)][-1]
    assert "# External Memory" in tool_answers(answered)[-1]  # the body, read on demand
    leads = [b for b in server.requests if "PhasePlan" in offered(b)]
    assert "- external-memory: " in text_of(leads[0]["messages"][0])  # the lead's index


def test_an_agent_naming_an_unknown_skill_is_one_error(tmp_path):
    (tmp_path / "wf.yaml").write_text(WORKFLOW.replace("[external-memory]", "[nope]"))
    with pytest.raises(WorkflowError, match="agent 'reader' names unknown skill 'nope'"):
        Orchestrator(workdir=tmp_path, workflow=tmp_path / "wf.yaml", model="offline").run(
            "x", task_id="bad"
        )
