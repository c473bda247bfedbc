"""Concurrent writers and searchers on one task's log, per backend.

`--writers` processes each append `--messages` messages, one `WorkingMemory.append_message`
call each, to the same task's `messages.jsonl`, while `--searchers` processes run
`MemoryStore.search(..., scope="messages")` until the writers are done. Printed per backend:
the writers' wall time, appends per second, searches done, and the check that nothing was
lost (every message exactly once, each writer's messages in the order it wrote them). Used by
`python -m bench.backends --concurrency` (and runnable alone: `python -m bench.concurrency`).
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import time
from typing import Any

TASK = "T0001"


def _store(where: str, name: str = "") -> Any:
    """The store at `where`; on PostgreSQL its connections carry `name` (`application_name`)
    so that the CPU of every server process serving this process can be read."""
    from memory.store import MemoryStore

    if "://" in where:
        if name:
            where += ("&" if "?" in where else "?") + f"application_name={name}"
        return MemoryStore.from_url(where)
    return MemoryStore(where)


class ServerCPU:
    """CPU seconds of the PostgreSQL server processes serving one process (all of its
    pool's connections, found by `application_name`); 0 on other backends."""

    def __init__(self, store: Any, name: str):
        self.backend, self.name = store.backend, name
        self.start: dict[int, float] = {}

    def pids(self) -> list[int]:
        if getattr(self.backend, "kind", "") != "postgres":
            return []
        with self.backend._connection() as conn:
            rows = conn.execute(
                "SELECT pid FROM pg_stat_activity WHERE application_name = %s", (self.name,)
            ).fetchall()
        return [r[0] for r in rows]

    def begin(self) -> None:
        self.start = {pid: _cpu(pid) for pid in self.pids()}

    def used(self) -> float:
        """Server CPU since `begin` (a connection opened since then counts from zero)."""
        return sum(_cpu(pid) - self.start.get(pid, 0.0) for pid in self.pids())


def _cpu(pid: int | None) -> float:
    """CPU seconds of this process (`pid` None) or of server process `pid` (0: unknown)."""
    if pid is None:
        return time.process_time()
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _writer(where: str, writer: int, count: int, start: Any, out: Any) -> None:
    from memory.task.working import WorkingMemory

    name = f"tether-bench-writer-{writer}"
    store = _store(where, name)
    memory = WorkingMemory(store, TASK)
    server = ServerCPU(store, name)
    out.put(("ready", writer, 0, (0.0, 0.0)))
    start.wait()
    server.begin()
    began, cpu = time.perf_counter(), time.process_time()
    for n in range(count):
        memory.append_message("assistant", f"writer {writer} message {n} zebra{writer}x{n}")
    used = (time.process_time() - cpu, server.used())
    out.put(("writer", writer, time.perf_counter() - began, used))
    store.backend.close()


def _searcher(
    where: str, number: int, start: Any, stop: Any, out: Any, each: int | None = None
) -> None:
    name = f"tether-bench-searcher-{number}"
    store = _store(where, name)
    store.search("warm up", scope="messages", limit=5)
    server = ServerCPU(store, name)
    out.put(("ready", number, 0, (0.0, 0.0)))
    start.wait()
    server.begin()
    done, n, cpu = 0, 0, time.process_time()
    while (done < each) if each is not None else not stop.is_set():
        store.search(f"zebra{n % 8}x{n * 7 % 2000} message", scope="messages", limit=5)
        done, n = done + 1, n + 1
    used = (time.process_time() - cpu, server.used())
    out.put(("searcher", number, done, used))
    store.backend.close()


def run(
    where: str, *, writers: int, messages: int, searchers: int, searches_each: int | None = None
) -> dict[str, Any]:
    """Start everything together; returns wall time, searches, what was verified, and the
    CPU seconds per append and per search (`*_cpu`: client, server).

    Searchers search until the writers are done; with `searches_each`, each runs that many
    searches instead (the same search work on every backend) and the wall time lasts until
    the writers and the searchers are all done."""
    ctx = mp.get_context("spawn")
    store = _store(where)  # set up (schema, folders) once, before the race
    from memory.task.working import WorkingMemory

    WorkingMemory(store, TASK).ensure()
    start, stop, out = ctx.Event(), ctx.Event(), ctx.Queue()
    procs = [
        ctx.Process(target=_writer, args=(where, w, messages, start, out)) for w in range(writers)
    ]
    finders = [
        ctx.Process(target=_searcher, args=(where, s, start, stop, out, searches_each))
        for s in range(searchers)
    ]
    for proc in procs + finders:
        proc.start()
    for _ in procs + finders:  # every process has imported and connected
        out.get()
    began = time.perf_counter()
    start.set()
    for proc in procs if searches_each is None else procs + finders:
        proc.join()
    wall = time.perf_counter() - began
    stop.set()
    for proc in finders:
        proc.join()
    results = [out.get() for _ in procs + finders]
    searches = sum(r[2] for r in results if r[0] == "searcher")
    lost = verify(store, writers, messages)
    store.backend.close()

    def per(kind: str, count: int) -> tuple[float, float]:
        used = [r[3] for r in results if r[0] == kind]
        return (sum(u[0] for u in used) / max(count, 1), sum(u[1] for u in used) / max(count, 1))

    return {
        "wall": wall,
        "searches": searches,
        "problem": lost,
        "append_cpu": per("writer", writers * messages),
        "search_cpu": per("searcher", searches),
    }


def verify(store: Any, writers: int, messages: int) -> str:
    """ "" when every message is there once, in order per writer; else what is wrong."""
    from memory.task.working import WorkingMemory

    seen: dict[int, list[int]] = {w: [] for w in range(writers)}
    for message in WorkingMemory(store, TASK).messages():
        words = message.content.split()
        seen[int(words[1])].append(int(words[3]))
    for writer, numbers in seen.items():
        if numbers != list(range(messages)):
            return (
                f"writer {writer}: {len(numbers)} of {messages} messages, in order: "
                + json.dumps(numbers == sorted(numbers))
            )
    return ""


def fsync_ms(folder: str, count: int = 300) -> float:
    """Median milliseconds of appending one line to a file in `folder` and fsyncing it: what
    every files-backend append waits for (the disk's share of the files column; PostgreSQL's
    writers share their WAL flushes)."""
    path = os.path.join(folder, "fsync-probe")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    took = []
    try:
        for _ in range(count):
            began = time.perf_counter()
            os.write(fd, b"x" * 100 + b"\n")
            os.fsync(fd)
            took.append(time.perf_counter() - began)
    finally:
        os.close(fd)
        os.unlink(path)
    return sorted(took)[len(took) // 2] * 1000
