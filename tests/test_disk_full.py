"""A full disk: one `Error:` line, nothing damaged, and the work goes on once there is space.

The attack, reproducible: a 32 MiB tmpfs holds the memory directory and is filled up to a
few KB of free space before a command runs (tmpfs needs root and `CAP_SYS_ADMIN`; where it
cannot be mounted the tests are skipped and say why). At each level:

* `memory log` of an inline, a file and a chunked entry either stores it or prints one
  `Error: disk full ...` line (never SQLite's "cannot rollback - no transaction is active",
  which hid the cause); the journal keeps only whole lines, no entry folder is left behind,
  `memory.db` passes `PRAGMA integrity_check`, and the same command works after space is
  freed;
* `orchestrator run` ends with one `Error:` line (no traceback), and after space is freed
  `orchestrator resume` finishes the task (or, when the disk was too full to record the task
  at all, the same `orchestrator run` does);
* an append that the disk cuts short is cut back, and its message says the file is as it was.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys

import pytest

from memory import MemoryStore, durable
from memory.errors import MemoryRuntimeError

DISK_KB = 32 * 1024  # a whole offline run (LangGraph's WAL included) fits


@pytest.fixture
def disk(tmp_path):
    """A small tmpfs at `tmp_path/disk`, unmounted after the test."""
    point = tmp_path / "disk"
    point.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("a tmpfs can only be mounted as root (this attack needs a small disk)")
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={DISK_KB}k", "tmpfs", str(point)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({mounted.stderr.strip()}); needs CAP_SYS_ADMIN")
    try:
        yield point
    finally:
        subprocess.run(["umount", "-l", str(point)], check=False)


def fill(disk, free_kb: int) -> None:
    """Leave about `free_kb` KB free on `disk` (a filler file takes the rest)."""
    filler = disk / "filler"
    filler.unlink(missing_ok=True)
    stat = os.statvfs(disk)
    left = max(stat.f_bavail * stat.f_frsize - free_kb * 1024, 0)
    with open(filler, "wb") as fh:
        while left > 0:
            try:
                left -= fh.write(b"\0" * min(1 << 16, left))
                fh.flush()
            except OSError:  # full: as good as filled
                break


def free_up(disk) -> None:
    (disk / "filler").unlink(missing_ok=True)


def _run(tool, args, env, cwd):
    boot = f"import sys; sys.argv[0] = {tool!r}; from {tool}.cli import main; main()"
    return subprocess.run(
        [sys.executable, "-c", boot, *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=300,
    )


def _integrity(db) -> str:
    conn = sqlite3.connect(db)
    try:
        return conn.execute("PRAGMA integrity_check").fetchone()[0]
    finally:
        conn.close()


def _one_error_line(done) -> str:
    assert done.returncode == 1, (done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("Error: ")]
    assert len(errors) == 1 and done.stderr.rstrip().endswith(errors[0]), done.stderr
    return errors[0]


PAYLOADS = {"inline": "x " * 100, "file": "x " * 3000, "chunked": "x " * 30000}


@pytest.mark.parametrize("free_kb", [0, 32, 48, 64])
def test_memory_log_on_a_full_disk(disk, free_kb, cli_env, tmp_path):
    memory = disk / "memory"
    env = {**cli_env, "TETHER_MEMORY_DIR": str(memory)}
    with MemoryStore(memory) as store:
        first = store.log("stored before the disk filled up").id
    for tier, payload in PAYLOADS.items():
        (tmp_path / "payload.txt").write_text(payload)
        fill(disk, free_kb)
        done = _run("memory", ["log", "--file", str(tmp_path / "payload.txt")], env, tmp_path)
        if done.returncode != 0:
            line = _one_error_line(done)
            assert line.startswith("Error: disk full while writing "), (tier, line)
            assert "cannot rollback" not in done.stderr
        free_up(disk)
        journal = durable.read_jsonl(memory / "entries" / "journal.jsonl")
        assert journal.bad_lines == [], (tier, free_kb)
        assert _integrity(memory / "memory.db") == "ok"
        with MemoryStore(memory) as store:
            ids = {e.id for e in store.list_entries(limit=None)}
            assert first in ids
            folders = {p.name for p in (memory / "entries").iterdir() if p.name.startswith("mem-")}
            assert folders <= ids, (tier, free_kb, folders - ids)  # no folder left behind
            store.log(payload)  # and it works again


@pytest.mark.parametrize("free_kb", [32, 512])
def test_orchestrator_run_on_a_full_disk_then_resume(disk, free_kb, cli_env, tmp_path):
    memory = disk / "memory"
    env = {**cli_env, "TETHER_MEMORY_DIR": str(memory)}
    work = tmp_path / "proj"
    work.mkdir()
    (work / "app.py").write_text("def handle_cookie():\n    return 1\n")
    fill(disk, free_kb)
    args = ["run", "Survey the app", "--workdir", str(work), "--task", "t1"]
    done = _run("orchestrator", args, env, tmp_path)
    _one_error_line(done)
    free_up(disk)
    recorded = (memory / ".tether" / "records" / "tasks" / "t1.json").exists()
    if recorded or free_kb > 32:  # with 32 KB the task's record may not fit: run it again
        again = _run("orchestrator", ["resume", "--task", "t1"], env, tmp_path)
    else:
        again = _run("orchestrator", args, env, tmp_path)
    assert again.returncode == 0, again.stderr
    assert again.stdout.startswith("Task t1: done")
    assert _integrity(memory / "memory.db") == "ok"
    assert _integrity(memory / ".langgraph" / "state.sqlite") == "ok"


def test_an_append_cut_short_by_the_disk_leaves_the_file_as_it_was(disk):
    log = disk / "messages.jsonl"
    durable.append_jsonl(log, {"role": "user", "content": "before"})
    before = log.read_bytes()
    fill(disk, 8)
    with pytest.raises(MemoryRuntimeError) as caught:
        durable.append_jsonl(log, {"role": "tool", "content": "y" * (64 * 1024)})
    assert str(caught.value) == (
        f"disk full while writing {str(log)!r}: free space and retry; the file is as it was"
    )
    assert log.read_bytes() == before
    free_up(disk)
    assert durable.append_jsonl(log, {"role": "user", "content": "after"}) == 2
