"""The model answers the objective: a task that ends `done` ends with the lead's answer,
written first in the final synthesis, the research plan and the closing snapshot, printed by
`orchestrator run`, in `status --json` and `RunResult.answer`; a lead that answers alone
runs no subagent and makes no further call; a crash after the answer does not ask again.

Through the real `langchain-openai` client against the scripted server.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from langchain_openai import ChatOpenAI

from orchestrator.api import Orchestrator
from orchestrator.artifacts.snapshot import read_snapshot
from tests.orchestrator.openai_server import ScriptedOpenAI
from tests.orchestrator.scripted_agents import agents, findings, offered, text_of

REPO = Path(__file__).resolve().parents[3]
CMD = [sys.executable, "-m", "orchestrator.cli"]
WORKFLOW = """
phases: [exploration]
agents:
  scout:
    description: Looks around.
    prompt: AGENT=scout
    tools: [list_files, read_file]
"""
STEPS = {"scout": [findings("Retries live in adapters.py.", key_discoveries=["max_retries=3"])]}
ANSWER = "Requests retries a failed connection when `max_retries` allows it (adapters.py)."


def client(server: ScriptedOpenAI) -> ChatOpenAI:
    return ChatOpenAI(
        model="gpt-4o-mini", base_url=server.base_url, api_key="sk-test", max_retries=0
    )


def scout_plan(phase: str) -> dict:
    sub = {"id": "look", "title": "Look", "description": "Look.", "agent": "scout"}
    return {"strategy": "One scout.", "subtasks": [sub]}


def answering(body: dict) -> dict:
    """The lead's final call: an answer naming the findings file it was given."""
    given = text_of(body["messages"][-1])
    source = next(w for w in given.split() if w.startswith("findings/"))
    return {
        "tool": "SubmitAnswer",
        "args": {"answer": ANSWER, "findings": [source], "files": ["src/adapters.py"],
                 "open_questions": ["Is a read timeout retried?"]},
    }  # fmt: skip


def _calls_offering(server: ScriptedOpenAI, tool: str) -> list[dict]:
    return [b for b in server.requests if tool in offered(b)]


def test_the_lead_answers_the_objective_in_one_final_call(tmp_path, memory_dir):
    (tmp_path / "wf.yaml").write_text(WORKFLOW)
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "adapters.py").write_text("max_retries = 3\n")  # the file it cites
    with ScriptedOpenAI(responder=agents(scout_plan, STEPS, answer=answering)) as server:
        orch = Orchestrator(workdir=tmp_path, workflow=tmp_path / "wf.yaml", model=client(server))
        result = orch.run("How does requests retry a failed connection?", task_id="ans")
    assert result.status == "done", result.failed
    assert result.answer == ANSWER
    [asked] = _calls_offering(server, "SubmitAnswer")  # one call, after the subagent's work
    given = text_of(asked["messages"][-1])
    assert "Objective: How does requests retry a failed connection?" in given
    assert "Retries live in adapters.py." in given and "max_retries=3" in given  # the digest
    # the final synthesis opens with the model's answer, then the template's merge
    final = (memory_dir / result.merged["final"]).read_text()
    assert final.index(ANSWER.replace("`", "")[:20]) < final.index("## Summary")
    assert "**Workdir files**: `src/adapters.py`" in final
    assert "Is a read timeout retried?" in final
    assert result.answer_path == result.merged["final"]
    plan = (memory_dir / "research_plans" / "ans.md").read_text()
    assert plan.index("## Answer") < plan.index("## Strategy") and ANSWER in plan
    snap = read_snapshot(memory_dir / result.snapshots[-1])
    assert snap["sections"]["What Was Found"].startswith("**Answer**")
    assert ANSWER in snap["sections"]["What Was Found"]
    status = orch.status("ans")
    assert status["answer"] == {"path": str(memory_dir / result.merged["final"]), "text": ANSWER}


def test_a_lead_that_answers_alone_runs_no_subagent_and_no_more_calls(tmp_path, memory_dir):
    (tmp_path / "wf.yaml").write_text("phases: [exploration, review]\n")
    (tmp_path / "notes.md").write_text("The answer is 42.\n")

    def alone(body: dict) -> dict:
        if "PhasePlan" not in offered(body):
            raise AssertionError("no subagent and no answer call should run")
        if not any(m["role"] == "tool" for m in body["messages"]):
            return {"tool": "read_file", "args": {"path": "notes.md"}}
        return {
            "tool": "PhasePlan",
            "args": {"strategy": "Read it myself.", "subtasks": [], "done": True,
                     "reason": "notes.md says it", "answer": "42, says `notes.md`."},
        }  # fmt: skip

    with ScriptedOpenAI(responder=alone) as server:
        result = Orchestrator(
            workdir=tmp_path, workflow=tmp_path / "wf.yaml", model=client(server)
        ).run("What is the answer?", task_id="alone")
    assert result.status == "done", result.failed
    assert len(server.requests) == 2 and result.findings == []
    assert result.answer == "42, says `notes.md`."
    assert result.skipped_phases == ["review"]
    first = server.requests[0]["messages"][0]["content"]
    assert "answer it from your own reading" in first  # told so in its first planning turn
    final = (memory_dir / result.merged["final"]).read_text()
    assert "42, says `notes.md`." in final and "`notes.md`" in final  # the file it read


def test_a_crash_after_the_answer_does_not_ask_again(tmp_path, cli_env):
    (tmp_path / "wf.yaml").write_text(WORKFLOW)
    env = {**cli_env, "TETHER_ALLOW_MODEL_REQUESTS": "1", "OPENAI_API_KEY": "sk-test",
           "PYTHONPATH": str(REPO)}  # fmt: skip
    run = [*CMD, "run", "How does requests retry?", "--task", "crash", "--workdir",
           str(tmp_path), "--workflow", str(tmp_path / "wf.yaml"),
           "--model", "openai:gpt-4o-mini"]  # fmt: skip
    with ScriptedOpenAI(responder=agents(scout_plan, STEPS, answer=answering)) as server:
        env["OPENAI_BASE_URL"] = server.base_url
        killed = subprocess.run(
            run, env={**env, "TETHER_FAULT": "answer_after_call"}, capture_output=True,
            text=True, timeout=90,
        )  # fmt: skip
        assert killed.returncode == -9, killed.stderr
        assert len(_calls_offering(server, "SubmitAnswer")) == 1
        resumed = subprocess.run(
            [*CMD, "resume", "--task", "crash"], env=env, capture_output=True, text=True,
            timeout=90,
        )  # fmt: skip
        assert resumed.returncode == 0, resumed.stderr
        assert len(_calls_offering(server, "SubmitAnswer")) == 1  # the recorded one was used
        status = subprocess.run(
            [*CMD, "status", "--task", "crash", "--json"], env=env, capture_output=True,
            text=True, timeout=60,
        )  # fmt: skip
    # `run` and `resume` print the answer's first lines; `status --json` has it whole
    assert "Answer (whole: " in resumed.stdout and ANSWER in resumed.stdout
    answer = json.loads(status.stdout)["answer"]
    shown = Path(answer["path"]).read_text().split("<!-- tether:merged")[0]
    assert answer["text"] == ANSWER and shown.count(ANSWER) == 1  # written once


def test_an_empty_answer_is_refused_and_the_model_asked_again(tmp_path, memory_dir):
    """`SubmitAnswer(answer="")` (or blanks) is an invalid call: the model is told so and
    answers again; the answer kept is trimmed."""
    (tmp_path / "wf.yaml").write_text(WORKFLOW)
    given = iter(["", " \n\t ", "  Retries: adapters.py.  \n"])

    def empty_first(body: dict) -> dict:
        return {"tool": "SubmitAnswer", "args": {"answer": next(given)}}

    with ScriptedOpenAI(responder=agents(scout_plan, STEPS, answer=empty_first)) as server:
        orch = Orchestrator(workdir=tmp_path, workflow=tmp_path / "wf.yaml", model=client(server))
        result = orch.run("How does requests retry?", task_id="empty")
    assert result.status == "done", result.failed
    assert result.answer == "Retries: adapters.py."
    asked = _calls_offering(server, "SubmitAnswer")
    assert len(asked) == 3
    told = [text_of(m) for m in asked[1]["messages"] if m["role"] == "tool"]
    assert any("answer" in t and "empty" in t for t in told), told
    assert orch.status("empty")["answer"]["text"] == "Retries: adapters.py."


def test_an_answer_never_given_names_what_applies_not_the_agents_max_steps(tmp_path, memory_dir):
    """The answer's steps are its own: the error does not send the user to the agent's
    `max_steps`; it says `orchestrator resume` asks again, and a resume does."""
    (tmp_path / "wf.yaml").write_text(WORKFLOW)
    answers = ["   "]

    def blank(body: dict) -> dict:
        return {"tool": "SubmitAnswer", "args": {"answer": answers[-1]}}

    with ScriptedOpenAI(responder=agents(scout_plan, STEPS, answer=blank)) as server:
        orch = Orchestrator(workdir=tmp_path, workflow=tmp_path / "wf.yaml", model=client(server))
        result = orch.run("How does requests retry?", task_id="blank")
        assert result.status == "failed" and result.answer is None
        message = result.failed["lead"]["error"]
        assert "max_steps" not in message and "workflow file" not in message, message
        assert "the answer has 4 steps of its own" in message
        assert "`orchestrator resume` asks for the answer again" in message
        answers.append("Retries: adapters.py.")
        resumed = orch.resume("blank")
    assert resumed.status == "done" and resumed.answer == "Retries: adapters.py."
