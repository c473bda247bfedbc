"""spawn: checkpoint `before_spawning`, then one `Send("subagent", ...)` per pending subtask.

`spawn_node` writes the checkpoint; `route_spawn` (a conditional edge) turns every
subtask of the phase that has no findings yet into a `Send`. LangGraph runs the Sends of
one super-step in parallel (bounded by `max_concurrency` in the run config, set from
`max_parallel`). Subtasks that already have findings, or failed ones being retried after
a resume, are decided here from the state, so a rebuilt state fans out only what is left.
With nothing pending the edge goes straight to `merge`.
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime
from langgraph.types import Send

from orchestrator.faults import fault
from orchestrator.graph.context import RunContext
from orchestrator.graph.writes import checkpoint_state, checkpoint_update
from orchestrator.state import OrchestratorState, current_phase, pending_subtasks
from orchestrator.types import SubagentPayload


def spawn_node(state: OrchestratorState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Checkpoint `before_spawning` when subtasks are pending (`route_spawn` sends them)."""
    ctx = runtime.context
    pending = pending_subtasks(state)
    if not pending:
        return {}
    for key, sub in pending.items():
        ctx.emit("agent", key=key, agent=sub["agent"], state="pending", title=sub["title"])
    agents = sorted({f"{v['agent']}:{k}" for k, v in pending.items()})
    path = checkpoint_state(
        ctx,
        state,
        trigger="before_spawning",
        active=agents,
        next_action=f"Run {len(pending)} subagent(s) of phase {current_phase(state)}",
    )
    fault("spawn_after_checkpoint")
    return checkpoint_update(path)


EARLIER_CANDIDATES = 24
"""Earlier findings a `Send` carries at most: the subagent keeps those whose files are in
its scope (`EARLIER_FINDINGS` of them), so a payload does not grow with the task."""


def _overlaps(a: list[str], b: list[str]) -> bool:
    """Whether two scopes share a path (an empty scope is the whole workdir)."""
    if not a or not b:
        return True
    norm = [[p.strip("/").removeprefix("./") for p in s] for s in (a, b)]
    return any(x in ("", ".") or y in ("", ".") or x == y or x.startswith(y + "/")
               or y.startswith(x + "/") for x in norm[0] for y in norm[1])  # fmt: skip


def on_scope(
    earlier: dict[str, dict[str, Any]], subtasks: dict[str, dict[str, Any]], scope: list[str]
) -> dict[str, dict[str, Any]]:
    """The earlier findings whose subtask's scope overlaps `scope`, newest key first, at
    most `EARLIER_CANDIDATES`."""
    out: dict[str, dict[str, Any]] = {}
    for key in sorted(earlier, reverse=True):
        if _overlaps(list((subtasks.get(key) or {}).get("scope") or []), list(scope)):
            out[key] = earlier[key]
            if len(out) >= EARLIER_CANDIDATES:
                break
    return out


def route_spawn(state: OrchestratorState) -> Any:
    pending = pending_subtasks(state)
    if not pending:
        return "merge"
    phase = current_phase(state)
    earlier = {k: v for k, v in (state.get("findings") or {}).items() if v.get("phase") != phase}
    subtasks = state.get("subtasks") or {}
    return [
        Send(
            "subagent",
            SubagentPayload(
                task_id=state["task_id"],
                objective=state["objective"],
                workdir=state["workdir"],
                phase=current_phase(state),
                key=key,
                subtask=sub,
                earlier=on_scope(earlier, subtasks, sub.get("scope") or []),
            ),
        )
        for key, sub in sorted(pending.items())
    ]
