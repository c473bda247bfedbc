"""`memory.durable` under crashes: a writer killed with SIGKILL never leaves a torn file.

A child process rewrites a 2 MB file atomically and appends big jsonl lines in a loop; the
parent kills it at a random instant, 30 times, and checks after each kill that the file is
exactly one complete version and that the jsonl reader returns only intact records, skipping
(and reporting) a torn last line. Deterministic tests pin the torn-tail contract.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from memory.durable import (
    append_jsonl,
    atomic_write_bytes,
    atomic_write_json,
    create_exclusive,
    iter_jsonl_lines,
    read_jsonl,
)
from memory.errors import MemoryRuntimeError

KILLS = 30
BIG_PAD = 200_000
SMALL_PAD = 5_000

CHILD = (
    textwrap.dedent(
        """
    import sys
    from pathlib import Path
    from memory.durable import append_jsonl, atomic_write_bytes

    target, log, k = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])

    def version(k):
        return f"version {k}\\n".encode() + bytes([65 + k % 26]) * 2_000_000

    print("ready", flush=True)
    while True:
        atomic_write_bytes(target, version(k))
        append_jsonl(log, {"k": k, "pad": "x" * BIG_PAD})
        append_jsonl(log, [{"k": k, "i": i, "pad": "y" * SMALL_PAD} for i in range(20)], many=True)
        k += 1
    """
    )
    .replace("BIG_PAD", str(BIG_PAD))
    .replace("SMALL_PAD", str(SMALL_PAD))
)


def version(k: int) -> bytes:
    return f"version {k}\n".encode() + bytes([65 + k % 26]) * 2_000_000


def check_target(target: Path) -> int:
    data = target.read_bytes()
    header = data.split(b"\n", 1)[0].decode()
    k = int(header.removeprefix("version "))
    assert data == version(k), f"torn or mixed content in {target} (header {header!r})"
    return k


def check_log(log: Path) -> tuple[int, bool]:
    if not log.exists():  # killed before its first append (a loaded machine starts slowly)
        return 0, False
    result = read_jsonl(log)
    for _, record in result.records:
        expected = BIG_PAD if "i" not in record else SMALL_PAD
        assert len(record["pad"]) == expected, "a record was cut but still parsed"
    raw_lines = log.read_bytes().split(b"\n")
    for number in result.bad_lines:  # every bad line is a torn prefix of a real record
        assert raw_lines[number - 1].startswith(b'{"k":'), raw_lines[number - 1][:40]
    ends_clean = log.read_bytes().endswith(b"\n")
    assert result.torn_tail == (not ends_clean)
    return len(result.bad_lines), result.torn_tail


def test_sigkill_loop_never_leaves_a_torn_file(tmp_path):
    target, log = tmp_path / "state.bin", tmp_path / "log.jsonl"
    atomic_write_bytes(target, version(0))
    rng = random.Random(1234)
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    k = 1
    for _ in range(KILLS):
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD, str(target), str(log), str(k)],
            stdout=subprocess.PIPE,
            env=env,
        )
        assert child.stdout.readline() == b"ready\n"
        time.sleep(rng.uniform(0.0, 0.06))
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=10)
        k = max(k, check_target(target)) + 1
        check_log(log)
    visible = sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("."))
    assert visible == ["log.jsonl", "state.bin"]
    # after all the kills, appends still produce good, correctly numbered lines
    line = append_jsonl(log, {"k": -1, "i": 0, "pad": "y" * SMALL_PAD})
    result = read_jsonl(log)
    assert result.records[-1] == (line, {"k": -1, "i": 0, "pad": "y" * SMALL_PAD})
    assert not result.torn_tail


def test_reader_skips_and_reports_a_torn_last_line(tmp_path):
    log = tmp_path / "messages.jsonl"
    atomic_write_bytes(log, b'{"n":1}\n{"n":2}\n{"n":3, "te')
    result = read_jsonl(log)
    assert result.records == [(1, {"n": 1}), (2, {"n": 2})]
    assert result.bad_lines == [3] and result.torn_tail
    assert [n for n, _, _ in iter_jsonl_lines(log)] == [1, 2]


def test_append_after_a_torn_tail_keeps_line_numbers_true(tmp_path):
    log = tmp_path / "messages.jsonl"
    atomic_write_bytes(log, b'{"n":1}\n{"n":2, "tor')
    line = append_jsonl(log, {"n": 3})
    assert log.read_bytes() == b'{"n":1}\n{"n":2, "tor\n{"n":3}\n'
    result = read_jsonl(log)
    assert result.records == [(1, {"n": 1}), (3, {"n": 3})]
    assert result.bad_lines == [2] and not result.torn_tail
    assert line == 3  # the citation `messages.jsonl#L3` must point at the new record


def test_atomic_json_and_append_line_numbers(tmp_path):
    path = tmp_path / "cp.json"
    atomic_write_json(path, {"text": 'quote " newline \n unicode é 😀 {{ x }}'})
    assert json.loads(path.read_text("utf-8"))["text"] == 'quote " newline \n unicode é 😀 {{ x }}'
    log = tmp_path / "a.jsonl"
    assert append_jsonl(log, {"a": 1}) == 1
    assert append_jsonl(log, [{"b": 2}, {"c": 3}], many=True) == 2
    assert append_jsonl(log, {"d": 4}) == 4
    assert [n for n, _ in read_jsonl(log).records] == [1, 2, 3, 4]


def test_writes_create_missing_folders_and_name_a_file_in_the_way(tmp_path):
    atomic_write_bytes(tmp_path / "a" / "b" / "x.md", b"x")
    assert create_exclusive(tmp_path / "c" / "d" / "y.md", b"y")
    assert not create_exclusive(tmp_path / "c" / "d" / "y.md", b"other")
    assert append_jsonl(tmp_path / "e" / "f" / "z.jsonl", {"z": 1}) == 1
    assert (tmp_path / "a/b/x.md").read_bytes() == b"x"
    assert (tmp_path / "c/d/y.md").read_bytes() == b"y"
    assert read_jsonl(tmp_path / "e/f/z.jsonl").records == [(1, {"z": 1})]
    (tmp_path / "file").write_text("in the way")
    for write in (
        lambda: atomic_write_bytes(tmp_path / "file" / "x.md", b"x"),
        lambda: create_exclusive(tmp_path / "file" / "y.md", b"y"),
        lambda: append_jsonl(tmp_path / "file" / "z.jsonl", {"z": 1}),
    ):
        with pytest.raises(MemoryRuntimeError, match=r"^cannot write .*file/"):
            write()
    assert (tmp_path / "file").read_text() == "in the way"
    hidden = [p.name for p in tmp_path.rglob(".*")]
    assert hidden == [".z.jsonl.lock"]  # no temp file is left behind


def _append_numbered(log: Path, who: str, count: int) -> list[int]:
    return [append_jsonl(log, {"who": who, "i": i}) for i in range(count)]


def _check_numbers(log: Path, returned: dict[str, list[int]]) -> None:
    """Every returned line number points at the record its call appended."""
    records = dict(read_jsonl(log).records)
    assert len(records) == sum(len(v) for v in returned.values())
    for who, numbers in returned.items():
        assert [(records[n]["who"], records[n]["i"]) for n in numbers] == [
            (who, i) for i in range(len(numbers))
        ]


def test_appends_of_a_forked_child_and_its_parent_exclude_each_other(tmp_path):
    # the parent has appended (and holds its lock file open) before forking: the child
    # must lock on its own, or both count the same lines and return the same numbers
    log = tmp_path / "log.jsonl"
    first = append_jsonl(log, {"who": "start", "i": 0})
    out = tmp_path / "child.json"
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            out.write_text(json.dumps(_append_numbered(log, "child", 300)))
        finally:
            os._exit(0)
    mine = _append_numbered(log, "parent", 300)
    deadline = time.monotonic() + 60
    while os.waitpid(pid, os.WNOHANG) == (0, 0):  # a hung child fails the test, not CI
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            raise AssertionError("the forked child did not finish its appends in 60 s")
        time.sleep(0.01)
    _check_numbers(log, {"start": [first], "parent": mine, "child": json.loads(out.read_text())})


def test_append_waits_for_a_filelock_held_by_another_process(tmp_path):
    log = tmp_path / "log.jsonl"
    append_jsonl(log, {"who": "start", "i": 0})
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from filelock import FileLock\n"
            "with FileLock(sys.argv[1]):\n"
            "    print('held', flush=True); time.sleep(0.5)\n"
            '    open(sys.argv[2], \'a\').write(\'{"who": "holder", "i": 0}\\n\')',
            str(tmp_path / ".log.jsonl.lock"),
            str(log),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout.readline().strip() == "held"
    start = time.monotonic()
    number = append_jsonl(log, {"who": "after", "i": 0})
    waited = time.monotonic() - start
    assert holder.wait(5) == 0
    assert waited > 0.2  # it waited for the holder instead of writing beside it
    _check_numbers(log, {"start": [1], "holder": [2], "after": [number]})


def test_appending_to_many_files_keeps_no_descriptor_open(tmp_path):
    # a long-lived process (a server running task after task) appends to ever new logs:
    # each append's lock file is closed again, so descriptors do not pile up
    def open_descriptors() -> int:
        return len(os.listdir("/proc/self/fd"))

    if not os.path.isdir("/proc/self/fd"):
        pytest.fail("this test reads /proc/self/fd (Linux)")
    append_jsonl(tmp_path / "warm.jsonl", {"i": 0})
    before = open_descriptors()
    for i in range(300):
        assert append_jsonl(tmp_path / f"task-{i}.jsonl", {"i": i}) == 1
    assert open_descriptors() == before
    assert append_jsonl(tmp_path / "task-0.jsonl", {"i": 1}) == 2  # still counted right


def _create_then_die_before_the_link(target: Path, *, tmpfile: bool) -> int:
    """Fork a child that writes `target` with `create_exclusive` and is SIGKILLed right
    before the file gets its name (`tmpfile=False`: as on a system without `O_TMPFILE`);
    returns how the child ended."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            import memory.durable as durable

            if not tmpfile:
                del durable.os.O_TMPFILE  # the child's own module: the parent keeps it
            durable.os.link = lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL)
            create_exclusive(target, b"x" * 10_000)
        finally:
            os._exit(0)
    return os.waitpid(pid, 0)[1]


def test_a_writer_killed_before_the_link_leaves_no_file_behind(tmp_path):
    # the content lives in a file without a name until it is linked into place, so a
    # crash before that leaves the folder as it was: no half-named or hidden temp file
    folder = tmp_path / "findings"
    folder.mkdir()
    status = _create_then_die_before_the_link(folder / "a.md", tmpfile=True)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
    assert list(folder.iterdir()) == []
    assert create_exclusive(folder / "a.md", b"whole")
    assert not create_exclusive(folder / "a.md", b"other")
    assert (folder / "a.md").read_bytes() == b"whole"
    assert [p.name for p in folder.iterdir()] == ["a.md"]


def test_without_o_tmpfile_a_hidden_temp_name_is_used_and_removed(tmp_path, monkeypatch):
    # where O_TMPFILE is missing, a killed writer leaves a hidden temp file (readers and the
    # index skip dot-names), and a finished one leaves only its file
    folder = tmp_path / "findings"
    status = _create_then_die_before_the_link(folder / "a.md", tmpfile=False)
    assert os.WIFSIGNALED(status)
    assert [p.name.startswith(".a.md.tmp-") for p in folder.iterdir()] == [True]
    monkeypatch.delattr(os, "O_TMPFILE")
    assert create_exclusive(folder / "b.md", b"whole")
    assert not create_exclusive(folder / "b.md", b"other")
    assert (folder / "b.md").read_bytes() == b"whole"
    assert sorted(p.name for p in folder.iterdir() if not p.name.startswith(".")) == ["b.md"]
