"""Pruning a task's LangGraph checkpoints at phase transitions and at the task's end.

LangGraph saves the graph state at every super-step, and each subagent (a `create_agent`
agent invoked inside the `subagent` node) saves its own conversation at each of its steps,
under a `checkpoint_ns` of the task's thread. Nothing reads them once the step they belong
to is over: a resume continues from the thread's latest checkpoint and its pending writes,
`orchestrator status` reads the same, and a subagent waiting for approval continues from
its own latest checkpoint. So `advance` (after the phase's JSON checkpoint) and `run_graph`
(when the task ends `done` or `failed`) prune the thread with LangGraph's `keep_latest`
rule (`memory.backends.checkpoint_prune.prune_saver`: `PostgresSaver.prune`, tether's
implementation for `SqliteSaver`), which keeps exactly those.

Invariants:
* never while the thread waits for a person: a thread whose latest checkpoint holds a
  pending interrupt is not pruned (`keep_latest` would keep it, but nothing needs pruning
  that badly);
* a prune is one transaction per thread: a kill mid-prune leaves the thread whole, and
  the next transition prunes it;
* a failed prune is a warning, never a failed task: the checkpoints are derived state.

`TETHER_PRUNE_CHECKPOINTS=0` keeps every checkpoint (to inspect a run's history with
LangGraph's `get_state_history`, or to measure what pruning saves: `bench/graph_state.py`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from memory.backends.checkpoint_prune import prune_saver

ENV_VAR = "TETHER_PRUNE_CHECKPOINTS"
INTERRUPT = "__interrupt__"  # `langgraph.constants.INTERRUPT`: a pending interrupt's channel
_OFF = frozenset({"0", "false", "no", "off"})


def pruning_enabled() -> bool:
    """False when `$TETHER_PRUNE_CHECKPOINTS` turns pruning off (`0`, `false`, `no`, `off`)."""
    return os.environ.get(ENV_VAR, "1").strip().lower() not in _OFF


def waits_for_approval(saver: Any, thread_id: str) -> bool:
    """Whether the latest checkpoint of `thread_id` holds a pending interrupt."""
    latest = saver.get_tuple({"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}})
    return latest is not None and any(w[1] == INTERRUPT for w in latest.pending_writes or ())


def prune_thread(saver: Any, thread_id: str, warn: Callable[[str], None] | None = None) -> bool:
    """Prune `thread_id`'s superseded checkpoints in `saver` (`keep_latest`); returns whether
    it did (False: pruning is off, the saver cannot prune, or the thread waits for approval).

    Args:
        warn: told, in one line, why a prune failed (the thread is left as it was).
    """
    if saver is None or not thread_id or not pruning_enabled():
        return False
    try:
        if waits_for_approval(saver, thread_id):
            return False
        return prune_saver(saver, [thread_id], strategy="keep_latest")
    except Exception as exc:  # derived state: any failure leaves it whole, the run goes on
        if warn is not None:
            warn(f"pruning checkpoints of {thread_id!r} failed: {type(exc).__name__}: {exc}")
        return False
