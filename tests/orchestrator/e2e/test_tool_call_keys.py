"""Exactly-once effects of the user's tools (issue 52): each call of a user's tool has an
idempotency key that a resume of the same call keeps; a call in flight at a kill runs again
with that key, a call whose result was recorded does not run again, and an MCP server gets
the key in the request's `_meta`.

Through the `orchestrator` command and the Python API, with the real `langchain-openai`
client against the scripted server (`openai_server.py`); the tools are
`tests/orchestrator/fixtures/mail_tools.py` (a `send_email` that dedupes on its key, as
docs/agents.md shows) and the MCP server `fixtures/mcp_mailer.py`.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from langchain_openai import ChatOpenAI

from orchestrator import Orchestrator
from tests.orchestrator.fixtures.mail_tools import whose_key
from tests.orchestrator.openai_server import ScriptedOpenAI
from tests.orchestrator.scripted_agents import agents, findings, one_subtask, tool_answers

REPO = Path(__file__).parents[3]
FIXTURES = Path(__file__).parents[1] / "fixtures"
CMD = [sys.executable, "-m", "orchestrator.cli"]
MAILER = """
phases: [implementation]
python_tools: ["tests.orchestrator.fixtures.mail_tools:send_email"]
agents:
  mailer:
    description: Sends the report.
    prompt: AGENT=mailer
    tools: [send_email]
"""
SEND = {"tool": "send_email", "args": {"to": "boss@example.com", "body": "report"}}
STEPS = {"mailer": [SEND, lambda body: findings(f"Mailed: {tool_answers(body)[-1]}.")]}


def client(server: ScriptedOpenAI) -> ChatOpenAI:
    return ChatOpenAI(model="gpt-4o-mini", base_url=server.base_url, api_key="k", max_retries=0)


def _project(tmp_path: Path, cli_env: dict, server: ScriptedOpenAI) -> tuple[Path, Path, dict]:
    """The workflow, the mail folder and the command's environment."""
    wf = tmp_path / "wf.yaml"
    wf.write_text(MAILER)
    mail = tmp_path / "mail"
    mail.mkdir()
    env = {
        **cli_env, "TETHER_ALLOW_MODEL_REQUESTS": "1", "OPENAI_API_KEY": "k",
        "OPENAI_BASE_URL": server.base_url, "MAIL_DIR": str(mail),
    }  # fmt: skip
    return wf, mail, env


def _run(tmp_path: Path, wf: Path, env: dict, **popen: object) -> subprocess.Popen:
    return subprocess.Popen(
        [*CMD, "run", "Mail the report", "--task", "mail", "--workdir", str(tmp_path),
         "--workflow", str(wf), "--model", "openai:gpt-4o-mini"],
        env=env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **popen,
    )  # fmt: skip


def _resume(env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*CMD, "resume", "--task", "mail"], env=env, cwd=REPO, capture_output=True, text=True,
        timeout=180,
    )  # fmt: skip


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


def test_a_kill_inside_a_tool_call_then_resume_sends_once_with_the_same_key(
    tmp_path, cli_env, memory_dir
):
    """The run is SIGKILLed while `send_email` is inside its call (it has sent, not yet
    returned); the resume calls it again with the same key, and it does not send twice."""
    with ScriptedOpenAI(responder=agents(one_subtask("mailer"), STEPS)) as server:
        wf, mail, env = _project(tmp_path, cli_env, server)
        (mail / "hold").touch()
        run = _run(tmp_path, wf, env)
        deadline = time.monotonic() + 120
        while not (mail / "inside").exists():
            assert run.poll() is None and time.monotonic() < deadline, "the tool was not called"
            time.sleep(0.02)
        os.kill(run.pid, signal.SIGKILL)
        assert run.wait(30) == -signal.SIGKILL
        (mail / "hold").unlink()
        resumed = _resume(env)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "Task mail: done" in resumed.stdout
    first, second = _lines(mail / "calls.txt")  # the call in flight ran again, once
    assert first == second and first.startswith("mail/")
    assert _lines(mail / "outbox.txt") == [f"{first} boss@example.com"]  # sent once
    finding = "\n".join(p.read_text() for p in (memory_dir / "findings").glob("mailer*.md"))
    assert "Mailed: sent to boss@example.com." in finding


def test_a_call_whose_result_was_recorded_is_not_run_again(tmp_path, cli_env, memory_dir):
    """Killed after `send_email` answered and its result was recorded, before LangGraph
    saved it: the resume gives the agent the recorded answer without calling the tool."""
    with ScriptedOpenAI(responder=agents(one_subtask("mailer"), STEPS)) as server:
        wf, mail, env = _project(tmp_path, cli_env, server)
        run = _run(tmp_path, wf, {**env, "TETHER_FAULT": "tool_call_after_result"})
        assert run.wait(120) == -signal.SIGKILL, "the fault point was not reached"
        assert len(_lines(mail / "calls.txt")) == 1
        resumed = _resume(env)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "Task mail: done" in resumed.stdout
    assert len(_lines(mail / "calls.txt")) == 1  # not called again
    assert len(_lines(mail / "outbox.txt")) == 1
    finding = "\n".join(p.read_text() for p in (memory_dir / "findings").glob("mailer*.md"))
    assert "Mailed: sent to boss@example.com." in finding


KEYED = """
phases: [exploration]
agents:
  keyed:
    description: Asks for its keys.
    prompt: AGENT=keyed
    tools: [whose_key, send_email]
"""


def test_a_python_tool_gets_its_key_from_tool_call_key_and_the_model_never_sees_it(
    tmp_path, memory_dir
):
    """`tool_call_key()` inside a tool; each call its own key; the injected parameter is
    not in the schema the model is offered."""
    steps = {
        "keyed": [
            {"tool": "whose_key", "args": {"note": "one"}},
            {"tool": "whose_key", "args": {"note": "two"}},
            lambda body: findings(" | ".join(tool_answers(body))),
        ]
    }
    wf = tmp_path / "wf.yaml"
    wf.write_text(KEYED)
    (tmp_path / "mail").mkdir()
    os.environ["MAIL_DIR"] = str(tmp_path / "mail")
    try:
        from tests.orchestrator.fixtures.mail_tools import send_email

        with ScriptedOpenAI(responder=agents(one_subtask("keyed"), steps)) as server:
            result = Orchestrator(
                workdir=tmp_path, workflow=wf, model=client(server),
                tools=[whose_key, send_email],
            ).run("Which keys?", task_id="keys")  # fmt: skip
    finally:
        del os.environ["MAIL_DIR"]
    assert result.status == "done", result.failed
    answers = [a for b in server.requests for a in tool_answers(b)]
    assert "one: keys/exploration/keyed-1/whose_key/0" in answers
    assert "two: keys/exploration/keyed-1/whose_key/1" in answers
    offered = {
        t["function"]["name"]: t["function"]["parameters"]
        for b in server.requests
        for t in b.get("tools") or []
    }
    assert set(offered["send_email"]["properties"]) == {"to", "body"}


def test_an_mcp_server_gets_the_key_in_the_requests_meta(tmp_path, memory_dir):
    steps = {
        "mailer": [
            {"tool": "send_email", "args": {"to": "a@example.com"}},
            {"tool": "send_email", "args": {"to": "b@example.com"}},
            lambda body: findings(" | ".join(tool_answers(body))),
        ]
    }
    wf = tmp_path / "wf.yaml"
    wf.write_text(
        f"""
phases: [exploration]
mcp_servers:
  mailer: {{command: {sys.executable!r}, args: [{str(FIXTURES / "mcp_mailer.py")!r}]}}
agents:
  mailer:
    description: Sends mail.
    prompt: AGENT=mailer
    tools: ["mcp:mailer"]
"""
    )
    with ScriptedOpenAI(responder=agents(one_subtask("mailer"), steps)) as server:
        result = Orchestrator(workdir=tmp_path, workflow=wf, model=client(server)).run(
            "Mail both", task_id="mcp"
        )
    assert result.status == "done", result.failed
    answers = [a for b in server.requests for a in tool_answers(b)]
    assert any(
        "sent to a@example.com with key mcp/exploration/mailer-1/send_email/0" in a for a in answers
    ), answers
    assert any(
        "sent to b@example.com with key mcp/exploration/mailer-1/send_email/1" in a for a in answers
    ), answers
