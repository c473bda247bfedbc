"""The text the `orchestrator` command prints for a run's result and a task's status.

Plain functions from data to text (no click, no printing), so the same wording serves the
CLI, its tests and anything else that shows a `RunResult` or a `task_status` dict.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import sys
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from orchestrator.artifacts.documents import MemoryTarget
    from orchestrator.types import JsonObject


def report_text(
    result: Any,
    json_mode: bool,
    url: str | None = None,
    latest_snapshot: str | None = None,
    width: int = 0,
) -> str:
    """The closing report of `run`, `resume` and `approve`.

    Args:
        url: the shared memory (named in the commands printed), None for a directory.
        latest_snapshot: the task's newest snapshot, the one `status` names (also one
            written by `handoff` since); default: the newest the run wrote.
        width: the terminal's columns, which the answer's lines are wrapped to at spaces
            (0: not wrapped).

    A done task's report says nothing about resuming it (there is nothing to resume).
    """
    from memory.backends.urls import redact
    from orchestrator.artifacts.tasks import resume_command
    from orchestrator.state import failure_summary

    if json_mode:
        return json.dumps({"event": "result", **result.to_dict()}, default=str)
    # a shared memory is named by its URL (password hidden), its documents by their paths
    shared = url is not None
    root = None if shared else Path(result.memory_dir)

    def where(rel: str) -> str:
        return str(root / rel) if root is not None else rel

    newest = where(result.snapshots[-1]) if result.snapshots else None  # written in order

    lines = [
        f"Task {result.task_id}: {result.status} (phase {result.phase}, "
        f"{len(result.findings)} finding(s), {len(result.failed)} failed)",
    ]
    if result.answer:
        path = where(result.answer_path) if result.answer_path else "-"
        lines += ["", f"Answer (whole: {path}):", *answer_head(result.answer, width=width), ""]
    else:
        lines.append(no_answer_line(result.status, result.stop_reason))
    lines += [
        f"Memory: {result.memory_dir}" if shared else f"Memory directory: {root}",
        f"  plan:        {where(result.plan) if result.plan else '-'}",
        f"  findings:    {where('findings')} ({len(result.findings)} + "
        f"{len(result.merged)} merged)",
        f"  checkpoints: {where('checkpoints')} ({len(result.checkpoints)})",
        f"  snapshot:    {latest_snapshot or newest or '-'}",
    ]
    if result.merged.get("final"):
        lines.append(f"  summary:     {where(result.merged['final'])}")
    memory = redact(url) if url is not None else root
    flag = "--memory-url" if shared else "--memory-dir"
    if result.status == "done":
        lines.append(
            f"Hand off: orchestrator handoff --task {shlex.quote(result.task_id)} "
            f"{flag} {shlex.quote(str(memory))}"
        )
    if result.status == "failed" and unreachable(result.failed):
        lines.append(f"Provider unreachable: {next(iter(result.failed.values()))['error']}")
    elif result.status == "failed":
        lines.append(f"Failed:   {failure_summary(result.failed)}")
    if result.skipped_phases:
        lines.append(
            f"Skipped:  {', '.join(result.skipped_phases)} (answered: {result.done_reason})"
        )
    if result.usage.get("calls") and result.status != "waiting":
        lines.append(_usage_line(result.usage, result.offline))
    if result.budget:
        lines.append(budget_line(result.budget, result.tokens, result.lead_calls))
    if result.status == "stopped":
        lines.append(f"Stopped:  {result.stop_reason}")
        lines.append(
            f"Resume:   {resume_command(result.task_id, memory)} --budget-tokens N "
            f"(N, the new total, above {result.budget['spent'] if result.budget else 0:,})"
        )
        return "\n".join(lines)
    if result.status == "waiting":
        lines += waiting_lines(result.pending_approvals, result.task_id, memory)
    elif result.status != "done":
        lines.append(f"Resume:   {resume_command(result.task_id, memory)}")
    return "\n".join(lines)


def nothing_to_resume(task_id: str, memory: object, json_mode: bool) -> str:
    """What `resume` prints for a done task (`memory`: the directory, or the shared
    memory's URL): one line saying so, with the command that shows the task."""
    from memory.backends.urls import redact
    from orchestrator.artifacts.tasks import resume_command

    if isinstance(memory, str) and "://" in memory:
        memory = redact(memory)
    status = resume_command(task_id, memory).replace("orchestrator resume", "orchestrator status")
    line = f"Task {task_id}: done; nothing to resume (see `{status}`)"
    if json_mode:
        return json.dumps(
            {"event": "nothing_to_resume", "task_id": task_id, "status": "done", "message": line}
        )
    return line


ANSWER_LINES = 12
_MD_ESCAPE = re.compile(r"\\([\\`*_{}\[\]()#+\-.!$|~<>])")
"""A Markdown backslash escape (`\\$`, `click\\_`): the terminal shows the character."""

_NO_ANSWER = {
    "done": "the lead gave none (the findings are in the summary)",
    "failed": "the run failed before the lead answered",
    "waiting": "not yet: the task waits for a person's decision",
    "interrupted": "not yet: the run was interrupted; resume it",
}


def no_answer_line(status: str, stop_reason: str | None = None) -> str:
    """The line a report shows in place of the answer when the run ended without one."""
    if status == "stopped":
        return f"No answer: the run stopped before the lead answered ({stop_reason or '-'})"
    return f"No answer: {_NO_ANSWER.get(status, f'not yet: the task is {status}; resume it')}"


def terminal_width() -> int:
    """The columns report lines are wrapped to: `$COLUMNS`, else stdout's terminal's; 0
    (nothing wrapped) for a pipe or a file without `$COLUMNS`."""
    columns = os.environ.get("COLUMNS", "").strip()
    if columns.isdigit():
        return int(columns)
    return shutil.get_terminal_size().columns if sys.stdout.isatty() else 0


def answer_head(answer: str, limit: int = ANSWER_LINES, width: int = 0) -> list[str]:
    """The first lines of an answer, indented, with how many more there are: Markdown
    escapes shown as their characters, and with a `width`, each line wrapped at spaces
    within it (a continuation indented under its text; a word longer than the width
    stays whole)."""
    text = [_MD_ESCAPE.sub(r"\1", ln.rstrip()) for ln in answer.strip().splitlines()]
    shown: list[str] = []
    for ln in text[:limit]:
        if not ln or width <= 0:
            shown.append("  " + ln if ln else "")
            continue
        body = ln.lstrip()
        lead = "  " + ln[: len(ln) - len(body)]
        bullet = re.match(r"(?:[-*+]|\d+[.)]) ", body)
        more = lead + " " * (bullet.end() if bullet else 0)
        shown += textwrap.wrap(
            body, width, initial_indent=lead, subsequent_indent=more,
            break_long_words=False, break_on_hyphens=False,
        )  # fmt: skip
    if len(text) > limit:
        shown.append(f"  (... {len(text) - limit} more line(s))")
    return shown


def budget_line(budget: JsonObject, tokens: dict, lead_calls: list) -> str:
    """`Budget: spent of budget tokens; by phase ...; by agent ...`."""
    from orchestrator.state import spend

    line = f"Budget:   {budget['spent']:,} of {budget['budget']:,} tokens spent"
    if budget.get("by_agent"):  # the usage journal's, as the figure is
        return line + _split(budget)
    return line + (_split(spend(tokens, lead_calls)) if tokens else "")


def unreachable(failed: JsonObject) -> bool:
    """Whether every failure of a run is the provider being unreachable (exit code 5)."""
    kinds = [v.get("kind") for v in failed.values() if isinstance(v, dict)]
    return bool(kinds) and all(k == "ProviderUnreachableError" for k in kinds)


def _usage_line(usage: dict[str, int], offline: bool = False) -> str:
    """The run's model calls and prompt tokens; of an offline run only its calls and that
    nothing was spent (its token estimates, summed over every call's whole prompt, read
    like a bill no provider sent)."""
    calls = f"{usage.get('calls', 0):,}"
    if offline:
        return (
            f"Usage:    {calls} offline model call(s): no provider was sent anything, nothing spent"
        )
    return f"Usage:    {calls} model call(s), {usage.get('input_tokens', 0):,} prompt tokens"


def waiting_lines(requests: list[dict], task_id: str, memory: MemoryTarget) -> list[str]:
    """What a waiting task waits for, a line per request, and the commands to answer."""
    from orchestrator.approvals import request_lines
    from orchestrator.artifacts.tasks import approve_command
    from orchestrator.types import PendingApproval

    lines = [f"Waiting:  {len(requests)} request(s) wait for approval:"]
    for request in requests:
        head, *rest = request_lines(PendingApproval.model_validate(request))
        lines += [f"  waits for approval: {head}", *(f"  {line}" for line in rest)]
    lines.append(f"Approve:  {approve_command(task_id, memory)}")
    lines.append(f"Reject:   {approve_command(task_id, memory, reject=True)}")
    return lines


DONE_SHOWN = 20
"""Done subtasks `status` lists one a line (the newest; the others are counted)."""


def _subtask_lines(subtasks: dict[str, dict[str, Any]]) -> list[str]:
    """A line per subtask; of a long task's done ones only the newest `DONE_SHOWN` (every
    subtask is in `status --json`)."""
    done = [k for k, v in subtasks.items() if v["state"] == "done"]
    hidden = set(done[:-DONE_SHOWN]) if len(done) > DONE_SHOWN else set()
    lines = [f"  ({len(hidden)} earlier done subtask(s); all in status --json)"] if hidden else []
    return lines + [
        f"  {v['state']:<7} {k} [{v['agent']}]{_ungrounded(v)}{_ran_on(v.get('ran_on'))}"
        + (f" (partial: {v['partial']})" if v.get("partial") else "")
        for k, v in subtasks.items()
        if k not in hidden
    ]


def _ungrounded(subtask: dict[str, Any]) -> str:
    """A done subtask's mark when its finding rests on no tool call."""
    return " (ungrounded: no tool call)" if subtask.get("grounding") == "ungrounded" else ""


def status_text(info: dict[str, Any], url: str | None = None, width: int = 0) -> str:
    """`orchestrator status` as lines (`url`: the shared memory, named in commands;
    `width`: the columns the answer's lines are wrapped to, 0: not wrapped)."""
    from memory.backends.urls import redact

    memory = redact(url) if url is not None else info["memory_dir"]
    lines = [
        f"Task {info['task_id']}: {info['status']}",
        f"Objective: {info['objective']}",
        f"Phase: {info['phase']} ({info['phase_number']}/{len(info['phases'])}: "
        f"{', '.join(info['phases'])})"
        + (f", wave {info['wave']}" if info.get("wave", 1) > 1 else ""),
        f"Subtasks: {info['findings']} done, {len(info['failed'])} failed, "
        f"{len(info['subtasks'])} planned",
    ]
    lines += _subtask_lines(info["subtasks"])
    if info.get("ungrounded"):
        ungrounded = info["ungrounded"]
        lines.append(
            f"Ungrounded: {len(ungrounded)} finding(s) whose agent made no tool call: "
            + ", ".join(ungrounded)
        )
    lines += [_spent_line(info), SAVED_STATE[info["source"]]]
    if info.get("usage_unknown"):
        unknown = info["usage_unknown"]
        lines.append(
            f"Usage unknown: {len(unknown)} remote subtask(s) reported no token usage "
            f"(not in the totals or the budget): {', '.join(unknown)}"
        )
    if info.get("answer"):
        lines.append(f"Answer: {info['answer']['path'] or '-'}")
        lines += answer_head(info["answer"]["text"], 6, width)
    elif info["status"] in ("done", "failed", "stopped"):  # a run ended without one
        lines.append(no_answer_line(info["status"], info.get("stop_reason")))
    if info.get("stop_reason"):
        lines.append(f"Stopped: {info['stop_reason']}")
    lines += [
        f"Plan: {info['plan'] or '-'}",
        f"Latest checkpoint: {info['latest_checkpoint'] or '-'}",
        f"Latest snapshot: {info['latest_snapshot'] or '-'}",
    ]
    lines += [f"Failed: {k}: {e}" for k, e in (info.get("errors") or {}).items() if e]
    if info.get("pending_approvals"):
        lines += waiting_lines(info["pending_approvals"], info["task_id"], memory)
    if info.get("resume") and info["status"] == "stopped":
        lines.append(f"Resume: {info['resume']} --budget-tokens N (N above the spent tokens)")
    elif info.get("resume"):
        lines.append(f"Resume: {info['resume']}")
    return "\n".join(lines)


def _ran_on(place: JsonObject | None) -> str:
    """Where a remote subtask ran, as a status line's tail (nothing for a local one)."""
    if not place:
        return ""
    attempt = f", attempt {place['attempt']}" if (place.get("attempt") or 1) > 1 else ""
    return f" on {place['server']} ({place['graph']}, thread {place['thread_id']}{attempt})"


def _split(spent: JsonObject) -> str:
    phases = ", ".join(f"{p} {n:,}" for p, n in (spent.get("by_phase") or {}).items())
    agents = ", ".join(f"{a} {n:,}" for a, n in sorted((spent.get("by_agent") or {}).items()))
    return f" (by phase: {phases}; by agent: {agents})" if agents else ""


#: `status`'s line on where a resume continues from (`info["source"]`).
SAVED_STATE = {
    "langgraph": "Saved state: LangGraph's database (a resume continues from its last step)",
    "checkpoint": "Saved state: tether's JSON checkpoints only (a resume rebuilds from the latest)",
}


def _spent_line(info: dict[str, Any]) -> str:
    """The task's spend, one figure: prompt plus completion tokens of every agent (the lead's
    and the subagents'), in how many model calls, against the budget if it has one."""
    budget = info.get("budget") or {}
    spent = max(int(info["tokens"]["total"]), int(budget.get("spent") or 0))
    calls = int((info.get("usage") or {}).get("calls") or 0)
    in_calls = f" in {calls:,} model call(s)" if calls else ""
    if info.get("tokens_estimated"):  # nothing was spent: no figure that reads like a bill
        return f"Spent: nothing ({calls:,} offline model call(s): no provider was called)"
    against = f" of {budget['budget']:,} (budget)" if budget.get("budget") else ""
    return f"Spent: {spent:,}{against} tokens{in_calls} (prompt plus completion, every agent)" + (
        _split(budget) if against else ""
    )


#: The header row of `orchestrator tasks`.
TASK_HEADER = ("TASK", "STATUS", "PHASE", "UPDATED (UTC)", "OBJECTIVE")

#: Below this many columns left for the objective, a task takes two lines.
OBJECTIVE_MIN = 20


def task_lines(rows: list[dict[str, Any]], width: int = 0) -> list[str]:
    """`orchestrator tasks` as lines: a header row, then per task its id, status, phase,
    updated (UTC, to the minute) and objective, the columns lined up.

    Args:
        width: the terminal's columns: no line is longer (the objective is cut, with `…`).
            When fewer than `OBJECTIVE_MIN` columns would be left for the objective, each
            task takes two lines: id, status and phase, then, indented, the time and the
            objective. 0: not a terminal, nothing is cut.
    """
    from rich.cells import cell_len, set_cell_size

    def cut(text: str, room: int) -> str:
        if not width or cell_len(text) <= room:
            return text
        return set_cell_size(text, max(room - 1, 0)) + "…"

    cells = [TASK_HEADER[:4]] + [
        [row["task_id"], row["status"], row["phase"] or "-", row["updated"][:16].replace("T", " ")]
        for row in rows
    ]
    rows = [{"objective": TASK_HEADER[4]}, *rows]
    sizes = [max((len(line[i]) for line in cells), default=0) for i in range(4)]
    two_lines = bool(width) and sum(sizes) + 2 * 4 + OBJECTIVE_MIN > width
    lines = []
    for line, row in zip(cells, rows, strict=True):
        objective = " ".join(str(row["objective"]).split()) or "-"
        if two_lines:
            head = "  ".join(cell.ljust(n) for cell, n in zip(line[:3], sizes, strict=False))
            tail = f"  {line[3]}  {objective}"
            lines += [cut(head.rstrip(), width), cut(tail, width)]
        else:
            head = "  ".join(cell.ljust(n) for cell, n in zip(line, sizes, strict=True))
            lines.append(f"{head}  {cut(objective, width - len(head) - 2)}")
    return lines
