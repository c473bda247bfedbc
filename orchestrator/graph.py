"""The orchestrator graph: assembly and compilation.

::

    START ─► plan ─► spawn ─Send×N─► subagent ─► merge ─► monitor ─► advance ─► plan | END
                          └──── (nothing pending) ────► merge

`build_graph()` returns the uncompiled `StateGraph` so LangGraph Server (or a test) can
compile it with its own checkpointer; `compile_graph()` compiles it with tether's
`SqliteSaver` on `<memory root>/.langgraph/state.sqlite` (a hidden folder, ignored by the
index), unless the caller injects another checkpointer (`Orchestrator(checkpointer=...)`,
e.g. `open_postgres_saver(url)` for LangGraph's `PostgresSaver`). Runs use
`durability="sync"`: each super-step is on disk before the next starts,
and the writes of subagents that finished inside an interrupted super-step are kept as
pending writes, so they are not run again on resume.

Every node is also idempotent on its own (see `orchestrator.nodes`), so a state rebuilt
from a JSON checkpoint can enter at `plan` and only do what is left.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

DURABILITY = "sync"


def build_graph() -> Any:
    """The uncompiled `StateGraph` of a tether run."""
    from langgraph.graph import END, START, StateGraph

    from orchestrator.nodes._runtime import RunContext
    from orchestrator.nodes.advance import advance_node, route_advance
    from orchestrator.nodes.merge import merge_node
    from orchestrator.nodes.monitor import monitor_node
    from orchestrator.nodes.plan import plan_node
    from orchestrator.nodes.spawn import route_spawn, spawn_node
    from orchestrator.nodes.subagent import subagent_node
    from orchestrator.state import OrchestratorState

    graph = StateGraph(OrchestratorState, context_schema=RunContext)
    graph.add_node("plan", plan_node)
    graph.add_node("spawn", spawn_node)
    graph.add_node("subagent", subagent_node)
    graph.add_node("merge", merge_node)
    graph.add_node("monitor", monitor_node)
    graph.add_node("advance", advance_node)
    graph.add_edge(START, "plan")
    graph.add_edge("plan", "spawn")
    graph.add_conditional_edges("spawn", route_spawn, ["subagent", "merge"])
    graph.add_edge("subagent", "merge")
    graph.add_edge("merge", "monitor")
    graph.add_edge("monitor", "advance")
    graph.add_conditional_edges("advance", route_advance, {"plan": "plan", "end": END})
    return graph


def open_saver(db_path: Path, *, read_only: bool = False) -> Any:
    """A `SqliteSaver` on `db_path` (created with its folder if missing).

    `read_only` opens an existing file without writing anything (a read-only memory
    directory): SQLite's `mode=ro`, else `immutable` when the WAL cannot be opened.
    """
    from langgraph.checkpoint.sqlite import SqliteSaver

    if read_only:
        for flags in ("mode=ro", "immutable=1"):
            conn = sqlite3.connect(f"{db_path.as_uri()}?{flags}", uri=True, check_same_thread=False)
            try:
                conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
            except sqlite3.DatabaseError:
                conn.close()
                continue
            saver = SqliteSaver(conn)
            saver.is_setup = True  # the tables exist; setup() would write
            return saver
        raise sqlite3.DatabaseError(f"cannot open {str(db_path)!r} read-only")
    db_path.parent.mkdir(parents=True, exist_ok=True)
    # keep sqlite3's default transaction handling: `SqliteSaver` writes a task's writes
    # with `executemany` and commits once, which is atomic only outside autocommit mode
    # (in autocommit a kill between rows left a spawn step with half of its `Send`s)
    conn = sqlite3.connect(str(db_path), check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("PRAGMA busy_timeout=10000")
    saver = SqliteSaver(conn)
    saver.setup()
    return saver


def open_postgres_saver(url: str) -> Any:
    """A set-up `PostgresSaver` on its own connection to `url` (close with `saver.conn`).

    Raises:
        memory.base.StorageError: the server cannot be reached (the message hides the password).
    """
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg.rows import dict_row

    from memory.backends.postgres import CONNECT_TIMEOUT_S, redact
    from memory.base import StorageError

    try:
        conn = psycopg.connect(
            url,
            autocommit=True,
            prepare_threshold=0,
            row_factory=dict_row,
            connect_timeout=CONNECT_TIMEOUT_S,
        )
    except psycopg.Error as exc:
        lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
        raise StorageError(
            f"cannot connect to {redact(url)!r} ({lines[0] if lines else exc!r}); check the URL"
        ) from None
    saver = PostgresSaver(conn)
    saver.setup()
    return saver


def compile_graph(checkpointer: Any = None) -> Any:
    """`build_graph()` compiled with `checkpointer` (None: no persistence)."""
    return build_graph().compile(checkpointer=checkpointer)


def run_config(thread_id: str, max_parallel: int) -> dict[str, Any]:
    """The run config: thread id = task id, parallel subagents bounded by `max_parallel`."""
    return {
        "configurable": {"thread_id": thread_id},
        "max_concurrency": max(1, int(max_parallel)),
        "recursion_limit": 10_000,
    }
