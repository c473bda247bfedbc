"""Token monitor: per-agent and total usage, the warning zone and the save threshold.

Counting: each model call counts its `usage_metadata["total_tokens"]` when the model
reports usage, else LangChain's `count_tokens_approximately` of what was sent and
received (`orchestrator.agent_loop.usage_tokens`). Per-agent totals live in the state
(`tokens`, keyed `lead` and `{agent}:{subtask}`).

The gauge that triggers a handoff is the size of the *lead's context* (what its next call
would send), not the cumulative spend: in the warning zone (`warning_ratio` x threshold)
tether warns once per context; at the threshold it writes
`context_snapshots/snap_{ts}.md` and continues the lead in a fresh context seeded from
that snapshot, the overview, the plan and the skills index. The threshold
defaults to the external-memory skill's 150,000 tokens, overridable by the workflow file
and `--token-threshold`.

Invariant: after a handoff the lead's conversation log is empty, so its next context is
the fixed seed only, far below the threshold for any sensible threshold.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from orchestrator.defaults import TOKEN_THRESHOLD, WARNING_RATIO

OK, WARN, SAVE = "ok", "warn", "save"


@dataclass(frozen=True)
class TokenGauge:
    """Zones of a token count against a threshold."""

    threshold: int = TOKEN_THRESHOLD
    warning_ratio: float = WARNING_RATIO

    @property
    def warn_at(self) -> int:
        return int(self.threshold * self.warning_ratio)

    def zone(self, tokens: int) -> str:
        if tokens >= self.threshold:
            return SAVE
        if tokens >= self.warn_at:
            return WARN
        return OK

    def fraction(self, tokens: int) -> float:
        return min(1.0, tokens / self.threshold) if self.threshold else 1.0


def total_tokens(tokens: dict[str, int] | None) -> int:
    return sum(int(v) for v in (tokens or {}).values())


def count_messages(messages: list[Any]) -> int:
    from langchain_core.messages.utils import count_tokens_approximately

    return int(count_tokens_approximately(messages))


def lead_context_tokens(ctx: Any, state: dict[str, Any]) -> int:
    """Size of the lead's context: the input tokens the provider reported for the lead's
    last call (tool schemas included), or the estimate of its next context when that is
    larger (findings merged since) or when no usage was reported."""
    from orchestrator.nodes.plan import lead_messages

    estimate = count_messages(lead_messages(ctx, state))
    calls = state.get("lead_calls") or []
    reported = int(calls[-1].get("tokens") or 0) if calls and calls[-1].get("reported") else 0
    return max(reported, estimate)


def lead_context_estimated(state: dict[str, Any]) -> bool:
    """True when the lead's gauge has no provider-reported usage behind it (show `~`)."""
    calls = state.get("lead_calls") or []
    return not (calls and calls[-1].get("reported"))


def write_lead_snapshot(
    ctx: Any, state: dict[str, Any], *, reason: str, token_count: int | None = None
) -> Path:
    """Write `context_snapshots/snap_{ts}.md` for the lead's current context."""
    from orchestrator import artifacts
    from orchestrator.snapshot_content import lead_content
    from orchestrator.state import current_phase, phase_subtasks

    layout = ctx.layout
    phase = current_phase(state)
    findings = state.get("findings") or {}
    current = phase_subtasks(state, phase)
    plan = layout.plan(state["task_id"])
    files = [
        (v["path"], f"findings of {k} ({v.get('status', 'completed')})")
        for k, v in sorted(findings.items())
    ]
    files += [
        (p, f"merged findings of phase {ph}")
        for ph, p in sorted((state.get("merged") or {}).items())
    ]
    pending = [f"{k}: {v['title']}" for k, v in sorted(current.items()) if k not in findings]
    if token_count is None:
        token_count = lead_context_tokens(ctx, state)
    return artifacts.write_snapshot(
        layout,
        task_id=state["task_id"],
        phase=phase,
        reason=reason,
        token_count=token_count,
        **asdict(lead_content(ctx, state)),  # what was found, what is left, what was said
        active_agents=sorted({v["agent"] for v in current.values()}),
        important_context=(
            f"Objective: {state['objective']}\n"
            f"Workdir (paths of findings are relative to it): {state.get('workdir') or '.'}\n"
            f"Strategy: {state.get('strategy') or '-'}\n"
            + "".join(f"Key question: {q}\n" for q in (state.get("key_questions") or [])[-3:])
        ).strip(),
        files_in_play=files,
        pending_decisions=pending,
        resume_instructions=(
            f"The task is done; nothing to resume. Read the final summary "
            f"`{(state.get('merged') or {}).get('final', 'findings/merged_*.md')}` and the plan."
            if state.get("status") == "done"
            else f"Run `orchestrator resume --task {state['task_id']} --from-snapshot <this "
            f"file>` to continue phase {phase} ({state['phase_index'] + 1}/"
            f"{len(state['phases'])}) with a fresh lead; finished subtasks are not run again."
        ),
        plan_path=layout.relative(plan) if plan.exists() else None,
        extra={
            "objective": state["objective"],
            "workdir": state.get("workdir"),
            "phases": list(state["phases"]),
            "phase_index": state["phase_index"],
            "status": state.get("status", "running"),
            # per agent, so a resume from this snapshot continues the task's totals
            "tokens": dict(state.get("tokens") or {}),
            # what was planned and found, so a resume into a memory directory that lacks
            # some findings files can name them and run those subtasks again
            "subtasks": dict(state.get("subtasks") or {}),
            "completed_findings": {
                k: v.get("path") for k, v in sorted((state.get("findings") or {}).items())
            },
        },
    )
