"""A read-only memory directory (`chmod -R a-w`, or another user's): reads work, writes refuse.

Through the console scripts, as a process that cannot write the directory (as root the
subprocess drops `CAP_DAC_OVERRIDE` with `setpriv`, so file modes apply): `memory search`,
`list`, `stats`, `fetch`, `orchestrator status` and `checkpoint report` succeed and search
says results may be stale; `memory log`, `orchestrator run`, `approve` and `handoff` print
one `Error:` line and exit 1; `resume` of its done task has nothing to resume (exit 0);
nothing in the directory changes.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

DROP = ["setpriv", "--bounding-set=-dac_override,-dac_read_search,-fowner", "--"]


def _run(args: list[str], env: dict, cwd: Path, unprivileged: bool = True):
    prefix = DROP if unprivileged and os.geteuid() == 0 else []
    tool, *rest = args
    boot = f"import sys; sys.argv[0] = {tool!r}; from {tool}.cli import main; main()"
    return subprocess.run(
        [*prefix, sys.executable, "-c", boot, *rest],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=120,
    )


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def frozen(tmp_path, memory_dir, cli_env):
    """A memory directory with a finished task and an entry, made read-only."""
    if os.geteuid() == 0 and shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: file modes cannot be enforced")
    work = tmp_path / "proj"
    work.mkdir()
    (work / "app.py").write_text("def handle_cookie():\n    return 1\n")
    done = _run(
        ["orchestrator", "run", "Survey the app", "--workdir", str(work)], cli_env, tmp_path
    )
    assert done.returncode == 0, done.stderr
    logged = _run(["memory", "log", "-q", "the flaky cookie test"], cli_env, tmp_path)
    entry_id = logged.stdout.strip()
    _run(["memory", "search", "warm up the index"], cli_env, tmp_path, unprivileged=False)
    subprocess.run(["chmod", "-R", "a-w", str(memory_dir)], check=True)
    before = _tree(memory_dir)
    yield entry_id, before
    subprocess.run(["chmod", "-R", "u+w", str(memory_dir)], check=True)


@pytest.mark.parametrize(
    "args",
    [
        ["memory", "list"],
        ["memory", "stats"],
        ["orchestrator", "status"],
        ["orchestrator", "checkpoint", "report"],
    ],
)
def test_reads_work_on_a_read_only_memory(frozen, args, cli_env, tmp_path, memory_dir):
    result = _run(args, cli_env, tmp_path)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert _tree(memory_dir) == frozen[1]


def test_search_and_fetch_read_and_say_results_may_be_stale(frozen, cli_env, tmp_path):
    entry_id, _ = frozen
    found = _run(["memory", "search", "flaky cookie"], cli_env, tmp_path)
    assert found.returncode == 0 and entry_id in found.stdout
    assert "may be stale" in found.stderr
    fetched = _run(["memory", "fetch", entry_id], cli_env, tmp_path)
    assert fetched.stdout == "the flaky cookie test"


@pytest.mark.parametrize(
    "args",
    [
        ["memory", "log", "more"],
        ["orchestrator", "run", "Another survey"],
        ["orchestrator", "approve"],
        ["orchestrator", "handoff"],
    ],
)
def test_writes_get_one_error_line(frozen, args, cli_env, tmp_path, memory_dir):
    result = _run(args, cli_env, tmp_path)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and "read-only" in lines[0]
    assert str(memory_dir) in lines[0]
    assert _tree(memory_dir) == frozen[1]


def test_resume_of_its_done_task_has_nothing_to_resume(frozen, cli_env, tmp_path, memory_dir):
    result = _run(["orchestrator", "resume"], cli_env, tmp_path)
    assert result.returncode == 0, result.stderr
    assert "done; nothing to resume" in result.stdout
    assert _tree(memory_dir) == frozen[1]
