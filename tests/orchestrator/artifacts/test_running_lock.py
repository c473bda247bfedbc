"""The run lock, seen from the outside: `status` says `running` while a process holds it, and
a served run takes it (so a served run and a CLI resume never run one task at once).

* An unfinished task whose run lock a live process holds is `running` in `orchestrator
  status` (text and `--json`), on a memory directory and on PostgreSQL; once the lock is
  released it is `interrupted`, with the resume command.
* The served graph (`orchestrator.server`) refuses to start a task, or to run the tether
  node of one, while another process holds the task's run lock: one error, no subagent
  run, no findings written; the same thread goes on once the lock is free.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from memory.backends import open_backend
from memory.backends.files import FilesBackend
from orchestrator.artifacts.documents import Docs
from orchestrator.errors import OrchestratorUserError
from tests.orchestrator.conftest import build_repo
from tests.pg import private_schema


def _killed_run(args: list[str], env: dict, cwd) -> None:
    """A run killed (SIGKILL) after its first phase's checkpoint: unfinished, no process."""
    done = subprocess.run(
        [sys.executable, "-m", "orchestrator.cli", *args],
        env={**env, "TETHER_FAULT": "advance_after_checkpoint:1"},
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=300,
    )
    assert done.returncode == -9, done.stderr[-2000:]


@pytest.fixture(params=["files", "postgres"])
def where(request, tmp_path, memory_dir):
    """`(extra CLI args, the memory's location)` of a backend holding one killed task."""
    repo = build_repo(tmp_path / "repo")
    workflow = tmp_path / "tiny.yaml"
    workflow.write_text("name: tiny\nphases: [exploration, review]\n")
    run = ["run", "Survey the shop", "--workdir", str(repo), "--workflow", str(workflow)]
    env = dict(os.environ)
    if request.param == "postgres":
        with private_schema() as url:
            _killed_run(["--memory-url", url, *run, "--task", "t1"], env, tmp_path)
            yield ["--memory-url", url], url
    else:
        _killed_run([*run, "--task", "t1"], env, tmp_path)
        yield [], str(memory_dir)


def _status(args: list[str], cwd) -> tuple[dict, str]:
    """`orchestrator status` as JSON and as text (console processes, as a person runs it)."""
    out = []
    for extra in (["--json"], []):
        done = subprocess.run(
            [sys.executable, "-m", "orchestrator.cli", *args, "status", "--task", "t1", *extra],
            capture_output=True,
            text=True,
            cwd=cwd,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        out.append(done.stdout)
    return json.loads(out[0]), out[1]


def test_status_says_running_while_a_process_holds_the_run_lock(where, tmp_path):
    args, location = where
    info, _text = _status(args, tmp_path)
    assert info["status"] == "interrupted"
    with open_backend(location) as backend, Docs(backend).run_lock("t1"):
        info, text = _status(args, tmp_path)
        assert info["status"] == "running"
        assert text.startswith("Task t1: running\n")
    info, text = _status(args, tmp_path)
    assert info["status"] == "interrupted"
    assert "Resume: orchestrator resume --task t1" in text


# -- the served graph ---------------------------------------------------------------------
@pytest.fixture
def served(tmp_path, memory_dir):
    """The served graph with a checkpointer, stopping before its `tether` node."""
    from orchestrator.server import build_serve_graph

    repo = build_repo(tmp_path / "repo")
    workflow = tmp_path / "tiny.yaml"
    workflow.write_text("name: tiny\nphases: [exploration, review]\n")
    graph = build_serve_graph().compile(checkpointer=InMemorySaver(), interrupt_before=["tether"])
    context = {
        "memory_dir": str(memory_dir),
        "workdir": str(repo),
        "workflow": str(workflow),
        "model": "offline",
    }
    return graph, context


def _held(memory_dir, task_id):
    """The task's run lock, held as another process running it would hold it."""
    return Docs(FilesBackend(memory_dir)).run_lock(task_id)


def _findings(memory_dir):
    folder = memory_dir / "findings"
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


def test_a_served_run_waits_for_no_one_else_holding_its_task(served, memory_dir):
    graph, context = served
    config = {"configurable": {"thread_id": "served-1"}}
    payload = {"objective": "Survey the shop", "task_id": "shop-1"}
    for _ in graph.stream(payload, config, context=context):
        pass  # the task is recorded; the run stops before the `tether` node
    with _held(memory_dir, "shop-1"):  # a CLI resume of the same task, say
        with pytest.raises(OrchestratorUserError, match="'shop-1' is already running"):
            for _ in graph.stream(None, config, context=context):
                pass
        assert _findings(memory_dir) == []
    for _ in graph.stream(None, config, context=context):
        pass
    assert graph.get_state(config).values["status"] == "done"
    assert _findings(memory_dir)


def test_a_served_task_is_not_started_while_its_id_is_held(served, memory_dir):
    graph, context = served
    config = {"configurable": {"thread_id": "served-2"}}
    with _held(memory_dir, "shop-2"):
        with pytest.raises(OrchestratorUserError, match="'shop-2' is already running"):
            for _ in graph.stream(
                {"objective": "Survey the shop", "task_id": "shop-2"}, config, context=context
            ):
                pass
    assert not (memory_dir / ".tether" / "records" / "tasks" / "shop-2.json").exists()
