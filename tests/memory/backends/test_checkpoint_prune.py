"""tether's `keep_latest` pruning of `SqliteSaver` (`memory.backends.checkpoint_prune`), checked
by LangGraph's own checkpointer conformance suite (`langgraph-checkpoint-conformance`: put,
writes, get, list, delete and its prune spec), against `PostgresSaver.prune` on the same
rows, and on the shapes a tether run leaves: subgraph calls of finished steps, a waiting
call, a `DeltaChannel` thread, a kill mid-prune.

The suite calls a saver's async methods; `SqliteSaver` has only sync ones, so `_AsyncAdapter`
runs them (tether's own saver, the one a run uses) from the suite's coroutines.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.sqlite import SqliteSaver

from memory.backends.checkpoint_prune import prune_saver, sqlite_prune
from memory.backends.savers import open_sqlite_saver


class _AsyncAdapter(SqliteSaver):
    """`SqliteSaver` whose async methods run its sync ones; `aprune` is tether's."""

    async def aprune(self, thread_ids, *, strategy="keep_latest"):
        assert prune_saver(self, thread_ids, strategy=strategy)

    async def aput(self, config, checkpoint, metadata, new_versions):
        return self.put(config, checkpoint, metadata, new_versions)

    async def aput_writes(self, config, writes, task_id, task_path=""):
        self.put_writes(config, writes, task_id, task_path)

    async def aget_tuple(self, config):
        return self.get_tuple(config)

    async def alist(self, config, *, filter=None, before=None, limit=None):
        for item in self.list(config, filter=filter, before=before, limit=limit):
            yield item

    async def adelete_thread(self, thread_id):
        self.delete_thread(thread_id)


def test_langgraph_conformance_suite_passes_with_tethers_prune(tmp_path):
    @checkpointer_test(name="SqliteSaver+tether prune")
    async def saver():
        conn = sqlite3.connect(tmp_path / "conformance.sqlite", check_same_thread=False)
        try:
            yield _AsyncAdapter(conn)
        finally:
            conn.close()

    report = asyncio.run(validate(saver))
    results = report.results
    assert results["prune"].detected and results["prune"].tests_passed == 8, results["prune"]
    failures = {name: r.failures for name, r in results.items() if r.passed is False}
    assert failures == {}
    ran = {name for name, r in results.items() if r.passed}
    assert ran == {"put", "put_writes", "get_tuple", "list", "delete_thread", "prune"}


# -- the shapes of a tether run ----------------------------------------------------------


def _put(saver, ns, parent=None, *, root=None, metadata=None, writes=()):
    """Save one checkpoint in namespace `ns` (after `parent`), started from root `root`."""
    from langgraph.checkpoint.base import empty_checkpoint

    checkpoint = empty_checkpoint()
    config = {"configurable": {"thread_id": "t", "checkpoint_ns": ns}}
    if parent:
        config["configurable"]["checkpoint_id"] = parent
    meta = {"source": "loop", "step": 0, "parents": {"": root} if root else {}}
    saved = saver.put(config, checkpoint, {**meta, **(metadata or {})}, {})
    if writes:
        saver.put_writes(saved, list(writes), "task-1")
    return checkpoint["id"]


def _rows(saver) -> dict[str, list[str]]:
    rows = saver.conn.execute(
        "SELECT checkpoint_ns, checkpoint_id FROM checkpoints ORDER BY checkpoint_ns, checkpoint_id"
    )
    out: dict[str, list[str]] = {}
    for ns, cid in rows:
        out.setdefault(ns, []).append(cid)
    return out


@pytest.fixture
def saver(tmp_path):
    saver = open_sqlite_saver(tmp_path / "state.sqlite")
    yield saver
    saver.conn.close()


def test_finished_calls_go_a_waiting_call_stays_with_its_writes(saver):
    r1 = _put(saver, "")
    done = _put(saver, "subagent:a", root=r1)
    _put(saver, "subagent:a", done, root=r1, writes=[("messages", "x")])
    r2 = _put(saver, "", r1)
    waiting = _put(saver, "subagent:b", root=r2)
    waiting = _put(saver, "subagent:b", waiting, root=r2, writes=[("__interrupt__", "ask")])
    r3 = _put(saver, "", r2, writes=[("__interrupt__", "ask")])
    r4 = _put(saver, "", r3)
    # r4 is the root's latest: `subagent:b` started from r2, which is superseded, so it
    # goes; a call started from the latest root checkpoint would stay (see below)
    sqlite_prune(saver.conn, ["t"])
    assert _rows(saver) == {"": [r4]}
    assert saver.get_tuple({"configurable": {"thread_id": "t"}}).parent_config is None

    current = _put(saver, "subagent:c", root=r4, writes=[("__interrupt__", "ask")])
    sqlite_prune(saver.conn, ["t"])
    assert _rows(saver) == {"": [r4], "subagent:c": [current]}
    tup = saver.get_tuple({"configurable": {"thread_id": "t", "checkpoint_ns": "subagent:c"}})
    assert [w[1:] for w in tup.pending_writes] == [("__interrupt__", "ask")]


def test_a_call_whose_root_checkpoint_is_not_saved_yet_stays(saver):
    r1 = _put(saver, "")
    early = _put(saver, "subagent:a", root="not-saved-yet")
    r2 = _put(saver, "", r1)
    sqlite_prune(saver.conn, ["t"])
    assert _rows(saver) == {"": [r2], "subagent:a": [early]}


def test_a_delta_channel_thread_is_refused_and_left_whole(saver):
    r1 = _put(saver, "")
    _put(saver, "", r1, metadata={"counters_since_delta_snapshot": {"messages": [1, 1]}})
    before = _rows(saver)
    with pytest.raises(NotImplementedError, match="DeltaChannel: t"):
        sqlite_prune(saver.conn, ["t", "other"])
    assert _rows(saver) == before


def test_arguments_are_checked_as_langgraph_checks_them(saver):
    with pytest.raises(TypeError, match="thread_ids must be a sequence of thread IDs, not a str"):
        sqlite_prune(saver.conn, "t")
    with pytest.raises(ValueError, match="Unknown prune strategy: 'newest'"):
        sqlite_prune(saver.conn, ["t"], strategy="newest")


KILLER = """
import os, signal, sqlite3, sys
from memory.backends.checkpoint_prune import sqlite_prune
conn = sqlite3.connect(sys.argv[1])
def trace(sql):
    if sql.lstrip().startswith("DELETE FROM checkpoints"):
        os.kill(os.getpid(), signal.SIGKILL)  # writes of the thread are already deleted
conn.set_trace_callback(trace)
sqlite_prune(conn, ["t"])
"""


def test_a_kill_mid_prune_leaves_the_thread_whole_and_a_second_prune_finishes(saver, tmp_path):
    r1 = _put(saver, "", writes=[("a", 1)])
    r2 = _put(saver, "", r1, writes=[("b", 2)])
    call = _put(saver, "subagent:x", root=r2, writes=[("c", 3)])
    r3 = _put(saver, "", r2)
    before = _rows(saver)
    writes = saver.conn.execute("SELECT count(*) FROM writes").fetchone()[0]
    db = tmp_path / "state.sqlite"
    killed = subprocess.run(
        [sys.executable, "-c", KILLER, str(db)], cwd=Path(__file__).parents[3], timeout=60
    )
    assert killed.returncode == -9
    assert _rows(saver) == before  # the transaction died with the process
    assert saver.conn.execute("SELECT count(*) FROM writes").fetchone()[0] == writes == 3
    assert call in before["subagent:x"]
    sqlite_prune(saver.conn, ["t"])
    assert _rows(saver) == {"": [r3]}
    assert saver.conn.execute("SELECT count(*) FROM writes").fetchone()[0] == 0


def test_a_database_with_incremental_auto_vacuum_gives_the_pages_back(tmp_path):
    conn = sqlite3.connect(tmp_path / "v.sqlite", check_same_thread=False)
    conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
    saver = SqliteSaver(conn)
    parent = None
    for i in range(50):
        parent = _put(saver, "", parent, writes=[("blob", "x" * 20_000 + str(i))])
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    sqlite_prune(conn, ["t"])
    assert conn.execute("PRAGMA freelist_count").fetchone()[0] == 0
    assert conn.execute("PRAGMA page_count").fetchone()[0] < pages / 10
    assert json.loads(json.dumps(_rows(saver))) == {"": [parent]}
    conn.close()


# -- the same rule as PostgresSaver.prune ----------------------------------------------------


def _scenario(saver) -> None:
    """Two threads of root steps, subgraph calls from old, latest and unsaved root
    checkpoints, pending writes, and heads of format v2 and v4 after pending sends."""
    from langgraph.checkpoint.base import empty_checkpoint

    def put(thread, ns, cid, parent=None, root=None, v=4, writes=()):
        checkpoint = {**empty_checkpoint(), "id": cid, "v": v}
        config = {"configurable": {"thread_id": thread, "checkpoint_ns": ns}}
        if parent:
            config["configurable"]["checkpoint_id"] = parent
        meta = {"source": "loop", "step": 0, "parents": {"": root} if root else {}}
        saved = saver.put(config, checkpoint, meta, {})
        if writes:
            saver.put_writes(saved, list(writes), f"task-{cid[-2:]}")

    ids = iter(f"1f000000-0000-6000-8000-0000000000{i:02d}" for i in range(99))
    for thread in ("a", "b"):
        r1, r2, r3, r4 = next(ids), next(ids), next(ids), next(ids)
        put(thread, "", r1, writes=[("x", 1)])
        put(thread, "", r2, r1, writes=[("__pregel_tasks", "send")])
        c1, c2 = next(ids), next(ids)
        put(thread, "subagent:1", c1, root=r2, writes=[("messages", "m")])
        put(thread, "subagent:1", c2, c1, root=r2)
        put(thread, "subagent:2", next(ids), root="unsaved")
        put(thread, "", r3, r2, v=2 if thread == "a" else 4, writes=[("y", 2)])
        put(thread, "subagent:3", next(ids), root=r3, writes=[("__interrupt__", "ask")])
        if thread == "b":
            put(thread, "", r4, r3)
        k1, k2 = next(ids), next(ids)  # a namespace without ":" keeps its latest
        put(thread, "kept", k1, writes=[("z", 3)])
        put(thread, "kept", k2, k1)


def _left(conn, writes_table: str) -> tuple[list, list]:
    """The checkpoints (with parents) and the writes left, as tuples, sorted."""
    checkpoints = conn.execute(
        "SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id FROM checkpoints "
        "ORDER BY 1, 2, 3"
    ).fetchall()
    writes = conn.execute(
        f"SELECT thread_id, checkpoint_ns, checkpoint_id, task_id, idx FROM {writes_table} "
        "ORDER BY 1, 2, 3, 4, 5"
    ).fetchall()
    as_tuple = lambda r: tuple(r.values()) if isinstance(r, dict) else tuple(r)  # noqa: E731
    return [as_tuple(r) for r in checkpoints], [as_tuple(r) for r in writes]


def test_sqlite_keeps_what_postgres_saver_prune_keeps(saver):
    from memory.backends.savers import open_postgres_saver
    from tests.pg import private_schema

    _scenario(saver)
    sqlite_prune(saver.conn, ["a", "b"])
    with private_schema() as url:
        pg = open_postgres_saver(url)
        try:
            _scenario(pg)
            pg.prune(["a", "b"], strategy="keep_latest")
            with pg.conn.connection() as conn:  # the saver's pool
                expected = _left(conn, "checkpoint_writes")
        finally:
            pg.conn.close()
    assert _left(saver.conn, "writes") == expected
    kept = {(t, ns) for t, ns, _c, _p in expected[0]}
    # thread a's head is v2 after pending sends: its parent stays, and so does the call
    # started from that parent; b's head is v4 and newer than the root of every call
    assert len([c for c in expected[0] if c[:2] == ("a", "")]) == 2
    assert len([c for c in expected[0] if c[:2] == ("b", "")]) == 1
    assert {("a", "subagent:1"), ("a", "subagent:3")} <= kept
    assert ("b", "subagent:1") not in kept and ("b", "subagent:3") not in kept
    assert {("a", "subagent:2"), ("b", "subagent:2"), ("a", "kept")} <= kept  # unsaved root
