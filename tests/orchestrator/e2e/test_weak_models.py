"""A weak real model (issue 51: Qwen2.5-Coder-1.5B on llama.cpp's server) through the real
`langchain-openai` client and tether's scripted OpenAI-compatible server.

A reply without a tool call while steps remain is nudged ("use a tool, or finish"), not
answered by forcing the final tool; and a server that reads a named `tool_choice` as
"auto" (llama.cpp's does) still ends every agent with a valid final call: tether asks once
more in words and accepts the JSON the model gives as text.
"""

from __future__ import annotations

import json
import re

import pytest
from langchain_core.messages import HumanMessage, SystemMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI

from orchestrator.agents.loop import run_agent
from orchestrator.api import Orchestrator
from orchestrator.errors import AgentLoopError
from orchestrator.types import SubmitFindings
from tests.orchestrator.openai_server import ScriptedOpenAI
from tests.orchestrator.scripted_agents import (
    ANSWER_PREFIX,
    ASK_TEXT,
    NUDGE_TEXT,
    WEAK_DONE,
    WEAK_START,
    offered,
    project,
    responder,
    text_of,
    weak,
)

FINDINGS = {"summary": "The shop has three handlers.", "key_discoveries": ["handle_0"]}


def _client(server: ScriptedOpenAI) -> ChatOpenAI:
    return ChatOpenAI(
        model="gpt-4o-mini", base_url=server.base_url, api_key="sk-test", timeout=10,
        max_retries=0,
    )  # fmt: skip


def _brief() -> list:
    return [SystemMessage("You are a subagent."), HumanMessage("Subtask: x\nInvestigate.")]


@tool
def look(path: str) -> str:
    """Look at a path."""
    return f"contents of {path}"


def _forced(body: dict) -> str | None:
    """The tool a request names in `tool_choice`, if any."""
    choice = body.get("tool_choice")
    return choice.get("function", {}).get("name") if isinstance(choice, dict) else None


def _last_user(body: dict) -> str:
    return next(text_of(m) for m in reversed(body["messages"]) if m["role"] == "user")


# -- a subagent gets its steps --------------------------------------------------------------


def test_a_subagent_that_answers_prose_first_gets_its_steps_and_uses_them():
    steps = [
        {"text": "I will look at the handlers first."},
        {"tool": "look", "args": {"path": "a.py"}},
        {"tool": "look", "args": {"path": "b.py"}},
        {"tool": "SubmitFindings", "args": FINDINGS},
    ]
    with ScriptedOpenAI(steps, responder=None) as server:
        result = run_agent(
            _client(server), tools=[look], final_tool=SubmitFindings, messages=_brief(),
            max_steps=4,
        )  # fmt: skip
    assert result.final.summary == FINDINGS["summary"]
    assert [c["args"]["path"] for c in result.tool_calls] == ["a.py", "b.py"]
    assert [_forced(b) for b in server.requests] == [None, None, None, None]
    assert _last_user(server.requests[1]).startswith(NUDGE_TEXT)
    # the prose and the nudge stay in the conversation the model goes on from
    sent = [(m["role"], text_of(m)) for m in server.requests[2]["messages"]]
    assert ("assistant", steps[0]["text"]) in sent
    assert server.statuses == [200] * 4


def test_nudges_zero_forces_the_final_tool_at_the_first_reply_without_a_call():
    steps = [{"text": "Thinking."}, {"tool": "SubmitFindings", "args": FINDINGS}]
    with ScriptedOpenAI(steps, responder=None) as server:
        result = run_agent(
            _client(server), tools=[look], final_tool=SubmitFindings, messages=_brief(),
            nudges=0,
        )  # fmt: skip
    assert result.final.summary == FINDINGS["summary"]
    assert [_forced(b) for b in server.requests] == [None, "SubmitFindings"]


def test_a_model_that_never_calls_a_tool_is_nudged_then_forced_then_fails_named():
    with ScriptedOpenAI([{"text": "I think so."}] * 10, responder=None) as server:
        with pytest.raises(AgentLoopError, match="SubmitFindings"):
            run_agent(
                _client(server), tools=[look], final_tool=SubmitFindings, messages=_brief(),
                max_steps=6,
            )  # fmt: skip
    # prose, nudge, forced ask, one more ask in words: the model's steps are not spent on it
    assert [_forced(b) for b in server.requests] == [None, None, *["SubmitFindings"] * 2]
    assert server.statuses == [200] * 4


# -- a provider that ignores a named tool_choice --------------------------------------------


def _weak_subagent(body: dict) -> dict:
    """Calls `look` twice, then answers in prose unless forced (and the server honours it)
    or asked in words, when it gives the findings as JSON text."""
    if _forced(body) == "SubmitFindings":
        return {"tool": "SubmitFindings", "args": FINDINGS}
    if _last_user(body).startswith(ASK_TEXT) and body["messages"][-1]["role"] == "user":
        return {"text": json.dumps(FINDINGS)}
    looked = sum(len(m.get("tool_calls") or []) for m in body["messages"])
    if looked < 2:
        return {"tool": "look", "args": {"path": f"f{looked}"}}
    return {"text": "The shop has three handlers, I am done."}


@pytest.mark.parametrize("choice", ["honour", "ignore"])
def test_a_server_that_ignores_tool_choice_still_gets_a_valid_final_call(choice):
    with ScriptedOpenAI(responder=_weak_subagent, tool_choice=choice) as server:
        result = run_agent(
            _client(server), tools=[look], final_tool=SubmitFindings, messages=_brief(),
            max_steps=6,
        )  # fmt: skip
    assert result.final.summary == FINDINGS["summary"]
    assert [c["name"] for c in result.tool_calls] == ["look", "look"]
    forced = [i for i, b in enumerate(server.requests) if _forced(b)]
    assert forced, "tether never forced the final tool"
    # its prose after the work was nudged first; then forced, with words that a model
    # without working tool calls answers as JSON text
    nudged = [i for i, b in enumerate(server.requests) if _last_user(b).startswith(NUDGE_TEXT)]
    assert nudged and nudged[0] < forced[0]
    assert len(server.requests) == forced[0] + 1
    assert _last_user(server.requests[-1]).startswith(ASK_TEXT)
    assert set(server.statuses) == {200}


def test_a_forced_call_answered_by_another_call_is_answered_and_asked_again_in_words():
    def keeps_looking(body: dict) -> dict:
        if body["messages"][-1]["role"] == "user" and _last_user(body).startswith(ASK_TEXT):
            return {"text": "```json\n" + json.dumps(FINDINGS) + "\n```"}
        return {"tool": "look", "args": {"path": "again"}}

    with ScriptedOpenAI(responder=keeps_looking, tool_choice="ignore") as server:
        result = run_agent(
            _client(server), tools=[look], final_tool=SubmitFindings, messages=_brief(),
            max_steps=2,
        )  # fmt: skip
    assert result.final.summary == FINDINGS["summary"]
    assert len(result.tool_calls) == 2  # the call made instead of the forced one did not run
    assert [_forced(b) for b in server.requests] == [None, None, *["SubmitFindings"] * 2]
    last = server.requests[-1]["messages"]
    assert last[-2]["role"] == "tool" and "not run" in last[-2]["content"]
    assert set(server.statuses) == {200}  # the strict server never saw an unanswered call


# -- whole runs: the lead's plan and answer, the subagents' findings -------------------------


@pytest.mark.parametrize("choice", ["honour", "ignore"])
def test_a_weak_model_on_a_server_that_ignores_tool_choice_completes_a_task(
    tmp_path, monkeypatch, choice
):
    root = project(tmp_path, 2)
    monkeypatch.setenv("TETHER_ALLOW_MODEL_REQUESTS", "1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with ScriptedOpenAI(responder=weak(responder(2)), tool_choice=choice) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        orch = Orchestrator(
            workdir=root, workflow=root / "wf.yaml", model="openai:gpt-4o-mini",
            memory_dir=root / "memory",
        )  # fmt: skip
        result = orch.run("Document every module", task_id=f"weak-{choice}")
    assert result.status == "done", result.failed
    assert result.answer and result.answer.startswith(ANSWER_PREFIX + "findings/")
    texts = "\n".join((root / "memory" / f).read_text() for f in result.findings)
    assert re.search(r"Module \S*m00 documented", texts) and re.search(r"m01 documented", texts)
    prose = [
        b for b in server.requests
        if any(m["role"] == "assistant" and text_of(m) == WEAK_START for m in b["messages"])
    ]  # fmt: skip
    assert prose, "the weak model never answered in prose"
    # each writer read its module after its first, prose, reply
    reads = [
        c["function"]["arguments"]
        for b in server.requests
        if "SubmitFindings" in offered(b)
        for m in b["messages"]
        for c in m.get("tool_calls") or []
        if c["function"]["name"] == "read_file"
    ]
    assert {json.loads(r)["path"] for r in reads} == {"mods/m00.py", "mods/m01.py"}
    finals = {"PhasePlan", "SubmitFindings", "SubmitAnswer"}
    done_in_prose = [b for b in server.requests if WEAK_DONE in json.dumps(b["messages"])]
    asked = {
        _forced(b) for b in server.requests if _forced(b) and _last_user(b).startswith(ASK_TEXT)
    }
    assert done_in_prose and asked == finals  # each kind of agent was asked and answered
    assert set(server.statuses) == {200}


def test_a_workflow_agents_nudges_zero_forces_its_final_tool_at_its_first_prose(
    tmp_path, monkeypatch
):
    root = project(tmp_path, 1)
    workflow = (
        (root / "wf.yaml")
        .read_text()
        .replace("    tools: [read_file]", "    tools: [read_file]\n    nudges: 0")
    )
    (root / "wf.yaml").write_text(workflow)
    monkeypatch.setenv("TETHER_ALLOW_MODEL_REQUESTS", "1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with ScriptedOpenAI(responder=weak(responder(1))) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        orch = Orchestrator(
            workdir=root, workflow=root / "wf.yaml", model="openai:gpt-4o-mini",
            memory_dir=root / "memory",
        )  # fmt: skip
        result = orch.run("Document every module", task_id="no-nudges")
    assert result.status == "done", result.failed
    writer = [b for b in server.requests if "SubmitFindings" in offered(b)]
    lead = [b for b in server.requests if "PhasePlan" in offered(b)]
    assert [_forced(b) for b in writer] == [None, "SubmitFindings"]  # forced at once
    assert _last_user(lead[1]).startswith(NUDGE_TEXT)  # the lead keeps its nudge
