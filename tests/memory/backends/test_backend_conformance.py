"""The storage contract (`memory.contract.base`) on every backend: files+SQLite, in-memory,
PostgreSQL.

The contract's tests live in `memory.backends.conformance` (importable by a backend of anyone's) and
run here once per backend (the `url` fixture's params); the tests below need a URL that
another process can open. Through the public contract only: documents with versions
and compare-and-set, entries and chunks (byte-exact), the search index, task records, the
subagent registry, the per-task lock, several processes writing one task, a writer killed
mid-write (crash consistency) and bad input.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from memory.backends import open_backend
from memory.backends.conformance import *  # noqa: F403  the contract's tests, run on each of ALL
from memory.contract.base import LockHeldError
from tests.pg import private_schema

ALL = ["files", "memory", "postgres"]
DURABLE = ["files", "postgres"]


@pytest.fixture(params=ALL)
def url(request, tmp_path):
    """A URL (or memory directory) naming a fresh, empty store of the backend under test."""
    kind = request.param
    if kind == "postgres":
        with private_schema() as pg_url:
            yield pg_url
    elif kind == "memory":
        yield "memory://"
    else:
        yield str(tmp_path / "memdir")


@pytest.fixture
def backend(url):
    with open_backend(url) as opened:
        yield opened


def params(kinds):
    return pytest.mark.parametrize("url", kinds, indirect=True)


# -- several processes, crashes ----------------------------------------------------------
def _worker(url: str, name: str, agents: int, queue) -> None:
    with open_backend(url) as backend:
        claimed = [f"s{n}" for n in range(agents) if backend.claim_subagent("task", f"s{n}", name)]
        for n in range(10):
            backend.update_document("task/counter", lambda old: str(int(old or b"0") + 1).encode())
            backend.log_entry(f"{name} wrote {n}", tags=["worker"])
    queue.put((name, claimed))


@params(DURABLE)
def test_several_processes_write_one_task_without_losing_or_doubling(url):
    with open_backend(url):
        pass  # set up once, as the first process of a task does
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(url, f"p{i}", 20, queue)) for i in range(4)]
    for p in procs:
        p.start()
    results = dict(queue.get(timeout=120) for _ in procs)
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    claims = [agent for claimed in results.values() for agent in claimed]
    assert sorted(claims) == sorted(f"s{n}" for n in range(20))  # each once, none twice
    with open_backend(url) as backend:
        assert backend.get_document("task/counter").data == b"40"
        assert len(backend.list_entries(tag="worker", limit=None)) == 40
        owners = {a.agent_id: a.data["owner"] for a in backend.list_subagents("task")}
        assert all(agent in results[owners[agent]] for agent in owners)


CRASH_WRITER = """
import json, sys
from memory.backends import open_backend
with open_backend(sys.argv[1]) as b:
    n = 0
    while True:
        n += 1
        body = json.dumps({"n": n, "pad": "x" * 200_000}).encode()
        b.put_document("task/state.json", body)
        b.log_entry(f"step {n} " * 50, tags=["crash"])
        if n == 3:
            print("ready", flush=True)
"""


@params(DURABLE)
def test_a_writer_killed_mid_write_leaves_whole_versions(url):
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(CRASH_WRITER), url],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout.readline().strip() == "ready"
    time.sleep(0.3)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    with open_backend(url) as backend:
        doc = backend.get_document("task/state.json")
        state = json.loads(doc.data)  # never a torn file or row
        assert state["n"] >= 3 and len(state["pad"]) == 200_000
        entries = backend.list_entries(tag="crash", limit=None)
        assert len(entries) >= 3
        for entry in entries:
            assert backend.fetch_entry(entry.id).startswith("step ")
        after = backend.put_document("task/state.json", b"{}", expected_version=doc.version)
        assert after.version > doc.version


MUTEX_HOLDER = """
import sys, time
from memory.backends import open_backend
with open_backend(sys.argv[1]) as b, b.mutex("working/t/summaries"):
    print("held", flush=True)
    time.sleep(600)
"""


@params(DURABLE)
def test_a_mutex_holder_killed_inside_does_not_block_the_next_process(url, backend):
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(MUTEX_HOLDER), url],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout.readline().strip() == "held"
        with pytest.raises(LockHeldError), backend.mutex("working/t/summaries", timeout=0.3):
            pass  # held by the other process
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    with backend.mutex("working/t/summaries", timeout=10):
        pass  # released with its holder (a lease would hold it for 60 s: LockHeldError)
