"""Fault injection for crash tests: kill the process at a named point of a run.

Set `TETHER_FAULT=<point>[:<n>]` and the process kills itself with SIGKILL the `n`-th time
(default 1st) execution reaches `fault("<point>")`. Several points can be given,
comma-separated. Points (see `POINTS`) sit on both sides of every durable write of the
graph, so a test can crash the run anywhere a real power cut could and check that
`orchestrator resume` finishes it. Tests only; unset, `fault()` costs one dict lookup.
"""

from __future__ import annotations

import os
import signal
import threading

ENV_VAR = "TETHER_FAULT"

POINTS = (
    "run_before_graph",  # task recorded, nothing else durable yet
    "approve_after_decision",  # `approve` recorded its decisions, LangGraph has none yet
    "plan_after_write",  # plan written, PhasePlan not yet in the state
    "spawn_after_checkpoint",  # before_spawning checkpoint written, no Send yet
    "subagent_before_run",  # a subagent started, nothing written
    "tool_call_after_result",  # a user's tool's result recorded, LangGraph has not got it
    "agent_after_call",  # a model call answered and in the usage journal, its step not saved
    "subagent_before_findings",  # agent finished, registry intent written, no file
    "subagent_after_findings",  # findings file written, not yet in LangGraph's state
    "remote_after_create",  # a remote agent's run created on its server, its id not noted
    "merge_before_write",
    "merge_after_write",  # merged file written, checkpoint not yet
    "merge_after_checkpoint",
    "monitor_after_snapshot",
    "advance_before_checkpoint",
    "advance_after_checkpoint",  # phase checkpoint written, phase index not yet moved
    "advance_after_prune",  # the finished phase's LangGraph checkpoints pruned
    "advance_before_wave",  # a wave merged and checkpointed, the next wave not yet begun
    "answer_after_call",  # the answer recorded in the registry, no final file yet
    "finish_before_reflect",
    "waiting_before_record",  # a wait's checkpoint written, the task record not yet
)

_counts: dict[str, int] = {}
_lock = threading.Lock()


def _parse(spec: str) -> dict[str, int]:
    wanted: dict[str, int] = {}
    for item in filter(None, (s.strip() for s in spec.split(","))):
        name, _, n = item.partition(":")
        wanted[name] = int(n) if n else 1
    return wanted


def fault(point: str) -> None:
    """Kill the process here if `$TETHER_FAULT` names this point (and occurrence)."""
    spec = os.environ.get(ENV_VAR)
    if not spec:
        return
    target = _parse(spec).get(point)
    if target is None:
        return
    with _lock:
        _counts[point] = _counts.get(point, 0) + 1
        hit = _counts[point] == target
    if hit:
        os.kill(os.getpid(), signal.SIGKILL)
