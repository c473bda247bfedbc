"""Failed agents on resume (issue 42 items 11, 16): a failed agent continues from its
durable steps instead of calling its tools again, and the first resume after a failure and
a kill mid-phase reruns the failed agent (on files and on PostgreSQL).

Through the real `langchain-openai` client against the scripted server
(`openai_server.py`); the failing provider is the server answering HTTP 500.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from langchain_openai import ChatOpenAI

from orchestrator.api import Orchestrator
from tests.orchestrator.openai_server import ScriptedOpenAI
from tests.orchestrator.scripted_agents import agents, findings
from tests.pg import private_schema

REPO = Path(__file__).parents[3]
CMD = [sys.executable, "-m", "orchestrator.cli"]
MAILER = """
phases: [implementation]
agents:
  mailer:
    description: Sends the report.
    prompt: AGENT=mailer
    tools: [send_email]
"""


def client(server: ScriptedOpenAI) -> ChatOpenAI:
    return ChatOpenAI(model="gpt-4o-mini", base_url=server.base_url, api_key="k", max_retries=0)


def test_a_failed_agent_continues_from_its_steps_and_calls_no_tool_twice(tmp_path, memory_dir):
    """Item 11: after a provider failure the agent restarted from scratch on resume, and
    its `send_email` ran a second time."""
    sent: list[str] = []

    def send_email(to: str, body: str) -> str:
        """Send an email."""
        sent.append(to)
        return f"sent to {to}"

    broken = {"on": True}

    def mailer_step(body: dict) -> dict:
        return {"status": 500} if broken["on"] else findings("Mailed the report.")

    def plan(phase: str) -> dict:
        subtask = {"id": "mail", "title": "Mail it", "description": "Mail.", "agent": "mailer"}
        return {"strategy": "Mail.", "subtasks": [subtask], "done": True}

    send = {"tool": "send_email", "args": {"to": "boss@example.com", "body": "report"}}
    wf = tmp_path / "wf.yaml"
    wf.write_text(MAILER)
    with ScriptedOpenAI(responder=agents(plan, {"mailer": [send, mailer_step]})) as server:
        orch = Orchestrator(workdir=tmp_path, workflow=wf, model=client(server), tools=[send_email])
        first = orch.run("Mail the report", task_id="mail")
        assert first.status == "failed" and sent == ["boss@example.com"]
        broken["on"] = False
        events: list[dict] = []
        again = Orchestrator(
            workdir=tmp_path, workflow=wf, model=client(server), tools=[send_email],
            on_event=events.append,
        ).resume("mail")  # fmt: skip
    assert again.status == "done", again.failed
    assert sent == ["boss@example.com"]  # not sent twice
    finding = (memory_dir / again.findings[0]).read_text()
    assert "Mailed the report." in finding
    warned = [e["message"] for e in events if e["event"] == "warning"]
    assert any("continues its failed attempt from its 1 earlier step(s)" in w for w in warned)


def _plan_two(phase: str) -> dict:
    subtasks = [
        {"id": name, "title": f"Look at {name}", "description": name, "agent": "worker"}
        for name in ("a", "b")
    ]
    return {"strategy": "Two.", "subtasks": subtasks, "done": True}


def _subtask(body: dict) -> str:
    return "a" if "Subtask: a\n" in body["messages"][1]["content"] else "b"


@pytest.mark.parametrize("backend", ["files", "postgres"])
def test_the_first_resume_after_a_failure_and_a_kill_reruns_the_failed_agent(
    tmp_path, cli_env, backend
):
    """Item 16: `a` fails, the process is killed while `b` runs; the first resume used to
    finish `b` and exit 3 with `a`'s stale error (only a second resume reran `a`)."""
    wf = tmp_path / "wf.yaml"
    wf.write_text(
        "phases: [exploration]\nagents:\n  worker:\n    prompt: AGENT=worker\n"
        "    tools: [read_file]\n"
    )
    (tmp_path / "a.md").write_text("# A\n")

    def failing(body: dict) -> dict:
        return {"status": 500} if _subtask(body) == "a" else {"hang": 20}

    def working(body: dict) -> dict:
        return findings(f"Looked at {_subtask(body)}.")

    env = {**cli_env, "TETHER_ALLOW_MODEL_REQUESTS": "1", "OPENAI_API_KEY": "k"}
    with (
        private_schema() if backend == "postgres" else _no_url() as url,
        ScriptedOpenAI(responder=agents(_plan_two, {"worker": [failing]})) as server,
    ):
        env["OPENAI_BASE_URL"] = server.base_url
        where = ["--memory-url", url] if url else []
        out = tmp_path / "events.jsonl"
        with open(out, "w") as fh:
            run = subprocess.Popen(
                [*CMD, "run", "Look at both", "--task", "ab", "--workdir", str(tmp_path),
                 "--workflow", str(wf), "--model", "openai:gpt-4o-mini", "--max-parallel", "2",
                 "--json", *where], env=env, stdout=fh, stderr=subprocess.DEVNULL, cwd=REPO,
            )  # fmt: skip
            deadline = time.monotonic() + 120
            # its failure is saved with the super-step's pending writes: kill once it is
            while not (_failed(out, "exploration/a") and _failure_saved(url, cli_env)):
                assert time.monotonic() < deadline and run.poll() is None
                time.sleep(0.05)
            os.kill(run.pid, signal.SIGKILL)
            run.wait()
        server.responder = agents(_plan_two, {"worker": [working]})
        resumed = subprocess.run(
            [*CMD, "resume", "--task", "ab", *where], env=env, capture_output=True, text=True,
            timeout=120, cwd=REPO,
        )  # fmt: skip
        status = subprocess.run(
            [*CMD, "status", "--task", "ab", "--json", *where], env=env, capture_output=True,
            text=True, timeout=60, cwd=REPO,
        )  # fmt: skip
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "Task ab: done" in resumed.stdout
    assert "retrying what failed before this run: exploration/a" in resumed.stderr
    states = {k: s["state"] for k, s in json.loads(status.stdout)["subtasks"].items()}
    assert states == {"exploration/a": "done", "exploration/b": "done"}


def _failure_saved(url: str | None, env: dict) -> bool:
    """Whether LangGraph has saved a subagent's `failed` update among its pending writes."""
    query = "SELECT count(*) FROM {} WHERE channel = 'failed'"  # LangGraph's pending writes
    if url:
        import psycopg

        with psycopg.connect(url) as conn:
            try:
                return conn.execute(query.format("checkpoint_writes")).fetchone()[0] > 0
            except psycopg.errors.UndefinedTable:
                return False
    import sqlite3

    db = Path(env["TETHER_MEMORY_DIR"]) / ".langgraph" / "state.sqlite"
    if not db.is_file():
        return False
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
        try:
            return conn.execute(query.format("writes")).fetchone()[0] > 0
        except sqlite3.OperationalError:  # not made yet, or locked for a moment
            return False


class _no_url:  # noqa: N801 - a context manager standing in for `private_schema()`
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def _failed(events: Path, key: str) -> bool:
    for line in events.read_text().splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if event.get("event") == "agent" and event.get("key") == key:
            if event.get("state") == "failed":
                return True
    return False
