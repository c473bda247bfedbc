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
import time
from typing import Any

TASK = "T0001"


def _store(where: str) -> Any:
    from memory.store import MemoryStore

    if "://" in where:
        return MemoryStore.from_url(where)
    return MemoryStore(where)


def _writer(where: str, writer: int, count: int, start: Any, out: Any) -> None:
    from memory.working import WorkingMemory

    store = _store(where)
    memory = WorkingMemory(store, TASK)
    out.put(("ready", writer, 0))
    start.wait()
    began = time.perf_counter()
    for n in range(count):
        memory.append_message("assistant", f"writer {writer} message {n} zebra{writer}x{n}")
    out.put(("writer", writer, time.perf_counter() - began))
    store.backend.close()


def _searcher(where: str, number: int, start: Any, stop: Any, out: Any) -> None:
    store = _store(where)
    store.search("warm up", scope="messages", limit=5)
    out.put(("ready", number, 0))
    start.wait()
    done, n = 0, 0
    while not stop.is_set():
        store.search(f"zebra{n % 8}x{n * 7 % 2000} message", scope="messages", limit=5)
        done, n = done + 1, n + 1
    out.put(("searcher", number, done))
    store.backend.close()


def run(where: str, *, writers: int, messages: int, searchers: int) -> dict[str, Any]:
    """Start everything together; returns wall time, searches and what was verified."""
    ctx = mp.get_context("spawn")
    store = _store(where)  # set up (schema, folders) once, before the race
    from memory.working import WorkingMemory

    WorkingMemory(store, TASK).ensure()
    start, stop, out = ctx.Event(), ctx.Event(), ctx.Queue()
    procs = [
        ctx.Process(target=_writer, args=(where, w, messages, start, out)) for w in range(writers)
    ]
    finders = [
        ctx.Process(target=_searcher, args=(where, s, start, stop, out)) for s in range(searchers)
    ]
    for proc in procs + finders:
        proc.start()
    for _ in procs + finders:  # every process has imported and connected
        out.get()
    began = time.perf_counter()
    start.set()
    for proc in procs:
        proc.join()
    wall = time.perf_counter() - began
    stop.set()
    for proc in finders:
        proc.join()
    results = [out.get() for _ in procs + finders]
    searches = sum(r[2] for r in results if r[0] == "searcher")
    lost = verify(store, writers, messages)
    store.backend.close()
    return {"wall": wall, "searches": searches, "problem": lost}


def verify(store: Any, writers: int, messages: int) -> str:
    """ "" when every message is there once, in order per writer; else what is wrong."""
    from memory.working import WorkingMemory

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
