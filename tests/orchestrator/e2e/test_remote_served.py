"""tether's own subagent graph (`tether_subagent`) served by a real `langgraph dev` on
PostgreSQL: a task's subagents run on the server, their findings land in the shared memory
once (also when the server runs one again); a payload of a task the server's memory does
not hold is refused by the server; a task on another PostgreSQL memory (the lead asks the
server which memory it writes into) or on a directory is refused by the lead, each with one
line and before anything starts. (A remote run's error failing its subagent is
`test_remote.py`'s.)

The lead is `orchestrator run` with the offline model on the server's PostgreSQL memory
(a private schema); the server runs the task's subagents with the task's recorded model.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from orchestrator import Orchestrator
from tests.orchestrator.conftest import build_repo
from tests.orchestrator.dev_servers import REPO, DevServer
from tests.pg import private_schema

CMD = [sys.executable, "-m", "orchestrator.cli"]


def cli(*args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([*CMD, *args], env=env, capture_output=True, text=True, cwd=REPO)


def _findings(url: str) -> list[str]:
    import psycopg

    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT path FROM tether_documents WHERE path LIKE 'findings/researcher-%'"
        ).fetchall()
    return sorted(r[0] for r in rows)


def test_the_served_subagent_graph_writes_each_finding_once_in_the_shared_memory(tmp_path, cli_env):
    repo = build_repo(tmp_path / "repo")
    with private_schema() as url:
        server = DevServer(tmp_path / "server", "S", env={"TETHER_MEMORY_URL": url}).start()
        try:
            server.wait_ready()
            wf = tmp_path / "wf.yaml"
            wf.write_text(
                "name: served\nphases: [exploration]\nagents:\n  researcher:\n"
                f"    remote: {{url: {server.url}, graph: tether_subagent}}\n"
            )
            env = {**cli_env, "PYTHONPATH": str(REPO)}
            args = ["--workdir", str(repo), "--workflow", str(wf)]
            done = cli("run", "Survey the shop", "--task", "served", "--memory-url", url, *args,
                       env=env)  # fmt: skip
            assert done.returncode == 0, done.stdout + done.stderr
            written = _findings(url)
            runs = server.runs_of("served")
            assert len(written) == len(runs) == 3  # one file per subtask, written by the server
            assert all([r["status"] for r in rs] == ["success"] for rs in runs.values())
            with Orchestrator(memory_url=url) as orch:  # `status --json`, in this process
                status = orch.status("served")
            assert status["status"] == "done" and status["findings"] == 3
            assert {v["ran_on"]["graph"] for v in status["subtasks"].values()} == {
                "tether_subagent"
            }

            # the server runs a subtask again (as after a worker died): the same finding, no
            # second file
            client = server.client()
            [thread] = client.threads.search(metadata={"tether_task": "served"}, limit=1)
            payload = client.runs.list(thread["thread_id"])[0]["kwargs"]["input"]
            again = client.runs.wait(None, "tether_subagent", input=payload)
            assert again["finding"]["path"] in written
            assert _findings(url) == written

            # a task this memory does not hold (another memory's, even of the same id: it was
            # recorded at another time): refused by the server in one line, before its
            # subagent does anything
            for task, other in (("elsewhere", {}), ("served", {"task_created": "2020-01-01"})):
                refused = client.runs.wait(
                    None,
                    "tether_subagent",
                    input={**payload, "task_id": task, **other},
                    raise_error=False,
                )
                error = refused["__error__"]
                assert error["error"] == "OrchestratorUserError"
                assert error["message"].startswith(
                    f"task {task!r} is not a task of this server's memory"
                )
                assert "\n" not in error["message"]
            assert _findings(url) == written

            # a task on another PostgreSQL memory: the lead asks the server which memory it
            # writes into and refuses in one line before the task is recorded or planned
            with private_schema() as other:
                refused = cli("run", "Survey", "--task", "elsewhere-pg", "--memory-url", other,
                              *args, env=env)  # fmt: skip
                assert refused.returncode == 1, refused.stdout + refused.stderr
                [line] = refused.stderr.strip().splitlines()
                assert line.startswith("Error: agent 'researcher' runs 'tether_subagent' on ")
                assert "whose memory is not this task's" in line, line
                with Orchestrator(memory_url=other) as orch:
                    assert orch.tasks.records() == {}  # nothing recorded
                assert server.runs_of("elsewhere-pg") == {}  # no subtask was sent
        finally:
            server.stop()

    # a task whose memory is a directory: refused by the lead, before anything is written
    memory = tmp_path / "files-memory"
    files = cli("run", "Survey", "--memory-dir", str(memory), *args, env=env)
    assert files.returncode == 1
    [line] = files.stderr.strip().splitlines()
    assert line.startswith("Error: ") and "runs 'tether_subagent'" in line, line
    assert not Path(memory).exists()


def _tether_tables(url: str) -> list[str]:
    import psycopg

    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT table_name FROM information_schema.tables "
            "WHERE table_schema = current_schema() AND table_name LIKE 'tether%'"
        ).fetchall()
    return sorted(r[0] for r in rows)


def test_a_server_on_a_fresh_postgresql_is_another_memory_refused_before_anything(
    tmp_path, cli_env
):
    """The server's database has no tether tables: its probe says so (creating nothing),
    and the lead refuses the task in one line before recording or planning it."""
    repo = build_repo(tmp_path / "repo")
    with private_schema() as fresh, private_schema() as ours:
        server = DevServer(tmp_path / "server", "F", env={"TETHER_MEMORY_URL": fresh}).start()
        try:
            server.wait_ready()
            wf = tmp_path / "wf.yaml"
            wf.write_text(
                "name: served\nphases: [exploration]\nagents:\n  researcher:\n"
                f"    remote: {{url: {server.url}, graph: tether_subagent}}\n"
            )
            env = {**cli_env, "PYTHONPATH": str(REPO)}
            refused = cli("run", "Survey", "--task", "fresh", "--memory-url", ours,
                          "--workdir", str(repo), "--workflow", str(wf), env=env)  # fmt: skip
            assert refused.returncode == 1, refused.stdout + refused.stderr
            [line] = refused.stderr.strip().splitlines()
            assert line.startswith("Error: agent 'researcher' runs 'tether_subagent' on ")
            assert "whose memory is not this task's" in line, line
            with Orchestrator(memory_url=ours) as orch:
                assert orch.tasks.records() == {}  # nothing recorded
            assert server.runs_of("fresh") == {}  # no subtask was sent
            assert _tether_tables(fresh) == []  # the probe created nothing
        finally:
            server.stop()
