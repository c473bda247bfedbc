"""Real chat models end to end: the real `langchain-openai` client against tether's own
scripted OpenAI-compatible server (`openai_server.py`), which is as strict as the real API.

Covers the seven defects of issue 7: malformed final answers are answered by error tool
messages (never an unanswered tool call), provider-reported usage drives the gauge and
the threshold follows the model's window, timeouts are retried, a JSON-text answer is
accepted and the final tool is forced with `tool_choice`, the model is recorded and
reused on resume, provider faults are retried (Retry-After honoured) and recorded, and a
task with a failed agent ends `failed` with its own exit code.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
from langchain_core.messages import HumanMessage, SystemMessage
from langchain_openai import ChatOpenAI

from orchestrator.agents.loop import run_agent
from orchestrator.api import Orchestrator
from orchestrator.errors import ModelCallError, ModelConfigError
from orchestrator.types import PhasePlan, SubmitFindings
from tests.orchestrator.openai_server import ScriptedOpenAI, policy_responder

GOOD_FINDINGS = {"summary": "The shop has three handlers.", "key_discoveries": ["handle_0"]}
GOOD_PLAN = {
    "strategy": "Split by area.",
    "subtasks": [{"id": "a", "title": "Look at a", "description": "Read a."}],
}


def _client(server: ScriptedOpenAI, timeout: float = 5.0) -> ChatOpenAI:
    return ChatOpenAI(
        model="gpt-4o-mini", base_url=server.base_url, api_key="sk-test", timeout=timeout,
        max_retries=0,
    )  # fmt: skip


def _brief(final: str = "SubmitFindings") -> list:
    return [
        SystemMessage("You are a subagent."),
        HumanMessage(f"Subtask: x\nInvestigate, then call {final}."),
    ]


def _tool_messages(body: dict) -> list[dict]:
    return [m for m in body["messages"] if m["role"] == "tool"]


@pytest.fixture
def real_env(monkeypatch):
    """Allow real model construction for this test (the server is local)."""
    monkeypatch.setenv("TETHER_ALLOW_MODEL_REQUESTS", "1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")


# -- 1: malformed final answers -----------------------------------------------------------


def test_truncated_and_incomplete_final_answers_are_answered_by_tool_messages():
    steps = [
        {"tool": "SubmitFindings", "raw": '{"summary": "The shop has thr'},  # truncated
        {"tool": "SubmitFindings", "args": {"status": "completed"}},  # no summary
        {"tool": "SubmitFindings", "args": GOOD_FINDINGS},
    ]
    with ScriptedOpenAI(steps, responder=None) as server:
        result = run_agent(_client(server), tools=[], final_tool=SubmitFindings, messages=_brief())
    assert result.final.summary == GOOD_FINDINGS["summary"]
    assert server.statuses == [200, 200, 200]  # the strict server never saw a dangling call
    first_error = _tool_messages(server.requests[1])[-1]["content"]
    assert "not valid JSON" in first_error and "SubmitFindings" in first_error
    second_error = _tool_messages(server.requests[2])[-1]["content"]
    assert "summary" in second_error and "Field required" in second_error


def test_a_valid_final_call_ends_the_agent_answered_and_without_another_request():
    steps = [{"tool": "SubmitFindings", "args": GOOD_FINDINGS}]
    with ScriptedOpenAI(steps, responder=None) as server:
        result = run_agent(_client(server), tools=[], final_tool=SubmitFindings, messages=_brief())
    assert result.final.summary == GOOD_FINDINGS["summary"] and len(server.requests) == 1
    *_, call, answer = result.transcript  # the final call is answered in the transcript too
    assert answer.tool_call_id == call.tool_calls[0]["id"] and answer.content == "accepted"


# -- 4: JSON text and forced final tool -----------------------------------------------------


def test_a_plan_given_as_json_text_is_accepted():
    steps = [{"text": "Here is the plan:\n```json\n" + json.dumps(GOOD_PLAN) + "\n```"}]
    with ScriptedOpenAI(steps, responder=None) as server:
        result = run_agent(
            _client(server), tools=[], final_tool=PhasePlan, messages=_brief("PhasePlan")
        )
    assert result.final.strategy == "Split by area." and len(server.requests) == 1


def test_prose_is_nudged_once_then_followed_by_a_call_with_the_final_tool_forced():
    steps = [
        {"text": "I would look at the code first."},
        {"text": "The code is in src/."},
        {"tool": "PhasePlan", "args": GOOD_PLAN},
    ]
    with ScriptedOpenAI(steps, responder=None) as server:
        result = run_agent(
            _client(server), tools=[], final_tool=PhasePlan, messages=_brief("PhasePlan")
        )
    assert result.final.subtasks[0].id == "a"
    nudged = server.requests[1]
    assert "tool_choice" not in nudged or nudged["tool_choice"] == "auto"
    assert "Use one of your tools" in nudged["messages"][-1]["content"]
    forced = server.requests[2]["tool_choice"]
    assert forced == {"type": "function", "function": {"name": "PhasePlan"}}


def test_the_step_budget_forces_the_final_tool_with_tool_choice():
    from langchain_core.tools import tool

    @tool
    def look(path: str) -> str:
        """Look at a path."""
        return f"contents of {path}"

    steps = [{"tool": "look", "args": {"path": f"f{i}"}} for i in range(2)]
    steps.append({"tool": "SubmitFindings", "args": GOOD_FINDINGS})
    with ScriptedOpenAI(steps, responder=None) as server:
        result = run_agent(
            _client(server), tools=[look], final_tool=SubmitFindings, messages=_brief(),
            max_steps=2,
        )  # fmt: skip
    assert [c["name"] for c in result.tool_calls] == ["look", "look"]
    assert "tool_choice" not in server.requests[0] or server.requests[0]["tool_choice"] != {
        "type": "function",
        "function": {"name": "SubmitFindings"},
    }
    assert server.requests[2]["tool_choice"] == {
        "type": "function",
        "function": {"name": "SubmitFindings"},
    }


# -- 6 and 3: provider faults and timeouts ---------------------------------------------------


def test_non_json_500_and_429_are_retried_and_retry_after_is_honoured():
    steps = [
        {"body": "<html>bad gateway</html>"},
        {"status": 500},
        {"status": 429, "retry_after": 1},
        {"tool": "SubmitFindings", "args": GOOD_FINDINGS},
    ]
    with ScriptedOpenAI(steps, responder=None) as server:
        start = time.monotonic()
        result = run_agent(_client(server), tools=[], final_tool=SubmitFindings, messages=_brief())
        elapsed = time.monotonic() - start
    assert result.final.summary == GOOD_FINDINGS["summary"]
    assert server.statuses == [200, 500, 429, 200]
    assert elapsed >= 1.0  # waited as long as Retry-After said, not the 10 ms backoff


def test_a_hung_request_times_out_and_is_retried():
    steps = [{"hang": 3}, {"tool": "SubmitFindings", "args": GOOD_FINDINGS}]
    with ScriptedOpenAI(steps, responder=None) as server:
        start = time.monotonic()
        result = run_agent(
            _client(server, timeout=0.5), tools=[], final_tool=SubmitFindings, messages=_brief()
        )
        elapsed = time.monotonic() - start
    assert result.final.summary == GOOD_FINDINGS["summary"]
    assert elapsed < 2.5 and len(server.requests) == 2


def test_a_provider_that_keeps_failing_fails_the_agent_with_a_named_error():
    with ScriptedOpenAI([{"status": 500}] * 10, responder=None) as server:
        with pytest.raises(ModelCallError, match=r"after 3 attempt\(s\).*HTTP 500"):
            run_agent(
                _client(server), tools=[], final_tool=SubmitFindings, messages=_brief(),
                retries=2,
            )  # fmt: skip
    assert len(server.requests) == 3


def test_context_length_exceeded_cuts_the_request_and_goes_on():
    from langchain_core.tools import tool

    @tool
    def dump(path: str) -> str:
        """Dump a file."""
        return "x " * 3000

    steps = [{"tool": "dump", "args": {"path": f"f{i}"}} for i in range(4)]
    steps.append({"tool": "SubmitFindings", "args": GOOD_FINDINGS})
    with ScriptedOpenAI(steps, responder=None, window=4000) as server:
        result = run_agent(
            _client(server), tools=[dump], final_tool=SubmitFindings, messages=_brief(),
            max_context_tokens=100_000,
        )  # fmt: skip
    assert result.final.summary == GOOD_FINDINGS["summary"]
    assert 400 in server.statuses and server.statuses[-1] == 200


# -- whole runs through the real client -----------------------------------------------------


def _run(server: ScriptedOpenAI, repo, workflow, memory_dir, monkeypatch, **kwargs):
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    monkeypatch.setenv("OPENAI_API_BASE", server.base_url)
    events: list[dict] = []
    orch = Orchestrator(
        workdir=repo, workflow=workflow, model="openai:gpt-4o-mini", on_event=events.append,
        **kwargs,
    )  # fmt: skip
    return orch, events


def test_a_run_counts_the_tokens_the_provider_reports(
    real_env, fixture_repo, tiny_workflow, memory_dir, monkeypatch
):
    with ScriptedOpenAI(usage=lambda n: 1000) as server:
        orch, _events = _run(server, fixture_repo, tiny_workflow, memory_dir, monkeypatch)
        result = orch.run("Survey the shop service", task_id="real")
        reported = 1000 * len(server.requests)
    assert result.status == "done"
    prompt_total = sum(v for v in result.tokens.values())
    # every call reported 1000 prompt tokens plus its completion tokens
    assert prompt_total >= reported and prompt_total < reported + 400 * len(server.requests)
    assert all(c["tokens"] == 1000 and c["reported"] for c in result.lead_calls)


def test_reported_usage_drives_the_gauge_and_the_window_caps_the_threshold(
    real_env, fixture_repo, tmp_path, memory_dir, monkeypatch
):
    workflow = tmp_path / "three.yaml"
    workflow.write_text("phases: [a, b, c]\n")
    # the provider reports 100K prompt tokens: under the 150K default, above 75% of
    # gpt-4o-mini's 128K window, so the threshold must have come from the model profile
    with ScriptedOpenAI(usage=lambda n: 100_000) as server:
        orch, events = _run(server, fixture_repo, workflow, memory_dir, monkeypatch)
        result = orch.run("Survey the shop service", task_id="gauge")
    assert result.status == "done"
    start = next(e for e in events if e["event"] == "start")
    assert start["token_threshold"] == 150_000
    zones = [e for e in events if e["event"] == "tokens" and "zone" in e]
    assert zones and zones[0]["threshold"] == 96_000 and zones[0]["context"] >= 100_000
    assert zones[0]["estimated"] is False  # the provider's number, shown without `~`
    saves = [e for e in events if e["event"] == "snapshot" and e["reason"] == "token_limit"]
    assert saves, "no snapshot although the provider reported a full context"


def test_a_failing_subagent_ends_the_task_failed_and_resume_reruns_it(
    real_env, fixture_repo, tiny_workflow, memory_dir, monkeypatch
):
    broken = {"on": True}

    def responder(body):
        text = json.dumps(body["messages"])
        if broken["on"] and "Subtask: exploration-docs" in text:
            return {"status": 500}
        return policy_responder(body)

    with ScriptedOpenAI(responder=responder) as server:
        orch, events = _run(server, fixture_repo, tiny_workflow, memory_dir, monkeypatch)
        result = orch.run("Survey the shop service", task_id="broken")
        assert result.status == "failed"
        assert list(result.failed) == ["exploration/exploration-docs"]
        assert "HTTP 500" in result.failed["exploration/exploration-docs"]["error"]
        assert result.tokens  # the failed turns' tokens are not lost
        status = orch.status("broken")
        assert status["status"] == "failed" and "HTTP 500" in str(status["errors"])
        assert not any(k.startswith("review/") for k in status["subtasks"])
        plan = (memory_dir / result.plan).read_text()
        assert "exploration-docs" in plan and "HTTP 500" in plan
        broken["on"] = False
        resumed = orch.resume("broken")
    assert resumed.status == "done" and resumed.failed == {}


def test_the_model_is_recorded_and_a_missing_key_on_resume_is_one_error(
    real_env, fixture_repo, tiny_workflow, memory_dir, monkeypatch
):
    with ScriptedOpenAI(responder=lambda body: {"status": 500}) as server:
        orch, _events = _run(server, fixture_repo, tiny_workflow, memory_dir, monkeypatch)
        orch.model_spec = None  # chosen from OPENAI_API_KEY, as a new user would
        result = orch.run("Survey the shop service", task_id="keyed")
    assert result.status == "failed" and result.model == "openai:gpt-4o-mini"
    record = json.loads((memory_dir / ".tether/records/tasks/keyed.json").read_text())
    assert record["data"]["model"] == "openai:gpt-4o-mini"
    monkeypatch.delenv("OPENAI_API_KEY")
    again = Orchestrator(workdir=None)
    with pytest.raises(ModelConfigError) as info:
        again.resume("keyed")
    assert "openai:gpt-4o-mini" in str(info.value) and "\n" not in str(info.value)


def test_cli_exit_code_and_status_after_a_failed_task(
    real_env, fixture_repo, tiny_workflow, memory_dir, cli_env
):
    with ScriptedOpenAI(responder=lambda body: {"status": 500}) as server:
        env = {
            **cli_env,
            "TETHER_ALLOW_MODEL_REQUESTS": "1",
            "OPENAI_API_KEY": "sk-test",
            "OPENAI_BASE_URL": server.base_url,
            "TETHER_RETRY_DELAY": "0.01",
        }
        cmd = [sys.executable, "-m", "orchestrator.cli"]
        proc = subprocess.run(
            [*cmd, "run", "Survey", "--task", "cli-failed", "--workdir", str(fixture_repo),
             "--workflow", str(tiny_workflow), "--model", "openai:gpt-4o-mini",
             "--model-timeout", "5"],
            env=env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    assert proc.returncode == 3, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "Failed:" in proc.stdout and "HTTP 500" in proc.stdout
    assert proc.stdout.rstrip().splitlines()[-1].startswith("Resume:")
    status = subprocess.run(
        [*cmd, "status", "--task", "cli-failed"], env=env, capture_output=True, text=True
    )
    assert status.stdout.startswith("Task cli-failed: failed")
    assert "running" not in status.stdout.splitlines()[0]


def test_ctrl_c_during_a_hung_request_exits_at_once_with_the_resume_hint(
    fixture_repo, tiny_workflow, cli_env
):
    import signal

    with ScriptedOpenAI([{"hang": 60}], responder=None) as server:
        env = {
            **cli_env,
            "TETHER_ALLOW_MODEL_REQUESTS": "1",
            "OPENAI_API_KEY": "sk-test",
            "OPENAI_BASE_URL": server.base_url,
        }
        proc = subprocess.Popen(
            [sys.executable, "-m", "orchestrator.cli", "run", "Survey", "--task", "hung",
             "--workdir", str(fixture_repo), "--workflow", str(tiny_workflow),
             "--model", "openai:gpt-4o-mini", "--model-timeout", "120"],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while not server.requests and time.monotonic() < deadline:
            time.sleep(0.05)
        assert server.requests, "the run never called the model"
        start = time.monotonic()
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=30)
        elapsed = time.monotonic() - start
    assert proc.returncode == 130, err
    assert elapsed < 10  # the first press, not the end of the hung request
    assert "Traceback" not in err
    assert "orchestrator resume --task hung" in err
    status = subprocess.run(
        [sys.executable, "-m", "orchestrator.cli", "status", "--task", "hung"],
        env=cli_env, capture_output=True, text=True,
    )  # fmt: skip
    assert status.stdout.startswith("Task hung: interrupted"), status.stdout + status.stderr
    assert "Resume: orchestrator resume --task hung" in status.stdout


def test_resume_sticks_to_the_recorded_model_unless_switched_explicitly(
    fixture_repo, tiny_workflow, memory_dir, monkeypatch
):
    done = Orchestrator(workdir=fixture_repo, workflow=tiny_workflow).run("Survey", task_id="m")
    assert done.model == "tether:offline"
    monkeypatch.setenv("TETHER_ALLOW_MODEL_REQUESTS", "1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")  # a key appears after the run
    again = Orchestrator(workdir=None).resume("m")
    assert again.model == "tether:offline"  # not silently openai:gpt-4o-mini
    switched = Orchestrator(workdir=None, model="openai:gpt-4o-mini").resume("m")
    assert switched.model == "openai:gpt-4o-mini"
    record = json.loads((memory_dir / ".tether/records/tasks/m.json").read_text())
    assert {"model": "openai:gpt-4o-mini", "model_before": "tether:offline"}.items() <= (
        record["data"].items()
    )
