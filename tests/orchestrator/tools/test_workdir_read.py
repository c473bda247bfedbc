"""The read tools and the files a run reads at start under attack (issue 42): names that
are not UTF-8, FIFOs and devices, huge files, NUL bytes behind a text suffix.

Hanging reads are run in a daemon thread (or a subprocess with a memory limit), so a
regression fails the test instead of hanging or exhausting the machine.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

from orchestrator.tools.workdir import WorkdirFiles

REPO = Path(__file__).parents[3]
CMD = [sys.executable, "-m", "orchestrator.cli"]


def _in_thread(fn, *args) -> tuple[bool, object]:
    """`(finished within 10 s, its result or exception)`."""
    box: dict = {}

    def target():
        try:
            box["out"] = fn(*args)
        except Exception as exc:  # noqa: BLE001 - the test looks at it
            box["out"] = exc

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(10)
    return not t.is_alive(), box.get("out")


def _release(fifo: Path) -> None:
    """Unblock a reader stuck on `fifo` (the code before the fix)."""
    try:
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    except OSError:
        pass


def _python(
    code: str, *, memory_mb: int = 1024, timeout: float = 60
) -> subprocess.CompletedProcess:
    """`code` in a fresh interpreter limited to `memory_mb` of address space."""
    limit = f"import resource; resource.setrlimit(resource.RLIMIT_AS, ({memory_mb} << 20,) * 2)\n"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-c", limit + code], capture_output=True, text=True, timeout=60,
        env=env, cwd=REPO,
    )  # fmt: skip


def test_a_file_name_that_is_not_utf8_is_shown_escaped_and_the_run_finishes(tmp_path, cli_env):
    """Item 3: one such name used to crash every run and resume with a traceback."""
    work = tmp_path / "work"
    (work / "src").mkdir(parents=True)
    (work / "README.md").write_text("# Shop\nA shop.\n")
    with open(os.fsencode(work / "src") + b"/caf\xe9.py", "w") as fh:
        fh.write("def brew():\n    return 'coffee'\n")
    listing = WorkdirFiles(work).list_files("src")
    assert "src/caf\\xe9.py (" in listing
    listing.encode("utf-8")  # no lone surrogate left in the answer
    run = subprocess.run(
        [*CMD, "run", "Survey the shop", "--task", "names", "--workdir", str(work)],
        env=cli_env, capture_output=True, text=True, timeout=180, cwd=REPO,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    assert "Traceback" not in run.stderr
    assert "Task names: done" in run.stdout


def test_read_file_on_a_fifo_answers_at_once(tmp_path):
    """Item 8: `read_file` on a FIFO used to block the run (SIGINT and SIGTERM ignored)."""
    fifo = tmp_path / "pipe.txt"
    os.mkfifo(fifo)
    files = WorkdirFiles(tmp_path)
    done, out = _in_thread(files.read_file, "pipe.txt")
    if not done:
        _release(fifo)
    assert done, "read_file blocked on the FIFO"
    assert out == "Error: 'pipe.txt' is not a regular file (a FIFO, device or socket)"


def test_a_gitignore_that_is_a_fifo_does_not_hang_the_workdir_tools(tmp_path):
    """Item 8: the workdir's `.gitignore` is read when its tools are built (every run)."""
    (tmp_path / "a.md").write_text("# A\n")
    os.mkfifo(tmp_path / ".gitignore")
    done, out = _in_thread(WorkdirFiles, tmp_path)
    if not done:
        _release(tmp_path / ".gitignore")
    assert done, "building the workdir tools blocked on .gitignore"
    assert "a.md (4 bytes)" in out.list_files()


def test_a_gitignore_linked_to_dev_zero_is_not_read(tmp_path):
    """Item 8: a `.gitignore` symlinked to `/dev/zero` was read outside the workdir without a
    limit (MemoryError); now it is left out, like one that resolves outside."""
    (tmp_path / "a.md").write_text("# A\n")
    (tmp_path / ".gitignore").symlink_to("/dev/zero")
    done = _python(
        "from orchestrator.tools.workdir import WorkdirFiles\n"
        f"print(WorkdirFiles({str(tmp_path)!r}).list_files())\n"
    )
    assert done.returncode == 0, done.stderr[-1000:]
    assert "a.md (4 bytes)" in done.stdout


def test_a_skill_file_that_is_a_fifo_or_a_device_is_one_error_line(tmp_path, cli_env):
    """Item 8: a project's `skills/*/SKILL.md` that is a FIFO hung every run at start; one
    linked to `/dev/zero` exhausted memory. Both are one `Error:` line now, at once."""
    (tmp_path / "a.md").write_text("# A\n")
    (tmp_path / "skills" / "pipe").mkdir(parents=True)
    os.mkfifo(tmp_path / "skills" / "pipe" / "SKILL.md")
    (tmp_path / "skills" / "zero").mkdir()
    (tmp_path / "skills" / "zero" / "SKILL.md").symlink_to("/dev/zero")
    for bad, why in (("pipe", "not a regular file"), ("zero", "resolves outside")):
        other = "zero" if bad == "pipe" else "pipe"
        hidden = tmp_path / "skills" / f".{other}"
        (tmp_path / "skills" / other).rename(hidden)
        try:
            run = subprocess.run(
                [*CMD, "run", "Survey", "--workdir", str(tmp_path)], env=cli_env,
                capture_output=True, text=True, timeout=60, cwd=tmp_path,
            )  # fmt: skip
        finally:
            hidden.rename(tmp_path / "skills" / other)
        assert run.returncode == 1, run.stderr[-1000:]
        lines = run.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("Error: "), lines
        assert f"skills/{bad}/SKILL.md" in lines[0] and why in lines[0]


def test_a_huge_one_line_file_is_read_in_bounded_memory(tmp_path):
    """Item 9: a whole line was held before it was cut (a 2 GB file cost 4 GB of RSS)."""
    big = tmp_path / "big.txt"
    with open(big, "wb") as fh:
        for _ in range(160):
            fh.write(b"x" * (1 << 20))  # 160 MiB, one line
        fh.write(b"\nlast line\n")
    done = _python(
        "import resource\n"
        "from orchestrator.tools.workdir import WorkdirFiles\n"
        f"files = WorkdirFiles({str(tmp_path)!r})\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "out = files.read_file('big.txt', max_lines=1)\n"
        "grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before\n"
        "print(out.splitlines()[0]); print(len(out)); print(grown // 1024)\n",
        memory_mb=2048,
    )
    assert done.returncode == 0, done.stderr[-1000:]
    header, length, grown_mb = done.stdout.split("\n")[:3]
    assert header == "# big.txt (lines 1-1 of 2)"
    assert int(length) < 1000
    assert int(grown_mb) < 40, f"read_file grew the process by {grown_mb} MiB"


def test_a_huge_file_of_short_lines_is_counted_only_so_far(tmp_path):
    """Item 9: every line of the file was counted before `read_file` answered; past
    `COUNT_CHARS` the header says "at least"."""
    big = tmp_path / "log.txt"
    line = b"2026-01-01 12:00:00 request served in 3 ms\n"
    with open(big, "wb") as fh:
        fh.write(line * ((48 << 20) // len(line)))  # 48 MiB of short lines
    out = WorkdirFiles(tmp_path).read_file("log.txt", max_lines=2)
    head = out.splitlines()[0]
    assert head.startswith("# log.txt (lines 1-2 of at least ") and head.endswith(")")
    assert out.splitlines()[-1].startswith("# ... at least ")
    assert out.endswith(" more lines: call read_file with start_line=3")


def test_nul_bytes_behind_a_text_suffix_are_binary(tmp_path):
    """Item 9: `.txt` and `.py` files were taken as text without looking inside."""
    (tmp_path / "dump.txt").write_bytes(b"header\x00\x01\x02binary")
    (tmp_path / "ok.py").write_text("x = 1\n")
    files = WorkdirFiles(tmp_path)
    assert files.read_file("dump.txt") == (
        "Error: 'dump.txt' is a binary file: read_file shows text files only"
    )
    assert files.read_file("ok.py") == "# ok.py (lines 1-1 of 1)\n1: x = 1"
