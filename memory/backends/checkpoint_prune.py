"""Pruning of LangGraph checkpoints: `keep_latest` for `SqliteSaver`, as `PostgresSaver` has it.

LangGraph's `PostgresSaver.prune(thread_ids, strategy="keep_latest")`
(langgraph-checkpoint-postgres 3.2) deletes what no resume reads: in each namespace of a
thread it keeps the latest checkpoint (the one `get_tuple` loads; plus its parent when it
predates checkpoint format v4 and that parent holds pending sends), with its pending
writes, and deletes the other checkpoints and their writes. A subgraph *call*'s namespace
(`node:<task id>`, a `create_agent` agent invoked inside a node) goes whole with the root
checkpoint its call started from, once that root checkpoint is saved and is not the
root's latest: the call finished and its result is in the root's later checkpoints. A
kept checkpoint whose parent is deleted is left without a parent. `SqliteSaver`
(langgraph-checkpoint-sqlite 3.1) has no `prune`; `sqlite_prune` applies the same rule to
its two tables (`checkpoints`, `writes`: the channel values live inside each checkpoint,
so there are no blobs to collect).

Invariants:
* each thread is pruned in one write transaction (`BEGIN IMMEDIATE`: SQLite's write lock
  first, so the rule reads the rows it deletes from, and nothing a run saves meanwhile is
  seen half-way); a process killed mid-prune leaves the thread as it was, and pruning it
  again is safe;
* a thread that uses a `DeltaChannel` (its checkpoint metadata counts updates since a
  snapshot) is refused with `NotImplementedError` before anything is deleted, as LangGraph
  refuses it: its latest value is rebuilt from older checkpoints;
* a pending interrupt lives in the pending writes of a namespace's latest checkpoint (the
  root's, and the waiting subgraph call's, which started from the root's latest), so
  `keep_latest` keeps it.

`prune_saver` is the one entry point: the saver's own `prune` where it has one
(`PostgresSaver`), `sqlite_prune` for a `SqliteSaver`, and nothing for a saver that has
neither (`InMemorySaver`, which says so by returning False).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

STRATEGIES = ("keep_latest", "delete")
TASKS = "__pregel_tasks"  # `langgraph.checkpoint.serde.types.TASKS`: v<4 pending sends

# `metadata` is JSON stored as a BLOB; SQLite before 3.45 reads a BLOB argument of its JSON
# functions as an error, so it is cast to TEXT first.
DELTA_THREADS_SQL = """
SELECT DISTINCT thread_id FROM checkpoints
WHERE thread_id IN (SELECT value FROM json_each(?1))
AND (
    json_type(CAST(metadata AS TEXT), '$.counters_since_delta_snapshot') IS NOT NULL
    OR json_type(CAST(metadata AS TEXT), '$.delta_writes_versioned') IS NOT NULL
)
"""

# Per namespace: the latest checkpoint, whether its parent holds pending sends (`TASKS`
# writes, read from the parent before format v4), and the root graph's checkpoint its
# subgraph call started from (`metadata.parents[""]`), with whether that one is saved.
HEADS_SQL = f"""
SELECT
    h.checkpoint_ns,
    h.checkpoint_id AS head,
    c.parent_checkpoint_id AS parent,
    EXISTS (
        SELECT 1 FROM writes w
        WHERE w.thread_id = ?1 AND w.checkpoint_ns = h.checkpoint_ns
        AND w.checkpoint_id = c.parent_checkpoint_id AND w.channel = '{TASKS}'
    ) AS parent_sends,
    json_extract(CAST(c.metadata AS TEXT), '$.parents.""') AS root,
    EXISTS (
        SELECT 1 FROM checkpoints r
        WHERE r.thread_id = ?1 AND r.checkpoint_ns = ''
        AND r.checkpoint_id = json_extract(CAST(c.metadata AS TEXT), '$.parents.""')
    ) AS root_saved
FROM (
    SELECT checkpoint_ns, MAX(checkpoint_id) AS checkpoint_id FROM checkpoints
    WHERE thread_id = ?1 GROUP BY checkpoint_ns
) AS h
JOIN checkpoints c
ON c.thread_id = ?1 AND c.checkpoint_ns = h.checkpoint_ns AND c.checkpoint_id = h.checkpoint_id
"""

CHECKPOINT_SQL = """
SELECT type, checkpoint FROM checkpoints
WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?
"""

DELETE_CALLS_SQL = (
    "DELETE FROM writes "
    "WHERE thread_id = ?1 AND checkpoint_ns IN (SELECT value FROM json_each(?2))",
    "DELETE FROM checkpoints "
    "WHERE thread_id = ?1 AND checkpoint_ns IN (SELECT value FROM json_each(?2))",
)

# A run can save a step's writes before its checkpoint, so writes go by the checkpoints
# deleted, never by "no such checkpoint".
DELETE_UNKEPT_WRITES_SQL = """
DELETE FROM writes
WHERE thread_id = ?1 AND checkpoint_ns = ?2 AND checkpoint_id IN (
    SELECT checkpoint_id FROM checkpoints
    WHERE thread_id = ?1 AND checkpoint_ns = ?2
    AND checkpoint_id NOT IN (SELECT value FROM json_each(?3))
)
"""

DELETE_UNKEPT_SQL = """
DELETE FROM checkpoints
WHERE thread_id = ?1 AND checkpoint_ns = ?2
AND checkpoint_id NOT IN (SELECT value FROM json_each(?3))
"""

ORPHAN_PARENTS_SQL = """
UPDATE checkpoints SET parent_checkpoint_id = NULL
WHERE thread_id = ?1 AND checkpoint_ns = ?2
AND checkpoint_id IN (SELECT value FROM json_each(?3))
AND parent_checkpoint_id NOT IN (SELECT value FROM json_each(?3))
"""

DELETE_THREADS_SQL = (
    "DELETE FROM writes WHERE thread_id IN (SELECT value FROM json_each(?1))",
    "DELETE FROM checkpoints WHERE thread_id IN (SELECT value FROM json_each(?1))",
)

INCREMENTAL_VACUUM = 2  # `PRAGMA auto_vacuum` of a database that gives freed pages back


def prune_saver(saver: Any, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> bool:
    """Prune `thread_ids` in `saver` (see the module docstring); False when the saver cannot
    prune (it has no `prune` of its own and is not a `SqliteSaver`).

    Raises:
        TypeError, ValueError: as `sqlite_prune`.
        NotImplementedError: a thread uses a `DeltaChannel`.
        Exception: the saver's database failed (nothing of the failing thread is deleted).
    """
    from langgraph.checkpoint.base import BaseCheckpointSaver
    from langgraph.checkpoint.sqlite import SqliteSaver

    if type(saver).prune is not BaseCheckpointSaver.prune:
        saver.prune(thread_ids, strategy=strategy)
        return True
    if isinstance(saver, SqliteSaver):
        with saver.lock:
            sqlite_prune(saver.conn, thread_ids, strategy=strategy, serde=saver.serde)
        return True
    return False


def sqlite_prune(
    conn: sqlite3.Connection,
    thread_ids: Sequence[str],
    *,
    strategy: str = "keep_latest",
    serde: Any = None,
) -> None:
    """`PostgresSaver.prune` for a `SqliteSaver`'s database on `conn`.

    `"keep_latest"` keeps each namespace's latest checkpoint (see the module docstring),
    one thread per transaction; `"delete"` deletes the threads whole, in one transaction.
    A database whose `auto_vacuum` is `INCREMENTAL` gives the freed pages back to the file
    system afterwards; any other keeps them for its next writes.

    Args:
        serde: the saver's serializer, to read a checkpoint's format version (only for a
            head whose parent holds pending sends); default LangGraph's.

    Raises:
        TypeError: `thread_ids` is a single string.
        ValueError: `strategy` is unknown.
        NotImplementedError: `"keep_latest"` and a thread uses a `DeltaChannel` (nothing
            is pruned when one of the threads asked for does).
        sqlite3.Error: the database failed (the thread being pruned is left as it was).
    """
    if isinstance(thread_ids, str):
        raise TypeError("thread_ids must be a sequence of thread IDs, not a str")
    if strategy not in STRATEGIES:
        raise ValueError(f"Unknown prune strategy: {strategy!r}")
    threads = [str(t) for t in thread_ids]
    if not threads:
        return
    if strategy == "delete":
        with _transaction(conn):
            for sql in DELETE_THREADS_SQL:
                conn.execute(sql, (json.dumps(threads),))
    else:
        _refuse_delta_threads(conn, threads)
        if serde is None:
            from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

            serde = JsonPlusSerializer()
        for thread in threads:
            with _transaction(conn):
                # a thread that took up a `DeltaChannel` since the check above
                _refuse_delta_threads(conn, [thread])
                _keep_latest(conn, thread, serde)
    if conn.execute("PRAGMA auto_vacuum").fetchone()[0] == INCREMENTAL_VACUUM:
        # `executescript` steps the pragma to its end; `execute` frees one page per step
        conn.executescript("PRAGMA incremental_vacuum;")


@contextmanager
def _transaction(conn: sqlite3.Connection) -> Iterator[None]:
    """`BEGIN IMMEDIATE` ... `COMMIT`, or `ROLLBACK` on any exception (also in autocommit
    mode, where Python's sqlite3 opens no transaction by itself). The connection must not
    be in a transaction already (`SqliteSaver` commits each of its own)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def _refuse_delta_threads(conn: sqlite3.Connection, threads: list[str]) -> None:
    rows = conn.execute(DELTA_THREADS_SQL, (json.dumps(threads),)).fetchall()
    if rows:
        delta = sorted(r[0] for r in rows)
        raise NotImplementedError(
            f"keep_latest can't prune threads that use a DeltaChannel: {', '.join(delta)}"
        )


def _keep_latest(conn: sqlite3.Connection, thread: str, serde: Any) -> None:
    """Delete what a resume of `thread` never reads, inside the caller's transaction."""
    heads = conn.execute(HEADS_SQL, (thread,)).fetchall()
    kept: dict[str, list[str]] = {}
    for ns, head, parent, parent_sends, _root, _saved in heads:
        ids = [head]
        if parent_sends and parent and _format(conn, thread, ns, head, serde) < 4:
            ids.append(parent)
        kept[ns] = ids
    # a subgraph call's namespace has its task id after ":"; it goes with the root
    # checkpoint it started from, once that one is saved (a run can save the call first)
    calls = [
        ns
        for ns, _head, _parent, _sends, root, saved in heads
        if ":" in ns and saved and root not in kept.get("", ())
    ]
    if calls:
        for sql in DELETE_CALLS_SQL:
            conn.execute(sql, (thread, json.dumps(calls)))
    for ns, ids in kept.items():
        if ns in calls:
            continue
        params = (thread, ns, json.dumps(ids))
        conn.execute(DELETE_UNKEPT_WRITES_SQL, params)
        if conn.execute(DELETE_UNKEPT_SQL, params).rowcount:
            conn.execute(ORPHAN_PARENTS_SQL, params)


def _format(conn: sqlite3.Connection, thread: str, ns: str, checkpoint_id: str, serde: Any) -> int:
    """The format version (`v`) of a saved checkpoint; 0 when it cannot be read, so that
    its parent is kept too (pruning keeps more rather than less)."""
    row = conn.execute(CHECKPOINT_SQL, (thread, ns, checkpoint_id)).fetchone()
    try:
        return int(serde.loads_typed((row[0], row[1])).get("v", 0))
    except Exception:  # whatever the serializer raises on a blob it cannot read
        return 0
