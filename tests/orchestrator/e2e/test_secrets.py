"""Credentials in URLs are never printed or stored (issue 42 items 14, 15): a model's base
URL with a password in it, a PostgreSQL password given as `?password=` or holding an
unencoded `@`.

Each command runs in its own process, as a user's shell runs it; afterwards every byte the
command printed and every file of the memory (LangGraph's database included) is searched
for the secret.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.orchestrator.openai_server import ScriptedOpenAI
from tests.pg import private_schema

REPO = Path(__file__).parents[3]
CMD = [sys.executable, "-m", "orchestrator.cli"]


def orchestrator(*args: str, env: dict, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*CMD, *args], env=env, capture_output=True, text=True, timeout=180, cwd=cwd
    )


def stored_anywhere(root: Path, secret: bytes) -> list[str]:
    return [str(p) for p in root.rglob("*") if p.is_file() and secret in p.read_bytes()]


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def project(tmp_path, cli_env):
    work = tmp_path / "work"
    work.mkdir()
    (work / "README.md").write_text("# Shop\nA shop.\n")
    env = {**cli_env, "TETHER_ALLOW_MODEL_REQUESTS": "1", "OPENAI_API_KEY": "sk-test"}
    return work, env


def test_a_password_in_the_models_base_url_is_never_shown_or_stored(project, memory_dir):
    """Item 14: a provider that fails (HTTP 500, retried with warnings) and one that cannot
    be reached, both behind `http://bob:hunter2pass@...`."""
    work, env = project
    with ScriptedOpenAI(responder=lambda body: {"status": 500}) as server:
        url = server.base_url.replace("http://", "http://bob:hunter2pass@")
        failing = orchestrator(
            "run", "Survey", "--task", "s1", "--workdir", str(work), "--model",
            "openai:gpt-4o-mini", env={**env, "OPENAI_BASE_URL": url},
        )  # fmt: skip
    unreachable = orchestrator(
        "run", "Survey", "--task", "s2", "--workdir", str(work), "--model", "openai:gpt-4o-mini",
        env={**env, "OPENAI_BASE_URL": f"http://bob:hunter2pass@127.0.0.1:{closed_port()}/v1"},
    )  # fmt: skip
    assert failing.returncode == 3 and unreachable.returncode == 5, failing.stderr
    assert "retrying in" in failing.stderr and "http://***@127.0.0.1:" in failing.stderr
    for done in (failing, unreachable):
        assert "hunter2pass" not in done.stdout + done.stderr
    status = orchestrator("status", "--task", "s2", "--json", env=env)
    assert "http://***@127.0.0.1:" in status.stdout and "hunter2pass" not in status.stdout
    assert stored_anywhere(memory_dir, b"hunter2pass") == []


@pytest.mark.parametrize(
    ("url", "secret"),
    [
        ("postgresql://127.0.0.1:{port}/test?password=s3cretpw&sslmode=disable", "s3cretpw"),
        ("postgresql://bob:pa@ss3cret@127.0.0.1:{port}/test", "ss3cret"),
    ],
)
def test_a_postgres_password_is_hidden_in_errors(project, url, secret):
    """Item 15: `?password=` was shown whole, and an unencoded `@` leaked the tail."""
    _work, env = project
    done = orchestrator("status", "--memory-url", url.format(port=closed_port()), env=env)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), lines
    assert secret not in lines[0] and "***" in lines[0]


def test_a_postgres_password_is_hidden_in_the_run_report(project, tmp_path):
    """Item 15: the `Memory:` and `Hand off:` lines of a run on PostgreSQL (a done task's
    report has no `Resume:` line)."""
    work, env = project
    with private_schema() as url:
        secret_url = url + "&password=hunter2pg"
        done = orchestrator(
            "run", "Survey", "--task", "pgs", "--workdir", str(work), "--memory-url",
            secret_url, "--model", "offline", env=env,
        )  # fmt: skip
        status = orchestrator("status", "--task", "pgs", "--memory-url", secret_url, env=env)
    assert done.returncode == 0, done.stderr
    report = {line.split(":", 1)[0]: line for line in done.stdout.splitlines() if ":" in line}
    for label in ("Memory", "Hand off"):
        assert "password=***" in report[label], report[label]
    assert "hunter2pg" not in done.stdout + done.stderr + status.stdout + status.stderr
