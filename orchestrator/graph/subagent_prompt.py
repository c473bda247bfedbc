"""What a subagent is told: tether's protocol text, its subtask and the earlier findings.

`subagent_prompt` is a local subagent's conversation (the system text with its own
instructions and skills index, then its subtask); `remote_text` is what a remote agent is
told (its instructions, then the same subtask text). Both tell the agent the earlier
phases' findings that concern its scope (`earlier_on_scope`), each as its record's
`for_subagent()` line, at most `EARLIER_FINDINGS` of them within `EARLIER_CHARS`.

Invariant: the subtask text is the same for a local and a remote agent, and what it says
of earlier findings is copied from them (bounded), never invented.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import HumanMessage, SystemMessage

from orchestrator.artifacts.finding import FindingRecord
from orchestrator.graph.context import RunContext
from orchestrator.types import SubagentPayload

SUBAGENT_SYSTEM = (
    "You are a subagent of a tether run. Work only on your subtask, with your tools; do not "
    "redo what earlier findings below already found. Then call SubmitFindings once: a short "
    "summary, concrete discoveries (paths, names, line numbers), the files you examined."
)
EARLIER_FINDINGS = 6
EARLIER_CHARS = 1500
"""Earlier findings a subagent is told of, at most (count and characters)."""


def subagent_prompt(
    payload: SubagentPayload,
    skills_index: str,
    max_steps: int = 8,
    instructions: str = "",
    earlier: list[FindingRecord] = (),  # type: ignore[assignment]
) -> list[Any]:
    """The subagent's conversation: tether's protocol text (with its own instructions and
    the skills it may read), then its subtask and the earlier findings on its scope."""
    system = SUBAGENT_SYSTEM
    if instructions:
        system += "\n\nYour instructions as this agent:\n" + instructions
    if skills_index:
        system += "\n\nSkills (read one with read_skill):\n" + skills_index
    text = subtask_text(
        payload,
        earlier,
        [f"Max steps: {max(1, max_steps - 1)}"],
        "Investigate, then call SubmitFindings.",
    )
    return [SystemMessage(system), HumanMessage(text)]


REMOTE_CLOSING = (
    "Work on this subtask only, then answer with what you found: concrete discoveries "
    "(paths, names, line numbers) and the files you examined."
)


def subtask_text(
    payload: SubagentPayload,
    earlier: list[FindingRecord],
    extra: list[str] = (),  # type: ignore[assignment]
    closing: str = REMOTE_CLOSING,
) -> str:
    """The subtask as an agent is told it: objective, phase, subtask, scope, the earlier
    findings on its scope, then `closing` (a remote agent gets this as its input message)."""
    sub = payload["subtask"]
    lines = [
        f"Objective: {payload['objective']}",
        f"Phase: {payload['phase']}",
        f"Subtask: {sub['id']}",
        f"Title: {sub['title']}",
        f"Description: {sub['description']}",
        f"Scope: {', '.join(sub.get('scope') or []) or '.'}",
        *extra,
    ]
    if earlier:
        lines += ["Earlier findings on this scope (build on them):", *_earlier_lines(earlier)]
    lines.append(closing)
    return "\n".join(lines)


def _in_scope(path: str, scope: list[str]) -> bool:
    roots = [s.strip("/") for s in scope if s.strip("/") not in ("", ".")]
    return not roots or any(path == r or path.startswith(r + "/") for r in roots)


def earlier_on_scope(ctx: RunContext, payload: SubagentPayload) -> list[FindingRecord]:
    """The earlier phases' findings that concern this subtask's scope: those that examined
    a file inside it (all of them for a subtask of the whole workdir), newest phase first."""
    scope = list(payload["subtask"].get("scope") or [])
    out = []
    for key, ref in sorted((payload.get("earlier") or {}).items(), reverse=True):
        record = ctx.finding(payload["task_id"], key, ref)
        files = record.examined()
        if not files or any(_in_scope(p, scope) for p in files):
            out.append(record)
        if len(out) >= EARLIER_FINDINGS:
            break
    return out


def _earlier_lines(records: list[FindingRecord]) -> list[str]:
    lines, used = [], 0
    for r in records:
        line = r.for_subagent()
        if used + len(line) > EARLIER_CHARS:
            break
        lines.append(line)
        used += len(line)
    return lines


def remote_text(ctx: RunContext, payload: SubagentPayload) -> str:
    """What a remote agent is told: its own instructions (`prompt`), then the subtask."""
    text = subtask_text(payload, earlier_on_scope(ctx, payload))
    instructions = ctx.prompts.get(payload["subtask"]["agent"], "")
    return f"Your instructions as this agent:\n{instructions}\n\n{text}" if instructions else text
