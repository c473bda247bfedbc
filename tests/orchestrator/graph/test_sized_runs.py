"""Runs sized to the objective: a lead that declares the objective answered ends the task
`done` with the later phases skipped (and says why); a phase may plan no subtask; the lead's
`answered` ticks the plan's key questions; `approve_plan` puts each plan before a person.

Through the real `langchain-openai` client against the scripted server.
"""

from __future__ import annotations

import json
from pathlib import Path

from langchain_openai import ChatOpenAI

from orchestrator.api import Orchestrator
from tests.orchestrator.openai_server import ScriptedOpenAI
from tests.orchestrator.scripted_agents import agents, findings, text_of

SCOUT = """
agents:
  scout:
    description: Looks around.
    prompt: AGENT=scout
    tools: [list_files]
"""
STEPS = {"scout": [findings("The answer is 42.", key_discoveries=["answer: 42 (docs/a.md:1)"])]}


def client(server: ScriptedOpenAI) -> ChatOpenAI:
    return ChatOpenAI(
        model="gpt-4o-mini", base_url=server.base_url, api_key="sk-test", max_retries=0
    )


def lead(done_in: str | None, *, subtasks_in: tuple[str, ...] = ("exploration",)):
    """A lead planning one scout subtask in the phases `subtasks_in` (none elsewhere), that
    declares the objective answered when planning `done_in`."""

    def plan(phase: str) -> dict:
        subtasks = [
            {"id": f"look-{phase}", "title": f"Look ({phase})", "description": "Look.",
             "agent": "scout"}
        ] if phase in subtasks_in else []  # fmt: skip
        return {
            "strategy": f"Plan of {phase}.",
            "key_questions": ["What is the answer?"],
            "subtasks": subtasks,
            "done": phase == done_in,
            "reason": "the scout found the answer" if phase == done_in else "",
            "answered": [1] if phase != "exploration" else [],
        }

    return plan


def run(tmp_path: Path, text: str, plan, task: str):
    wf = tmp_path / f"{task}.yaml"
    wf.write_text(text)
    with ScriptedOpenAI(responder=agents(plan, STEPS)) as server:
        result = Orchestrator(workdir=tmp_path, workflow=wf, model=client(server)).run(
            "What is the answer?", task_id=task
        )
    return result, server


def test_a_lead_that_declares_the_objective_answered_ends_the_task_early(tmp_path, memory_dir):
    early, early_server = run(tmp_path, SCOUT, lead("planning"), "early")
    full, full_server = run(
        tmp_path, SCOUT + "run_all_phases: true\n", lead("planning", subtasks_in=tuple(
            ["exploration", "planning", "implementation", "review"])), "full"
    )  # fmt: skip
    assert early.status == "done" and full.status == "done"
    assert early.skipped_phases == ["implementation", "review"]
    assert early.done_reason == "the scout found the answer"
    assert full.skipped_phases == [] and len(full.findings) == 4  # run_all_phases ignores done
    assert len(early_server.requests) * 2 < len(full_server.requests)
    assert early.usage["calls"] == len(early_server.requests)  # what the run reports
    plan = (memory_dir / "research_plans" / "early.md").read_text()
    assert "- Skipped: phase implementation (the scout found the answer), phase review" in plan
    assert "- [x] What is the answer? (answered)" in plan  # the lead's `answered`
    summary = (memory_dir / early.merged["final"]).read_text()
    assert "The answer is 42." in summary  # the final synthesis is written as always
    cp = json.loads((memory_dir / early.checkpoints[0]).read_text())
    assert cp["extra"]["trigger"] == "task_complete"
    assert cp["skipped_phases"] == ["implementation", "review"]


def test_a_phase_may_plan_no_subtask(tmp_path, memory_dir):
    result, server = run(tmp_path, SCOUT + "phases: [exploration, planning, review]\n",
                         lead(None, subtasks_in=("exploration", "review")), "gap")  # fmt: skip
    assert result.status == "done", result.failed
    assert sorted(result.merged) == ["exploration", "final", "planning", "review"]
    assert len(result.findings) == 2  # exploration's and review's; planning had none
    scout_calls = [b for b in server.requests if "AGENT=scout" in text_of(b["messages"][0])]
    assert len(scout_calls) == 2


def test_approve_plan_puts_each_phase_plan_before_a_person(tmp_path, memory_dir):
    wf = tmp_path / "wf.yaml"
    wf.write_text(SCOUT + "phases: [exploration]\napprove_plan: true\n")
    with ScriptedOpenAI(responder=agents(lead(None), STEPS)) as server:
        orch = Orchestrator(workdir=tmp_path, workflow=wf, model=client(server))
        first = orch.run("What is the answer?", task_id="p1")
        assert first.status == "waiting"
        [request] = first.pending_approvals
        assert (request["agent"], request["tool"]) == ("lead", "PhasePlan")
        assert request["args"]["subtasks"][0]["agent"] == "scout"
        assert orch.status("p1")["status"] == "waiting"
        assert not list(memory_dir.glob("findings/*.md"))  # nothing ran before approval

        second = orch.approve("p1", approve=False, message="Ask two scouts instead")
        assert second.status == "waiting"  # the lead planned again, and that plan waits
        replanned = server.requests[-1]["messages"]
        assert any("Ask two scouts instead" in text_of(m) for m in replanned)

        done = orch.approve("p1", request_id=second.pending_approvals[0]["id"][:8])
    assert done.status == "done" and len(done.findings) == 1
