"""Remote agents on two real LangGraph Servers (`langgraph dev` on loopback ports).

The lead is tether's offline model, which plans one subtask per folder of a six-folder
project; the workflow's agent is remote, a graph the servers serve
(`tests/orchestrator/e2e/remote_graphs.py`): `echo` answers with one AI message naming its
server (and sleeps as long as the objective's `sleep=S` says, a slow model), `flaky` fails
each subtask's first run, `asks` stops at a human-in-the-loop interrupt. What the servers
did is read from the servers themselves, through `langgraph-sdk` (`DevServer.runs_of`):
their own run lists per subtask thread.

Kills are real: the lead's process is SIGKILLed by a fault point right after a remote run
is created and before its id is noted (`TETHER_FAULT=remote_after_create:N`), a server is
SIGKILLed mid-phase and started again in its own working folder, where the dev runtime
re-queues the runs it was running.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from orchestrator import Orchestrator
from tests.orchestrator.dev_servers import REPO, DevServer, start_all

CMD = [sys.executable, "-m", "orchestrator.cli"]
SECRET = "s3cret-header-value-42"


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    """Two running `langgraph dev` servers, A and B, each in a folder of its own."""
    root = tmp_path_factory.mktemp("remote-servers")
    pair = [DevServer(root / "a", "A"), DevServer(root / "b", "B")]
    try:
        start_all(*pair)
        yield pair
    finally:
        for server in pair:
            server.stop()


def six_folders(root: Path) -> Path:
    """A project of six folders, one module each: the offline lead plans six subtasks."""
    for name in ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot"):
        (root / name).mkdir(parents=True)
        (root / name / f"{name}.py").write_text(f'"""The {name} part."""\n\nVALUE = 1\n')
    return root


def workflow(path: Path, urls: list[str], graph: str = "echo", **extra: str) -> Path:
    headers = "\n      headers: {x-api-key: '${REMOTE_KEY}'}" if extra.get("headers") else ""
    path.write_text(
        f"""name: remote
phases: [exploration]
model_timeout: {extra.get("timeout", "3")}
thresholds: {{max_subtasks: 6, max_parallel: 6}}
agents:
  researcher:
    description: Reads one folder on a LangGraph Server.
    remote:
      url: {json.dumps(urls)}
      graph: {graph}{headers}
"""
    )
    return path


def cli(*args: str, env: dict, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*CMD, *args], env=env, capture_output=True, text=True, timeout=timeout, cwd=REPO
    )


@pytest.fixture
def env(cli_env):
    return {**cli_env, "PYTHONPATH": str(REPO), "REMOTE_KEY": SECRET}


def status_of(task: str) -> dict:
    """`orchestrator status --json` of `task`, read in this process (`Orchestrator.status`)."""
    return Orchestrator().status(task)  # the test's memory dir: `$TETHER_MEMORY_DIR`


def run_args(repo: Path, wf: Path, task: str, objective: str) -> list[str]:
    return ["run", objective, "--task", task, "--workdir", str(repo), "--workflow", str(wf)]


def started_once(servers: list[DevServer], task: str, *, killed: bool = False) -> dict[str, str]:
    """`{subtask: server name}`; every subtask has one thread with one run, on one server
    (`killed`: a thread may have no run yet, when the kill came between creating the thread
    and its run; it is left out)."""
    where: dict[str, str] = {}
    for server in servers:
        for key, runs in server.runs_of(task).items():
            assert key not in where, f"{key} ran on {where[key]} and {server.name}"
            if killed and not runs:
                continue
            assert len(runs) == 1, (key, [r["status"] for r in runs])
            where[key] = server.name
    return where


def test_six_subtasks_spread_over_two_servers(servers, tmp_path, env, memory_dir):
    repo = six_folders(tmp_path / "repo")
    wf = workflow(tmp_path / "wf.yaml", [s.url for s in servers], headers="yes")
    done = cli(*run_args(repo, wf, "spread", "Survey the parts sleep=0.5"), env=env)
    assert done.returncode == 0, done.stdout + done.stderr

    where = started_once(servers, "spread")
    assert len(where) == 6
    assert sorted(where.values()) == ["A", "A", "A", "B", "B", "B"]  # fewest in flight first
    status = status_of("spread")
    assert status["status"] == "done"
    ran = {k: v["ran_on"]["server"] for k, v in status["subtasks"].items()}
    urls = {s.name: s.url for s in servers}
    assert ran == {k: urls[name] for k, name in where.items()}
    for key, name in where.items():  # the finding is the remote agent's last AI message
        text = next(memory_dir.glob(f"findings/researcher-{key.split('/')[1]}_*.md")).read_text()
        assert f"read on server {name}." in text
    # every remote run reported 150 tokens: they count in the task's spend
    assert status["budget"]["by_agent"]["researcher"] == 6 * 150
    assert status["usage_unknown"] == []
    leaked = [p for p in memory_dir.rglob("*") if p.is_file() and SECRET.encode() in p.read_bytes()]
    assert leaked == []  # the header's value is sent, never written
    assert SECRET not in done.stdout + done.stderr


def test_a_killed_lead_resumes_without_starting_a_remote_run_twice(servers, tmp_path, env):
    """SIGKILL right after the 4th run was created, before its id was noted; `resume` finds
    every run through the threads' run lists and joins or reads them back."""
    repo = six_folders(tmp_path / "repo")
    wf = workflow(tmp_path / "wf.yaml", [s.url for s in servers])
    killed = cli(
        *run_args(repo, wf, "killed", "Survey the parts sleep=1.5"),
        env={**env, "TETHER_FAULT": "remote_after_create:4"},
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    before = started_once(servers, "killed", killed=True)
    assert 4 <= len(before) <= 6

    events: list[dict] = []
    assert Orchestrator(on_event=events.append).resume("killed").status == "done"
    where = started_once(servers, "killed")  # still one run per subtask, on the same server
    assert len(where) == 6 and {k: where[k] for k in before} == before
    actions = sorted(e["action"] for e in events if e["event"] == "remote")
    assert actions.count("joined") + actions.count("read") == len(before), actions
    assert actions.count("started") == 6 - len(before)
    status = status_of("killed")
    assert status["status"] == "done" and status["findings"] == 6


def _running(server: DevServer, task: str, n: int, timeout: float = 60) -> list[str]:
    """The ids of `n` runs of `task` running on `server` (waits for them)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        runs = [r for rs in server.runs_of(task).values() for r in rs]
        if len(runs) >= n and all(r["status"] == "running" for r in runs):
            return sorted(r["run_id"] for r in runs)
        time.sleep(0.2)
    raise AssertionError(f"{n} runs of {task} not running on {server.name}: {runs}")


def _flushed(server: DevServer, since: float, timeout: float = 30) -> None:
    """Wait until the dev runtime wrote its runs to disk after `since` (what a restart
    reads back; it writes every `remote_graphs.FLUSH_EVERY` seconds)."""
    ops = server.folder / ".langgraph_api" / ".langgraph_ops.pckl"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ops.exists() and ops.stat().st_mtime > since + 0.5:
            return
        time.sleep(0.1)
    raise AssertionError(f"{server.name} did not write {ops} in {timeout}s")


def test_a_server_killed_mid_phase_fails_its_subtasks_and_resume_joins_its_requeued_runs(
    servers, tmp_path, env
):
    a, b = servers
    repo = six_folders(tmp_path / "repo")
    gate = tmp_path / "gate"
    gate.mkdir()
    (gate / "release-A").touch()  # A's runs finish; B's work until release-B exists
    wf = workflow(tmp_path / "wf.yaml", [a.url, b.url], timeout="2")
    log = tmp_path / "run.log"
    with open(log, "w") as err:
        lead = subprocess.Popen(
            [*CMD, *run_args(repo, wf, "crash", f"Survey the parts hold={gate}")],
            env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=err, text=True,
        )  # fmt: skip
        try:
            on_b = _running(b, "crash", 3)
            _flushed(b, time.time())
            b.kill()
            out, _ = lead.communicate(timeout=90)
        finally:
            if lead.poll() is None:
                lead.kill()
    assert lead.returncode == 3, out + log.read_text()  # finished with failures
    status = status_of("crash")
    failed = sorted(status["failed"])
    assert len(failed) == 3 and status["findings"] == 3
    assert all(f"{b.url} unreachable" in status["errors"][k] for k in failed), status["errors"]
    assert all(status["subtasks"][k]["ran_on"]["server"] == b.url for k in failed)

    b.start()  # in its own folder: the dev runtime re-queues the runs it was running
    b.wait_ready()
    with open(log, "w") as err:
        resume = subprocess.Popen(
            [*CMD, "resume", "--task", "crash"],
            env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=err, text=True,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 60
            while log.read_text().count("joined remote run") < 3:
                assert resume.poll() is None and time.monotonic() < deadline, log.read_text()
                time.sleep(0.1)
            (gate / "release-B").touch()
            out, _ = resume.communicate(timeout=90)
        finally:
            if resume.poll() is None:
                resume.kill()
    assert resume.returncode == 0, out + log.read_text()
    assert "remote run started" not in log.read_text()  # nothing started again
    where = started_once([a, b], "crash")  # the requeued runs, joined: one run each
    assert sorted(k for k, name in where.items() if name == "B") == failed
    runs_b = sorted(r["run_id"] for rs in b.runs_of("crash").values() for r in rs)
    assert runs_b == on_b
    status = status_of("crash")
    assert status["status"] == "done" and status["findings"] == 6


def one_folder(root: Path) -> Path:
    (root / "deploy").mkdir(parents=True)
    (root / "deploy" / "deploy.py").write_text('"""Deploys the shop."""\n')
    return root


def test_a_remote_interrupt_makes_the_task_wait_and_approve_resumes_it_there(
    servers, tmp_path, env, memory_dir
):
    a = servers[0]
    repo = one_folder(tmp_path / "repo")
    wf = workflow(tmp_path / "wf.yaml", [a.url], graph="asks")
    paused = cli(*run_args(repo, wf, "ask", "Deploy the shop"), env=env)
    assert paused.returncode == 4, paused.stdout + paused.stderr
    [key] = a.runs_of("ask")  # the one subtask
    status = status_of("ask")
    assert status["status"] == "waiting"
    [request] = status["pending_approvals"]
    assert (request["tool"], request["args"]) == ("deploy", {"target": "staging"})
    where = status["subtasks"][key]["ran_on"]
    assert request["remote"] == f"{a.url} thread {where['thread_id']}"
    assert f'deploy({{"target": "staging"}})  on {a.url} thread' in paused.stdout

    assert Orchestrator().approve("ask").status == "done"  # as `orchestrator approve` does
    [runs] = a.runs_of("ask").values()
    assert [r["status"] for r in runs] == ["success", "success"]  # the run, then its resume
    text = next(memory_dir.glob("findings/researcher-*.md")).read_text()
    assert "Deploy done: ['approve']" in text
    shown = cli("status", "--task", "ask", env=env).stdout  # `asks` reports no token usage
    assert "Usage unknown: 1 remote subtask(s) reported no token usage" in shown
    assert status_of("ask")["usage_unknown"] == [key]


def test_a_failed_remote_run_fails_its_subagent_and_resume_retries_it_on_a_new_thread(
    servers, tmp_path, env
):
    a = servers[0]
    repo = six_folders(tmp_path / "repo")
    wf = workflow(tmp_path / "wf.yaml", [a.url], graph="flaky")
    failed = cli(*run_args(repo, wf, "flaky", "Survey the parts"), env=env)
    assert failed.returncode == 3, failed.stdout + failed.stderr
    status = status_of("flaky")
    assert len(status["failed"]) == 6
    assert all("flaky agent: first run of" in e for e in status["errors"].values())

    assert Orchestrator().resume("flaky").status == "done"
    runs = a.runs_of("flaky")
    assert {k: sorted(r["status"] for r in rs) for k, rs in runs.items()} == {
        k: ["error", "success"] for k in status["subtasks"]
    }  # attempt 1's errored run, attempt 2's on a thread of its own
    status = status_of("flaky")
    assert status["status"] == "done"
    assert {v["ran_on"]["attempt"] for v in status["subtasks"].values()} == {2}
