"""LangGraph Server: `langgraph dev` serves tether's graph from the repository's `langgraph.json`.

A real `langgraph dev` process (in-memory runtime, loopback only, no browser, no reload,
analytics and version checks off) is started once for the module on a free port; a
`langgraph-sdk` client then starts runs with the offline model, streams progress and reads
the final state. The memory files a served run writes are compared with those of the same
task run through the Python API (`Orchestrator.run`), and a bad input must end the run with
a one-line error without writing anything, and the assistant's published schemas name
the input and context a run takes. The server is always stopped.

A last test kills a process running the served graph mid-task and finishes the task by
continuing the same thread from the graph's checkpointer, as a server retrying a run does.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import _CLEARED
from tests.orchestrator.conftest import build_repo

REPO = Path(__file__).resolve().parents[3]
NO_NETWORK_ENV = {
    "LANGGRAPH_CLI_NO_ANALYTICS": "1",  # langgraph-cli posts anonymous usage otherwise
    "LANGGRAPH_NO_VERSION_CHECK": "1",  # langgraph-api asks PyPI for newer versions otherwise
    "LANGSMITH_TRACING": "false",
    "LANGCHAIN_TRACING_V2": "false",
}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_ready(url: str, proc: subprocess.Popen, log: Path, timeout: float = 60.0) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"langgraph dev exited early:\n{log.read_text()[-3000:]}")
        try:
            if httpx.get(f"{url}/ok", timeout=1.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"langgraph dev not ready in {timeout}s:\n{log.read_text()[-3000:]}")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """`(url, workdir_root)` of a running `langgraph dev`; stopped after the module."""
    root = tmp_path_factory.mktemp("serve")
    port = _free_port()
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("LANGSMITH_", "LANGCHAIN_")) and k not in _CLEARED
    }
    env.update(NO_NETWORK_ENV, TETHER_ALLOW_MODEL_REQUESTS="0")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env["TETHER_MEMORY_DIR"] = str(root / "default-memory")
    log = root / "dev.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "langgraph_cli", "dev", "--config", str(REPO / "langgraph.json")]
            + ["--host", "127.0.0.1", "--port", str(port), "--no-browser", "--no-reload"],
            cwd=root,  # the in-memory runtime keeps its files in ./.langgraph_api
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(url, proc, log)
        yield url, root
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def _shape(root: Path) -> list[str]:
    """Memory files with timestamps and digits masked (what a person sees in the tree)."""
    skip = {".langgraph", ".tether", "memory.db", "memory.db-wal", "memory.db-shm"}
    out = []
    for path in root.rglob("*"):
        rel = path.relative_to(root)
        if path.is_file() and not (set(rel.parts) & skip):
            out.append(re.sub(r"\d+", "#", str(rel)))
    return sorted(out)


def _stream_run(url: str, payload: dict, context: dict) -> tuple[list, dict, str]:
    from langgraph_sdk import get_sync_client

    client = get_sync_client(url=url)
    thread = client.threads.create()
    parts = list(
        client.runs.stream(
            thread["thread_id"],
            "tether",
            input=payload,
            context=context,
            stream_mode=["custom", "updates"],
        )
    )
    return parts, client.threads.get_state(thread["thread_id"]), thread["thread_id"]


def test_served_run_streams_progress_and_writes_the_cli_memory_files(server, tmp_path):
    url, _root = server
    repo = build_repo(tmp_path / "repo")
    workflow = tmp_path / "tiny.yaml"
    workflow.write_text("name: tiny\nphases: [exploration, review]\n")
    served_memory = tmp_path / "served"
    context = {
        "memory_dir": str(served_memory),
        "workdir": str(repo),
        "workflow": str(workflow),
        "model": "offline",
    }
    parts, state, _thread = _stream_run(
        url, {"objective": "Survey the shop", "task_id": "shop-1"}, context
    )

    custom = [p.data for p in parts if p.event == "custom"]
    events = [e["event"] for e in custom]
    assert events[0] == "model" and custom[0]["offline"] is True
    assert [e["phase"] for e in custom if e["event"] == "phase"] == ["exploration", "review"]
    assert events.count("agent") >= 2 and "done" in events
    assert [p.event for p in parts if p.event == "error"] == []
    updates = [next(iter(p.data)) for p in parts if p.event == "updates"]
    assert updates == ["start", "tether"]

    values = state["values"]
    assert state["next"] == []
    assert values["status"] == "done" and values["task_id"] == "shop-1"
    assert values["phases"] == ["exploration", "review"]
    assert values["findings"] and not values["failed"]
    assert values["answer"].startswith("Extractive answer by tether's offline model")  # its key
    assert (served_memory / "research_plans" / "shop-1.md").is_file()
    for rel in (v["path"] for v in values["findings"].values()):
        assert (served_memory / rel).is_file()
    record = json.loads((served_memory / ".tether/records/tasks/shop-1.json").read_text())
    assert record["data"]["workdir"] == str(repo) and record["status"] == "done"

    from orchestrator import Orchestrator

    cli_memory = tmp_path / "cli"
    Orchestrator(memory_dir=cli_memory, workdir=repo, workflow=workflow, model="offline").run(
        "Survey the shop", task_id="shop-1"
    )
    assert _shape(served_memory) == _shape(cli_memory)
    status = Orchestrator(memory_dir=served_memory).status("shop-1")
    assert status["findings"] == len(values["findings"])


def test_bad_input_ends_the_run_with_one_line_error_and_writes_nothing(server, tmp_path):
    url, _root = server
    memory = tmp_path / "bad"
    parts, state, _thread = _stream_run(
        url,
        {"objective": "Survey", "start_phase": "nowhere"},
        {"memory_dir": str(memory), "workdir": str(tmp_path), "model": "offline"},
    )
    errors = [p.data for p in parts if p.event == "error"]
    assert len(errors) == 1
    assert "unknown phase 'nowhere'" in errors[0]["message"]
    assert "\n" not in errors[0]["message"]
    assert state["values"].get("task_id") is None
    assert not memory.exists()


def test_memory_dir_defaults_to_the_server_environment(server, tmp_path):
    url, root = server
    repo = build_repo(tmp_path / "repo", modules=1, docs=0, readme=False)
    workflow = tmp_path / "one.yaml"
    workflow.write_text("name: one\nphases: [exploration]\n")
    _parts, state, _thread = _stream_run(
        url,
        {"objective": "Look at the shop", "task_id": "env-1", "workdir": str(repo)},
        {"workflow": str(workflow)},
    )
    assert state["values"]["status"] == "done"
    assert state["values"]["workdir"] == str(repo)
    assert (root / "default-memory" / "research_plans" / "env-1.md").is_file()


DRIVE = """
import json, sqlite3, sys
from langgraph.checkpoint.sqlite import SqliteSaver
from orchestrator.server import make_graph

db, memory, repo, workflow, mode = sys.argv[1:6]
saver = SqliteSaver(sqlite3.connect(db, check_same_thread=False))
saver.setup()
graph = make_graph().copy(update={"checkpointer": saver})  # what the server does
config = {"configurable": {"thread_id": "t1"}}
context = {"memory_dir": memory, "workdir": repo, "workflow": workflow, "model": "offline"}
payload = {"objective": "Survey the shop", "task_id": "shop-1"} if mode == "start" else None
for _ in graph.stream(payload, config, context=context, durability="sync"):
    pass
values = graph.get_state(config).values
print(json.dumps({"status": values.get("status"), "task_id": values.get("task_id")}))
"""


DRIVE_PG = DRIVE.replace(
    'context = {"memory_dir": memory,', 'context = {"memory_url": memory,'
).replace(
    "saver = SqliteSaver(sqlite3.connect(db, check_same_thread=False))\nsaver.setup()",
    "from memory.backends.savers import open_postgres_saver\nsaver = open_postgres_saver(db)",
)


def test_a_served_task_on_postgres_survives_a_killed_worker_and_writes_no_files(tmp_path):
    """`memory_url` in the run's context: the task's documents go to PostgreSQL beside the
    server's graph state; a worker killed after the first phase is finished by a rerun of
    the thread, with no first-phase subagent run twice and nothing in a memory directory."""
    from tests.pg import private_schema

    repo = build_repo(tmp_path / "repo")
    workflow = tmp_path / "tiny.yaml"
    workflow.write_text("name: tiny\nphases: [exploration, review]\n")
    script = tmp_path / "drive_pg.py"
    assert "open_postgres_saver(db)" in DRIVE_PG and '{"memory_url": memory,' in DRIVE_PG
    script.write_text(DRIVE_PG)
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("TETHER_MEMORY")},
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    with private_schema() as url:
        args = [sys.executable, str(script), url, url, str(repo), str(workflow)]
        killed = subprocess.run(
            [*args, "start"],
            env={**env, "TETHER_FAULT": "advance_after_checkpoint:1"},
            capture_output=True,
            text=True,
            cwd=tmp_path,
        )
        assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
        first = _documents(url, "findings/researcher-exploration-")
        assert first and not _documents(url, "findings/researcher-review-")

        resumed = subprocess.run(
            [*args, "resume"], env=env, capture_output=True, text=True, cwd=tmp_path
        )
        assert resumed.returncode == 0, resumed.stderr[-2000:]
        assert json.loads(resumed.stdout) == {"status": "done", "task_id": "shop-1"}
        assert _documents(url, "findings/researcher-exploration-") == first
        assert len(_documents(url, "findings/researcher-review-")) == len(first)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["drive_pg.py", "repo", "tiny.yaml"]


def _documents(url: str, prefix: str) -> list[str]:
    import psycopg

    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT path FROM tether_documents WHERE path LIKE %s", (prefix + "%",)
        ).fetchall()
    return sorted(r[0] for r in rows)


def test_a_worker_killed_mid_task_is_finished_by_rerunning_the_thread(tmp_path):
    """The server's checkpointer (SQLite here, Postgres on a deployment) carries the task.

    The first process dies (SIGKILL) right after the first phase's checkpoint; a second
    one continues the same thread with no input, as the server does when it retries a
    run, and finishes the task without running any subagent of the first phase again.
    """
    repo = build_repo(tmp_path / "repo")
    workflow = tmp_path / "tiny.yaml"
    workflow.write_text("name: tiny\nphases: [exploration, review]\n")
    script = tmp_path / "drive.py"
    script.write_text(DRIVE)
    memory = tmp_path / "memory"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    args = [sys.executable, str(script), str(tmp_path / "graph.sqlite"), str(memory), str(repo)]
    args.append(str(workflow))

    killed = subprocess.run(
        [*args, "start"],
        env={**env, "TETHER_FAULT": "advance_after_checkpoint:1"},
        capture_output=True,
        text=True,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    first_phase = sorted(p.name for p in (memory / "findings").glob("researcher-exploration-*"))
    assert first_phase and not list((memory / "findings").glob("researcher-review-*"))
    task_file = memory / ".tether" / "records" / "tasks" / "shop-1.json"
    created = json.loads(task_file.read_text())["data"]["created"]

    resumed = subprocess.run([*args, "resume"], env=env, capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert json.loads(resumed.stdout) == {"status": "done", "task_id": "shop-1"}
    findings = memory / "findings"
    assert sorted(p.name for p in findings.glob("researcher-exploration-*")) == first_phase
    assert len(list(findings.glob("researcher-review-*"))) == len(first_phase)
    records = sorted((memory / ".tether" / "records" / "tasks").glob("*.json"))
    assert [p.name for p in records] == ["shop-1.json"]
    record = json.loads(records[0].read_text())
    assert record["data"]["created"] == created  # started once, not twice


def test_the_assistant_publishes_its_input_and_context_schemas(server):
    """Studio and API clients learn what a run takes from the assistant's schemas."""
    from langgraph_sdk import get_sync_client

    url, _root = server
    client = get_sync_client(url=url)
    [assistant] = client.assistants.search(graph_id="tether")
    schemas = client.assistants.get_schemas(assistant["assistant_id"])
    assert schemas["input_schema"]["required"] == ["objective"]
    assert {"objective", "task_id", "start_phase", "workdir"} <= set(
        schemas["input_schema"]["properties"]
    )
    assert {"memory_dir", "workdir", "workflow", "model", "max_parallel"} <= set(
        schemas["context_schema"]["properties"]
    )
    assert {"status", "findings", "plan_path"} <= set(schemas["output_schema"]["properties"])
    nodes = [n["id"] for n in client.assistants.get_graph(assistant["assistant_id"])["nodes"]]
    assert nodes == ["__start__", "start", "tether", "__end__"]


def test_an_existing_task_id_is_refused_and_its_record_kept(server, tmp_path):
    from orchestrator import Orchestrator

    url, _root = server
    repo = build_repo(tmp_path / "repo", modules=1, docs=0, readme=False)
    workflow = tmp_path / "one.yaml"
    workflow.write_text("name: one\nphases: [exploration]\n")
    memory = tmp_path / "memory"
    Orchestrator(memory_dir=memory, workdir=repo, workflow=workflow).run("First", task_id="dup-1")
    tasks = memory / ".tether" / "records" / "tasks" / "dup-1.json"
    before = tasks.read_text()
    parts, state, _thread = _stream_run(
        url,
        {"objective": "Second", "task_id": "dup-1"},
        {"memory_dir": str(memory), "workdir": str(repo), "workflow": str(workflow)},
    )
    [error] = [p.data for p in parts if p.event == "error"]
    assert "task 'dup-1' already exists" in error["message"]
    assert state["values"].get("phases") is None
    assert tasks.read_text() == before
