"""The `checkpoint report` text and a checkpoint's summary; the checkpoint files themselves.

Writing, loading, validating and listing `checkpoints/cp_{phase}_{ts}.json` is
`orchestrator.artifacts.checkpoint`'s (re-exported here, where the API, the CLI and the
recovery import them from); the model is `orchestrator.checkpoint_model`.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from memory.errors import MemoryStoreError
from orchestrator.artifacts.checkpoint import (
    default_recovery_instructions,
    latest_valid_checkpoint,
    list_checkpoints,
    load_checkpoint,
    write_checkpoint,
)
from orchestrator.checkpoint_model import Checkpoint, CheckpointState, LangGraphRef, SavedCheckpoint

__all__ = [
    "Checkpoint",
    "CheckpointState",
    "LangGraphRef",
    "SavedCheckpoint",
    "checkpoint_summary",
    "default_recovery_instructions",
    "latest_valid_checkpoint",
    "list_checkpoints",
    "load_checkpoint",
    "report",
    "write_checkpoint",
]

SUMMARY_CHARS = 80


# -- report (`checkpoint report`) -------------------------------------------------------
def _names(values: Iterable[str]) -> str:
    values = list(values)
    return f" ({', '.join(values)})" if values else ""


def _entry_line(entry_id: str, store: Any) -> str:
    if store is None:
        return f"  {entry_id}"
    try:
        entry = store.get_entry(entry_id)
    except MemoryStoreError:
        return f"  {entry_id}: (not in memory: pruned or never logged)"
    summary = " ".join(str(getattr(entry, "summary", "") or "").split())
    if len(summary) > SUMMARY_CHARS:
        summary = summary[: SUMMARY_CHARS - 3] + "..."
    return f"  {entry_id}: {summary or '(no summary)'} ({getattr(entry, 'tokens', '?')} tokens)"


def _linked_entries(cp: Checkpoint, store: Any) -> list[str]:
    ids = list(dict.fromkeys(cp.entries))
    if store is not None and cp.checkpoint_id:
        ids += [e.id for e in store.refs(checkpoint=cp.checkpoint_id) if e.id not in ids]
    return ids


def report(cp: Checkpoint, store: Any = None) -> str:
    """The `checkpoint report` text: phase, state counts, next action, memory refs.

    Args:
        store: a `memory.store.MemoryStore`; with it, each referenced entry shows its
            summary and token count (`mem-xxx: pytest results (12000 tokens)`), and entries
            logged with `--checkpoint <this id>` are listed too.
    """
    st = cp.state
    position = ""
    if cp.phases and cp.phase in cp.phases:
        marked = [f"[{p}]" if p == cp.phase else p for p in cp.phases]
        position = f" ({cp.phases.index(cp.phase) + 1}/{len(cp.phases)}: {' > '.join(marked)})"
    lines = [
        f"[CHECKPOINT] {cp.checkpoint_id or '(unsaved)'}",
        f"Task: {cp.task_id}",
        f"Timestamp: {cp.timestamp or '(unsaved)'}",
        f"Phase: {cp.phase}{position}",
    ]
    if cp.objective:
        lines.append(f"Objective: {' '.join(cp.objective.split())}")
    lines += [
        "",
        "[STATE]",
        f"  completed subtasks: {len(st.completed_subtasks)}{_names(st.completed_subtasks)}",
        f"  pending subtasks: {len(st.pending_subtasks)}{_names(st.pending_subtasks)}",
        f"  active agents: {len(st.active_agents)}{_names(st.active_agents)}",
        f"  blocked agents: {len(st.blocked_agents)}{_names(st.blocked_agents)}",
        f"  findings: {st.findings_count}",
        "",
        "[SUMMARY]",
        f"  {' '.join(cp.context_summary.split()) or '(none)'}",
        "",
        "[NEXT ACTION]",
        f"  {' '.join(cp.next_action.split()) or '(none)'}",
    ]
    notes = cp.extra.get("notes")
    if isinstance(notes, str) and notes.strip():
        lines += ["", "[NOTES]", f"  {' '.join(notes.split())}"]
    if cp.plan:
        lines += ["", "[PLAN]", f"  {cp.plan}"]
    ids = _linked_entries(cp, store)
    lines += ["", "[MEMORY REFERENCES]"]
    lines += [_entry_line(i, store) for i in ids] or ["  (none)"]
    if cp.langgraph.thread_id:
        lines += [
            "",
            "[LANGGRAPH]",
            f"  thread {cp.langgraph.thread_id}"
            + (f", checkpoint {cp.langgraph.checkpoint_id}" if cp.langgraph.checkpoint_id else ""),
        ]
    return "\n".join(lines) + "\n"


def checkpoint_summary(cp: Checkpoint, path: Path | None = None) -> dict[str, Any]:
    """A small JSON-able summary (for `status --json` and `checkpoint list --json`)."""
    return {
        "checkpoint_id": cp.checkpoint_id,
        "task_id": cp.task_id,
        "phase": cp.phase,
        "timestamp": cp.timestamp,
        "completed": len(cp.state.completed_subtasks),
        "pending": len(cp.state.pending_subtasks),
        "blocked": len(cp.state.blocked_agents),
        "findings_count": cp.state.findings_count,
        "next_action": cp.next_action,
        "path": str(path) if path else None,
    }
