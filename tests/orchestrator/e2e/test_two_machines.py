"""Two machines, one task on PostgreSQL (`--memory-url` / `TETHER_MEMORY_URL`).

Two processes share nothing but the database: each has its own working directory and `HOME`,
and neither writes a memory directory (every document goes through the backend). Machine A
runs a task and
is SIGKILLed as its 2nd phase spawns subagents; machine B then sees the task in `orchestrator
status`, finds A's findings with `memory search`, and `orchestrator resume`s it to the end.
Nothing is lost (every planned subagent has its findings) and nothing runs twice (one
findings document per subagent; the subagents A finished are not started again by B), and
while another machine holds the task's run lock, `resume` refuses with one line.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

from tests.pg import private_schema

BOOT = "import sys; sys.argv[0] = {0!r}; from {0}.cli import main; main()"


def _machine(tmp_path: Path, name: str, url: str) -> tuple[Path, dict]:
    home = tmp_path / name
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "TETHER_MEMORY_DIR"}
    env.update(HOME=str(home), TETHER_MEMORY_URL=url)
    return home, env


def _cli(tool: str, args: list[str], home: Path, env: dict, **extra: str):
    return subprocess.run(
        [sys.executable, "-c", BOOT.format(tool), *args],
        cwd=home,
        env={**env, **extra},
        capture_output=True,
        text=True,
        timeout=180,
    )


def _findings(url: str) -> list[str]:
    import psycopg

    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT path FROM tether_documents WHERE path LIKE 'findings/researcher-%'"
        ).fetchall()
    return sorted(re.sub(r"^findings/researcher-|_\d{8}T\d+Z\.md$", "", r[0]) for r in rows)


@contextmanager
def _held(url: str, task_id: str):
    """The task's run lock, held as a process running it on a third machine holds it."""
    from memory.backends.postgres import PostgresBackend
    from orchestrator.artifacts.documents import Docs

    with PostgresBackend.open(url) as backend, Docs(backend).run_lock(task_id):
        yield


def test_a_task_started_on_one_machine_is_finished_on_another(tmp_path, fixture_repo):
    with private_schema() as url:
        a_home, a_env = _machine(tmp_path, "a", url)
        b_home, b_env = _machine(tmp_path, "b", url)
        # Killed as the 2nd phase spawns its subagents: the 1st phase's are recorded done.
        run = ["run", "Survey the shop service", "--workdir", str(fixture_repo)]
        killed = _cli("orchestrator", run, a_home, a_env, TETHER_FAULT="spawn_after_checkpoint:2")
        assert killed.returncode == -9, killed.stderr
        done_on_a = _findings(url)
        assert done_on_a and all(f.startswith("exploration-") for f in done_on_a)

        status = _cli("orchestrator", ["status"], b_home, b_env)
        assert status.returncode == 0, status.stderr
        task_id = re.search(r"Task (\S+):", status.stdout).group(1)
        assert "Survey the shop service" in status.stdout

        found = _cli("memory", ["search", "shop", "--json"], b_home, b_env)
        assert found.returncode == 0 and '"findings/researcher-' in found.stdout

        with _held(url, task_id):  # as if a third machine were running it
            refused = _cli("orchestrator", ["resume"], b_home, b_env)
        assert refused.returncode == 1 and "is already running" in refused.stderr
        assert _findings(url) == done_on_a

        resumed = _cli("orchestrator", ["resume"], b_home, b_env)
        assert resumed.returncode == 0, resumed.stderr
        started_on_b = re.findall(
            r"agent \S+/(\S+) \[\w+\]: running", resumed.stderr + resumed.stdout
        )
        finished = _findings(url)
        a_status = _cli("orchestrator", ["status", "--task", task_id], a_home, a_env)

    assert started_on_b and not set(started_on_b) & set(done_on_a)  # nothing run twice
    assert all(finished.count(name) == 1 for name in done_on_a)
    assert set(started_on_b) <= set(finished)  # nothing lost
    assert "0 failed" in a_status.stdout
    assert f"Task {task_id}: done" in a_status.stdout  # A sees B's work after pulling
    for home in (a_home, b_home):  # no memory directory, no local graph state
        assert not (home / ".temp").exists()


def test_an_unreachable_server_is_one_error_line_without_the_password(tmp_path):
    home, env = _machine(tmp_path, "c", "postgresql://tether:s3cret@127.0.0.1:1/tether")
    result = _cli("orchestrator", ["status"], home, env)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: cannot connect to ")
    assert "tether:***@127.0.0.1:1" in lines[0] and "s3cret" not in lines[0]
