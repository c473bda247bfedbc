"""Pruning a task's LangGraph checkpoints (`orchestrator.graph.pruning`): at each phase transition
and at the task's end the thread keeps what a resume, `orchestrator status` and a pending
approval read, and nothing else, on SQLite and on PostgreSQL.

Kills come from `TETHER_FAULT` in a forked child (as in `test_recovery.py`); the resume runs
in this process. "Ran once": a subagent whose findings the registry held before the resume
records none during it, and each of the others records its findings once.
"""

from __future__ import annotations

import multiprocessing
import os
import re
import sqlite3
from pathlib import Path
from typing import Any

import psycopg
import pytest
from langchain_core.messages import AIMessage

from memory.backends.checkpoint_prune import prune_saver
from memory.backends.savers import open_sqlite_saver
from orchestrator.api import Orchestrator
from orchestrator.artifacts.registry import registry_records
from orchestrator.graph import context as run_context
from orchestrator.graph.pruning import ENV_VAR, prune_thread
from orchestrator.offline import OfflineChatModel
from tests.pg import private_schema

OBJECTIVE = "Survey the shop service"
PHASES = "name: three\nphases: [exploration, implementation, review]\n"
_FORK = multiprocessing.get_context("forkserver")


def _child(memory: dict, workdir: str, workflow: str, fault: str) -> None:
    os.environ["TETHER_FAULT"] = fault
    try:
        orch = Orchestrator(workdir=workdir, workflow=workflow, **memory)
        result = orch.run(OBJECTIVE, task_id="t")
        os._exit(0 if result.status == "done" else 2)
    except BaseException:  # noqa: BLE001 - the exit code is the test's signal
        import traceback

        traceback.print_exc()
        os._exit(3)


def killed_run(memory: dict, workdir: Path, workflow: Path, fault: str) -> int:
    proc = _FORK.Process(target=_child, args=(memory, str(workdir), str(workflow), fault))
    proc.start()
    proc.join(90)
    assert proc.exitcode is not None, "child hung"
    return proc.exitcode


def finished(orch: Orchestrator) -> set[str]:
    """The subagents whose findings the task's artifact registry holds."""
    records = registry_records(orch.docs, "t")
    return {k for k, rec in records.items() if k.startswith("findings:") and "findings" in rec}


def resume_counting_runs(orch: Orchestrator, monkeypatch) -> tuple[Any, list[str]]:
    """Resume task `t`; also every subagent that finished during the resume (it records its
    findings in the registry once per run of its agent)."""
    ran: list[str] = []
    note = run_context.registry_note

    def counting(docs: Any, task_id: str, key: str, *status: Any, **fields: Any) -> None:
        if key.startswith("findings:") and "findings" in fields:
            ran.append(key)
        note(docs, task_id, key, *status, **fields)

    monkeypatch.setattr(run_context, "registry_note", counting)
    return orch.resume("t"), ran


def assert_ran_once(orch: Orchestrator, before: set[str], ran: list[str], result: Any) -> None:
    """No subagent finished before the kill ran again, none twice, and all are recorded."""
    assert before and not before & set(ran), (before, ran)
    assert len(ran) == len(set(ran))
    assert finished(orch) == before | set(ran) and len(before) + len(ran) == len(result.findings)


def sqlite_rows(memory_dir: Path, distinct: bool = False) -> dict[str, int]:
    """Checkpoints (or `distinct` namespaces) per namespace kind (`""`, `plan`, `subagent`)."""
    with sqlite3.connect(memory_dir / ".langgraph" / "state.sqlite") as conn:
        rows = conn.execute("SELECT checkpoint_ns FROM checkpoints").fetchall()
    return _kinds(rows, distinct)


def pg_rows(url: str, distinct: bool = False) -> dict[str, int]:
    with psycopg.connect(url) as conn:
        return _kinds(conn.execute("SELECT checkpoint_ns FROM checkpoints").fetchall(), distinct)


def _kinds(rows: list, distinct: bool) -> dict[str, int]:
    out: dict[str, int] = {}
    for ns in {r[0] for r in rows} if distinct else [r[0] for r in rows]:
        kind = ns.split(":")[0]
        out[kind] = out.get(kind, 0) + 1
    return out


@pytest.fixture
def three_phases(tmp_path) -> Path:
    path = tmp_path / "three.yaml"
    path.write_text(PHASES)
    return path


def test_a_finished_task_keeps_one_checkpoint_and_status_reads_it(
    tmp_path, fixture_repo, three_phases, memory_dir, monkeypatch
):
    result = Orchestrator(workdir=fixture_repo, workflow=three_phases).run(OBJECTIVE, task_id="t")
    assert result.status == "done" and len(result.findings) >= 6
    assert sqlite_rows(memory_dir) == {"": 1}  # no finished step, no subagent conversation
    status = Orchestrator().status("t")
    assert (status["status"], status["phase"]) == ("done", "review")
    assert status["findings"] == len(result.findings) and status["source"] == "langgraph"

    monkeypatch.setenv(ENV_VAR, "0")  # the switch: every checkpoint is kept
    other = tmp_path / "unpruned"
    kept = Orchestrator(memory_dir=other, workdir=fixture_repo, workflow=three_phases).run(
        OBJECTIVE, task_id="t"
    )
    assert kept.status == "done"
    rows = sqlite_rows(other)
    assert rows[""] > 20 and rows["subagent"] >= 3 * len(kept.findings)


def test_a_run_killed_after_a_prune_resumes_without_running_anything_twice(
    fixture_repo, three_phases, memory_dir, monkeypatch
):
    memory = {"memory_dir": str(memory_dir)}
    assert killed_run(memory, fixture_repo, three_phases, "advance_after_prune:1") == -9
    pruned = sqlite_rows(memory_dir)
    # the first phase's steps and its subagents' conversations are gone already
    assert pruned == {"": 1}, pruned
    orch = Orchestrator()
    before = finished(orch)
    result, ran = resume_counting_runs(orch, monkeypatch)
    assert result.status == "done" and result.source == "langgraph"
    assert_ran_once(orch, before, ran, result)
    assert sqlite_rows(memory_dir) == {"": 1}


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_fan_out_killed_after_an_earlier_phase_was_pruned_resumes(
    fixture_repo, three_phases, memory_dir, backend, monkeypatch
):
    def check(memory: dict, rows) -> None:
        # the offline lead plans 3 subtasks a phase: the 5th finished subagent is the second
        # phase's 2nd, and the first phase was pruned
        assert killed_run(memory, fixture_repo, three_phases, "subagent_after_findings:5") == -9
        # the first phase's lead and subagent calls are gone, the second phase's are there
        calls = rows(distinct=True)
        assert calls["plan"] == 1 and 2 <= calls["subagent"] <= 3, calls
        orch = Orchestrator(**memory)
        before = finished(orch)
        # the second phase's subagents run in parallel: its 3rd may have recorded its
        # findings while the 2nd was being killed
        assert 5 <= len(before) <= 6, before
        result, ran = resume_counting_runs(orch, monkeypatch)
        assert result.status == "done" and result.source == "langgraph"
        assert_ran_once(orch, before, ran, result)
        assert len(result.findings) == 9
        assert rows() == {"": 1}
        orch.close()

    if backend == "sqlite":
        check({"memory_dir": str(memory_dir)}, lambda **kw: sqlite_rows(memory_dir, **kw))
        return
    with private_schema() as url:
        check({"memory_url": url}, lambda **kw: pg_rows(url, **kw))


# -- a pending approval -------------------------------------------------------------------

APPROVAL = """
phases: [exploration, implementation]
python_tools: [tests.orchestrator.fixtures.widget_tools:count_widgets]
agents:
  counter:
    description: Counts widgets.
    prompt: AGENT=counter
    tools: [count_widgets]
  writer:
    description: Updates the notes.
    prompt: AGENT=writer
    tools: [read_file, write_file, count_widgets]
    interrupt_on: [write_file]
"""


def _call(name: str, args: dict, ident: str) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": name, "args": args, "id": ident}])


def approval_policy(messages: list, tools: list[dict]) -> AIMessage:
    """The lead puts a counter in the first phase and a writer in the second; the writer
    counts red widgets, then writes notes.txt (which waits for approval), then reports."""
    names = [t.get("function", t).get("name") for t in tools]
    text = "\n".join(str(m.content) for m in messages)
    if "PhasePlan" in names:
        phase = re.findall(r"^Phase: (\S+)", text, re.M)[-1]
        agent = "counter" if phase == "exploration" else "writer"
        sub = {"id": f"{agent}-1", "title": agent, "description": "Do it.", "agent": agent}
        return _call("PhasePlan", {"strategy": "One agent.", "subtasks": [sub]}, "p")
    if "SubmitAnswer" in names:
        return _call("SubmitAnswer", {"answer": "The writer wrote notes.txt."}, "a")
    agent = re.search(r"AGENT=(\w+)", text).group(1)
    steps = [("count_widgets", {"color": "blue" if agent == "counter" else "red"})]
    if agent == "writer":
        steps.append(("write_file", {"path": "notes.txt", "content": "7 red widgets\n"}))
    done = sum(1 for m in messages if m.type == "ai")
    if done < len(steps):
        return _call(*steps[done], f"c{done}")
    return _call("SubmitFindings", {"summary": f"{agent} done."}, "f")


def test_a_waiting_approval_survives_pruning_and_is_approved_once(
    tmp_path, memory_dir, monkeypatch
):
    work = tmp_path / "work"
    work.mkdir()
    (work / "notes.txt").write_text("old notes\n")
    (tmp_path / "wf.yaml").write_text(APPROVAL)
    calls = tmp_path / "calls.txt"
    monkeypatch.setenv("WIDGET_CALLS", str(calls))
    model = OfflineChatModel(policy=approval_policy)
    orch = Orchestrator(workdir=work, workflow=tmp_path / "wf.yaml", model=model)
    waiting = orch.run("Update the notes", task_id="t")
    assert waiting.status == "waiting" and waiting.pending_approvals[0]["tool"] == "write_file"
    before = sqlite_rows(memory_dir)
    # the first phase was pruned at its end; the second phase waits, and is not pruned
    assert sqlite_rows(memory_dir, distinct=True) == {"": 1, "plan": 1, "subagent": 1}

    saver = open_sqlite_saver(memory_dir / ".langgraph" / "state.sqlite")
    try:
        assert not prune_thread(saver, "t")  # tether does not prune a waiting thread
        assert sqlite_rows(memory_dir) == before
        # the rule itself, asked directly: the waiting call and its request stay
        assert prune_saver(saver, ["t"])
    finally:
        saver.conn.close()
    assert sqlite_rows(memory_dir) == {"": 1, "subagent": 1}
    assert Orchestrator().status("t")["pending_approvals"][0]["tool"] == "write_file"

    done = orch.approve("t")
    assert done.status == "done"
    assert (work / "notes.txt").read_text() == "7 red widgets\n"
    assert calls.read_text() == "blue\nred\n"  # the writer continued: no tool call twice
    assert sqlite_rows(memory_dir) == {"": 1}
