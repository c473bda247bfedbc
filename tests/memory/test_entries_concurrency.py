"""Concurrent writers: 8 processes logging 200 entries each lose nothing and never collide.

Each process opens its own `MemoryStore` on the same directory (as parallel subagents do)
and logs a mix of inline, file and chunked entries; afterwards every one of the 1600
entries is listed once and fetches back byte-exact.
"""

from __future__ import annotations

import multiprocessing as mp

from memory import MemoryStore

PROCESSES = 8
PER_PROCESS = 200


def content_for(proc: int, i: int) -> str:
    head = f"proc {proc} entry {i}\r\n"
    if i % 50 == 0:  # a few chunked entries (> 4000 tokens)
        return head + "chunked line é\n" * 1200
    if i % 10 == 0:  # some file entries (500..4000 tokens)
        return head + "file line\n" * 250
    return head + "inline"


def _writer(root: str, proc: int, start, queue) -> None:
    store = MemoryStore(root)
    start.wait()
    ids = [store.log(content_for(proc, i), tags=[f"p{proc}"]).id for i in range(PER_PROCESS)]
    store.close()
    queue.put((proc, ids))


def test_eight_processes_log_1600_entries(memory_dir):
    MemoryStore(memory_dir).close()  # create the schema once, like a running tether would
    ctx = mp.get_context("spawn")
    start, queue = ctx.Event(), ctx.Queue()
    procs = [
        ctx.Process(target=_writer, args=(str(memory_dir), p, start, queue))
        for p in range(PROCESSES)
    ]
    for p in procs:
        p.start()
    start.set()
    results = dict(queue.get(timeout=120) for _ in procs)
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0

    all_ids = [i for ids in results.values() for i in ids]
    assert len(all_ids) == PROCESSES * PER_PROCESS == len(set(all_ids))
    with MemoryStore(memory_dir) as store:
        listed = store.list_entries(limit=None)
        assert sorted(e.id for e in listed) == sorted(all_ids)
        assert len({e.seq for e in listed}) == len(listed)
        stats = store.stats()
        assert stats["entries"] == 1600
        assert stats["by_tier"]["chunked"]["entries"] == PROCESSES * 4
        assert stats["by_tier"]["file"]["entries"] == PROCESSES * 16
        for proc, ids in results.items():
            assert len(store.list_entries(tag=f"p{proc}", limit=None)) == PER_PROCESS
            for i, entry_id in enumerate(ids):
                assert store.fetch(entry_id) == content_for(proc, i)


def test_threads_sharing_one_store(memory_dir):
    """Subagents running as threads share one `MemoryStore` (a connection per thread)."""
    from concurrent.futures import ThreadPoolExecutor

    with MemoryStore(memory_dir) as store:

        def work(t: int) -> list[str]:
            return [store.log(content_for(t, i), tags=[f"t{t}"]).id for i in range(60)]

        with ThreadPoolExecutor(max_workers=8) as pool:
            results = list(pool.map(work, range(8)))
        ids = [i for r in results for i in r]
        assert len(set(ids)) == 480 == len(store.list_entries(limit=None))
        for t, r in enumerate(results):
            assert [store.fetch(i) for i in r] == [content_for(t, i) for i in range(60)]


CRASH_CHILD = """
import sys
from memory import MemoryStore
sys.path.insert(0, sys.argv[2])
from test_entries_concurrency import crash_content
store = MemoryStore(sys.argv[1])
k = int(sys.argv[3])
store.log(crash_content(k))  # warm: the kill window below is all steady-state logging
print("ready", flush=True)
while True:
    k += 1
    store.log(crash_content(k))
"""


def crash_content(k: int) -> str:
    """Self-describing content: the first line names `k`, the rest follows from it."""
    body = "inline" if k % 3 == 0 else ("file line\n" * 300 if k % 3 == 1 else "chunk\n" * 6000)
    return f"entry {k}\n{body}"


def test_sigkill_while_logging_never_leaves_a_row_without_its_files(memory_dir):
    """Rows are committed only after their gzip files are durable, whenever the kill lands."""
    import os
    import random
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    here = Path(__file__).resolve()
    env = dict(os.environ, PYTHONPATH=str(here.parents[2]))
    rng = random.Random(7)
    MemoryStore(memory_dir).close()
    start = 0
    for _ in range(10):
        child = subprocess.Popen(
            [sys.executable, "-c", CRASH_CHILD, str(memory_dir), str(here.parent), str(start)],
            stdout=subprocess.PIPE,
            env=env,
        )
        assert child.stdout.readline() == b"ready\n"
        time.sleep(rng.uniform(0.0, 0.2))
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=10)
        with MemoryStore(memory_dir) as store:
            entries = store.list_entries(limit=None)
            for entry in entries:
                text = store.fetch(entry.id)
                k = int(text.split("\n", 1)[0].removeprefix("entry "))
                assert text == crash_content(k)
            start += 1000  # fresh numbers for the next child
    assert len(entries) > 10  # each child logged at least one entry before its kill
