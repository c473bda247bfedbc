"""Plans are checked against the workdir and the findings (`orchestrator.graph.plan_check`):
a scope that does not exist is refused back to the lead, which plans again; a lead that
insists past the retries has the subtask dropped, with a note in the plan file; a plan
cannot mark key questions answered that no finding addresses (its own first plan's).

Through the real `langchain-openai` client against the scripted server.
"""

from __future__ import annotations

from pathlib import Path

from langchain_openai import ChatOpenAI

from orchestrator.api import Orchestrator
from orchestrator.graph.plan_check import PLAN_RETRIES
from tests.orchestrator.openai_server import ScriptedOpenAI
from tests.orchestrator.scripted_agents import agents, findings, offered, text_of

WORKFLOW = """
phases: [exploration]
agents:
  scout:
    description: Looks around.
    prompt: AGENT=scout
    tools: [list_files, read_file]
"""
STEPS = {"scout": [findings("Retries are set in src/adapters.py.", key_discoveries=["3"])]}


def client(server: ScriptedOpenAI) -> ChatOpenAI:
    return ChatOpenAI(
        model="gpt-4o-mini", base_url=server.base_url, api_key="sk-test", max_retries=0
    )


def _workdir(tmp_path: Path) -> Path:
    (tmp_path / "wf.yaml").write_text(WORKFLOW)
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "adapters.py").write_text("RETRIES = 3\n")
    return tmp_path


def _plan(scope: list[str], **extra) -> dict:
    sub = {"id": "look", "title": "Look", "description": "Look.", "agent": "scout",
           "scope": scope}  # fmt: skip
    return {"strategy": "One scout.", "subtasks": [sub], **extra}


def _tool_errors(body: dict) -> list[str]:
    return [text_of(m) for m in body["messages"] if m["role"] == "tool"]


def _planning(server: ScriptedOpenAI) -> list[dict]:
    return [b for b in server.requests if "PhasePlan" in offered(b)]


def _subagents(server: ScriptedOpenAI) -> list[dict]:
    return [b for b in server.requests if "SubmitFindings" in offered(b)]


def test_a_scope_that_does_not_exist_is_refused_and_the_lead_plans_again(tmp_path):
    work = _workdir(tmp_path)

    def lead(body: dict) -> dict:
        told = _tool_errors(body)
        return {"tool": "PhasePlan", "args": _plan(["src"] if told else ["logs"])}

    responder = agents(lambda phase: {}, STEPS)

    def respond(body: dict) -> dict:
        return lead(body) if "PhasePlan" in offered(body) else responder(body)

    with ScriptedOpenAI(responder=respond) as server:
        result = Orchestrator(workdir=work, workflow=work / "wf.yaml", model=client(server)).run(
            "How are retries set?", task_id="scope"
        )
    assert result.status == "done", result.failed
    planning = _planning(server)
    assert len(planning) == 2  # refused once, then accepted
    [told] = _tool_errors(planning[1])
    assert "plan refused: subtask 'look': scope 'logs' does not exist in the workdir" in told
    sent = [text_of(m) for b in _subagents(server) for m in b["messages"] if m["role"] == "user"]
    assert sent and all("Scope: src" in t and "logs" not in t for t in sent)
    plan = (Path(result.memory_dir) / result.plan).read_text()
    assert "Plan checked" not in plan  # nothing was changed behind the lead's back


def test_a_lead_that_insists_on_a_missing_scope_has_the_subtask_dropped_with_a_note(tmp_path):
    work = _workdir(tmp_path)
    responder = agents(lambda phase: _plan(["logs", "src/../../etc"]), STEPS)
    with ScriptedOpenAI(responder=responder) as server:
        result = Orchestrator(workdir=work, workflow=work / "wf.yaml", model=client(server)).run(
            "How are retries set?", task_id="insist"
        )
    assert result.status == "done", result.failed
    assert len(_planning(server)) == PLAN_RETRIES + 1
    assert _subagents(server) == [] and result.findings == []  # no subagent was sent there
    plan = (Path(result.memory_dir) / result.plan).read_text()
    assert (
        "- Plan checked: subtask look dropped: scope logs does not exist in the workdir, "
        "src/../../etc is outside the workdir" in plan
    ), plan


def test_a_first_plan_cannot_mark_its_own_key_questions_answered(tmp_path):
    work = _workdir(tmp_path)
    question = "Which cache backend does the billing module use?"
    responder = agents(lambda phase: _plan(["src"], key_questions=[question], answered=[1]), STEPS)
    with ScriptedOpenAI(responder=responder) as server:
        result = Orchestrator(workdir=work, workflow=work / "wf.yaml", model=client(server)).run(
            "How are retries set?", task_id="marks"
        )
    assert result.status == "done", result.failed
    planning = _planning(server)
    assert len(planning) == PLAN_RETRIES + 1
    assert "key question 1 ('Which cache backend" in _tool_errors(planning[1])[0]
    assert "no finding of this task addresses it yet" in _tool_errors(planning[1])[0]
    plan = (Path(result.memory_dir) / result.plan).read_text()
    line = next(ln for ln in plan.splitlines() if question in ln)
    assert line.startswith("- [ ]") and "(answered)" not in line, line
    assert "- Plan checked: key question(s) 1 not marked answered" in plan
    assert len(_subagents(server)) == 1  # the subtask itself was fine and ran


def test_a_remote_agent_s_scope_is_not_refused_but_flagged_in_the_plan_file(tmp_path):
    """A remote agent's scope is its server's to resolve: the plan is accepted as it is and
    the plan file says the scope was not checked (the run waits for the plan's approval
    here, so no server is needed)."""
    (tmp_path / "wf.yaml").write_text(
        "phases: [exploration]\napprove_plan: true\nagents:\n  coder:\n"
        "    description: Edits code remotely.\n"
        "    remote: {url: 'http://127.0.0.1:9', graph: coder}\n"
    )
    sub = {"id": "fix", "title": "Fix", "description": "Fix.", "agent": "coder",
           "scope": ["services/billing"]}  # fmt: skip
    responder = agents(lambda phase: {"strategy": "Remote.", "subtasks": [sub]}, {})
    with ScriptedOpenAI(responder=responder) as server:
        result = Orchestrator(
            workdir=tmp_path, workflow=tmp_path / "wf.yaml", model=client(server)
        ).run("Fix billing.", task_id="remote")
    assert result.status == "waiting", result.failed
    assert len(_planning(server)) == 1  # not refused
    plan = (Path(result.memory_dir) / result.plan).read_text()
    assert (
        "- Plan checked: subtask fix: scope services/billing not checked (remote agent "
        "coder: its server resolves it)" in plan
    ), plan
