"""LangGraph's database is derived: a damaged one never blocks a run, a resume or an
approval. It is moved aside (never deleted) with one warning and the task continues from
its JSON checkpoints; a subagent that was waiting for approval asks again."""

from __future__ import annotations

import contextlib
import sqlite3
import subprocess
import sys
from pathlib import Path

from langchain_openai import ChatOpenAI

from orchestrator.api import Orchestrator
from tests.orchestrator.openai_server import ScriptedOpenAI
from tests.orchestrator.scripted_agents import agents, findings, one_subtask

CMD = [sys.executable, "-m", "orchestrator.cli"]


def damage(memory_dir: Path) -> None:
    db = memory_dir / ".langgraph" / "state.sqlite"
    data = bytearray(db.read_bytes())
    data[:100] = b"x" * 100  # a garbled header: SQLite says "file is not a database"
    db.write_bytes(bytes(data))


def orch(*args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([*CMD, *args], env=env, capture_output=True, text=True, timeout=120)


def test_a_damaged_database_is_moved_aside_and_the_task_resumes(
    fixture_repo, tiny_workflow, cli_env, memory_dir
):
    # killed mid-run (a done task has nothing to resume, and its database is not opened)
    first = orch("run", "Survey the shop", "--task", "t1", "--workdir", str(fixture_repo),
                 "--workflow", str(tiny_workflow),
                 env={**cli_env, "TETHER_FAULT": "merge_after_checkpoint:1"})  # fmt: skip
    assert first.returncode == -9, first.stderr
    db = memory_dir / ".langgraph" / "state.sqlite"
    with contextlib.closing(sqlite3.connect(db)) as conn:  # the killed run's WAL, written in
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    damage(memory_dir)
    resumed = orch("resume", "--task", "t1", env=cli_env)
    assert resumed.returncode == 0, resumed.stderr
    warned = [ln for ln in resumed.stderr.splitlines() if "was damaged" in ln]
    assert len(warned) == 1 and "moved aside to state.sqlite.damaged-" in warned[0]
    assert list((memory_dir / ".langgraph").glob("state.sqlite.damaged-*"))  # kept
    again = orch("run", "Survey again", "--task", "t2", "--workdir", str(fixture_repo),
                 "--workflow", str(tiny_workflow), env=cli_env)  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert "Task t2: done" in again.stdout


def test_a_request_waiting_when_the_database_is_damaged_is_asked_again(tmp_path, memory_dir):
    wf = tmp_path / "wf.yaml"
    wf.write_text(
        "phases: [implementation]\nagents:\n  writer:\n    prompt: AGENT=writer\n"
        "    tools: [write_file]\n    interrupt_on: [write_file]\n"
    )
    steps = {
        "writer": [
            {"tool": "write_file", "args": {"path": "notes.txt", "content": "new\n"}},
            findings("Wrote the notes."),
        ]
    }
    with ScriptedOpenAI(responder=agents(one_subtask("writer"), steps)) as server:
        model = ChatOpenAI(
            model="gpt-4o-mini", base_url=server.base_url, api_key="k", max_retries=0
        )
        orchestrator = Orchestrator(workdir=tmp_path, workflow=wf, model=model)
        assert orchestrator.run("Write the notes", task_id="w").status == "waiting"
        damage(memory_dir)
        asked = Orchestrator(workdir=tmp_path, workflow=wf, model=model).approve("w")
        assert asked.status == "waiting"  # the writer ran again and asks again
        assert not (tmp_path / "notes.txt").exists()
        done = Orchestrator(workdir=tmp_path, workflow=wf, model=model).approve("w")
    assert done.status == "done"
    assert (tmp_path / "notes.txt").read_text() == "new\n"
