"""The markdown files the orchestrator leaves in the memory directory.

* `research_plans/{task_id}.md`: one per task, rewritten in place as work progresses.
* `findings/{agent}_{ts}.md`: one per finished subagent.
* `findings/merged_{ts}.md`: one per merged batch.
* `context_snapshots/snap_{ts}.md`: one per handoff (token threshold or `handoff`).

`ts` is UTC `YYYYMMDDTHHMMSSffffffZ` (`orchestrator.paths.timestamp`), so names sort by
time. Every file is a document of the memory's backend (`orchestrator.docs`): new ones are
created with `Docs.create_unique`, so a taken name (two writers in the same microsecond) gets
a suffix, names never collide and an existing file is never overwritten. Agent and phase
names are slugged for file names; the exact names stay in the file. Every write is atomic.
The writers take the memory as a `Docs`, a `MemoryStore`, a backend or a `Layout`, and
return `Docs.path` of what they wrote (on the files backend, the file).

Each file ends with an HTML comment carrying its values as JSON, so `read_plan`,
`read_findings`, `read_merged` and `read_snapshot` (`orchestrator.readback`) give back
exactly what was written while the rest of the file stays plain, hand-editable markdown.

Invariant: a write either leaves a complete new file (or a complete new plan version) or
nothing; no function here ever deletes or overwrites a findings file or a snapshot. (Only
a resume replaces a subagent's findings file, and only one that no longer reads back as
its findings, from the registry's record: `orchestrator.nodes.subagent.repair_findings`.)
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from orchestrator.docs import CONTEXT_SNAPSHOTS, FINDINGS, Docs
from orchestrator.errors import ArtifactError, SnapshotError, TemplateError
from orchestrator.paths import (
    findings_name,
    iso_timestamp,
    merged_name,
    name_timestamp,
    new_suffix,
    slug,
    timestamp,
    utc,
)
from orchestrator.readback import (
    list_findings,
    list_snapshots,
    parse_meta,
    read_findings,
    read_merged,
    read_plan,
    read_snapshot,
    sections,
)
from orchestrator.templates import (
    Pathish,
    render_findings,
    render_merged,
    render_plan,
    render_snapshot,
)

#: Writers defined here; names, reading back and errors come from `orchestrator.paths`,
#: `orchestrator.readback` and `orchestrator.errors`, so one import serves artifact users.
__all__ = [
    "ArtifactError",
    "SnapshotError",
    "iso_timestamp",
    "keep_hand_edits",
    "list_findings",
    "list_snapshots",
    "name_timestamp",
    "new_suffix",
    "read_findings",
    "read_merged",
    "read_plan",
    "read_snapshot",
    "sections",
    "slug",
    "timestamp",
    "write_findings",
    "write_merged",
    "write_plan",
    "write_snapshot",
]

# -- names ----------------------------------------------------------------------------
_stamp = timestamp  # the writers have a parameter called `timestamp`


# -- research plan --------------------------------------------------------------------
def write_plan(
    memory: Any,
    task_id: str,
    *,
    objective: str,
    phase: str,
    strategy: str = "",
    key_questions: Iterable[Any] = (),
    completed: Iterable[str] = (),
    in_progress: Iterable[str] = (),
    pending: Iterable[str] = (),
    constraints: Iterable[str] = (),
    next_actions: Iterable[str] = (),
    skipped: Iterable[str] = (),
    project_dir: Pathish | None = None,
) -> Path:
    """Write (or rewrite) `research_plans/{task_id}.md`; returns its path.

    Args:
        key_questions: `(text, answered)` pairs, `{"text", "answered"}` dicts or strings.
        completed, in_progress, pending: subtask ids or titles for the Progress section.
        project_dir: where a project's `templates/` override lives (default: cwd).
    """
    text = render_plan(
        {
            "task_id": task_id,
            "phase": phase,
            "objective": objective,
            "strategy": strategy,
            "key_questions": list(key_questions),
            "completed": list(completed),
            "in_progress": list(in_progress),
            "pending": list(pending),
            "constraints": list(constraints),
            "next_actions": list(next_actions),
            "skipped": list(skipped),
            "updated": iso_timestamp(),
        },
        project_dir,
    )
    docs = Docs.of(memory)
    rel = docs.plan(task_id)
    try:
        previous = docs.read_text(rel)
    except UnicodeDecodeError:
        previous = None
    if previous is not None:
        text = keep_hand_edits(previous, text, project_dir)
    return docs.write_text(rel, text)


def _append_to_section(text: str, title: str, lines: list[str]) -> str:
    """`text` with `lines` added at the end of its `## title` section (if it has one)."""
    head = re.search(rf"^## {re.escape(title)}[ \t]*$", text, flags=re.MULTILINE)
    if head is None:
        return text
    nxt = re.search(r"^(## |<!-- tether:)", text[head.end() :], flags=re.MULTILINE)
    end = head.end() + nxt.start() if nxt else len(text)
    body = text[head.end() : end].rstrip("\n")
    return text[: head.end()] + body + "\n" + "\n".join(lines) + "\n\n" + text[end:]


#: The sections of a research plan that tether writes; any other section is the user's.
PLAN_SECTIONS = (
    "Objective",
    "Strategy",
    "Key Questions",
    "Progress",
    "Constraints",
    "Next Actions",
)


def keep_hand_edits(previous: str, new: str, project_dir: Pathish | None = None) -> str:
    """`new` plan text carrying over what a person added to the `previous` one.

    Users edit plans by hand (a constraint for the agents, a notes section). Lines added
    to a section tether writes are found by re-rendering the previous file's metadata
    (what tether wrote) and keeping the lines that are not in it; they are appended to the
    same section of the new text. Sections tether does not write are kept whole. Lines a
    person deleted from tether's sections come back: tether owns those.
    """
    if not previous.strip():
        return new
    meta = parse_meta(previous, "plan")
    ours: set[str] = set()
    if meta is not None:
        try:
            ours = {line.strip() for line in render_plan(meta, project_dir).splitlines()}
        except TemplateError:  # a changed template: keep only the user's own sections
            meta = None
    added: dict[str, list[str]] = {}
    extra: list[str] = []
    for title, body in sections(previous).items():
        if title not in PLAN_SECTIONS:
            extra.append(f"## {title}\n{body}\n")
        elif meta is not None:
            lines = [ln for ln in body.splitlines() if ln.strip() and ln.strip() not in ours]
            if lines:
                added[title] = lines
    for title, lines in added.items():
        new = _append_to_section(new, title, lines)
    if extra:
        marker = new.rfind("<!-- tether:plan ")
        cut = marker if marker >= 0 else len(new)
        new = new[:cut] + "\n".join(extra) + "\n" + new[cut:]
    return new


# -- findings -------------------------------------------------------------------------
def findings_text(
    agent: str,
    *,
    task: str,
    summary: str,
    timestamp: datetime | str | None = None,
    task_id: str | None = None,
    subtask_id: str | None = None,
    phase: str | None = None,
    project_dir: Pathish | None = None,
    **finding: Any,
) -> str:
    """The markdown `write_findings` writes (same arguments, but the memory).

    `finding`: the other fields of an `orchestrator.run_model.Finding` (`status`,
    `key_discoveries`, `files`, `files_written`, `open_questions`, `recommendations`, ...);
    an unknown one is a `TemplateError`.
    """
    return render_findings(
        {
            **{
                k: list(v) if isinstance(v, Iterable) and not isinstance(v, str | Mapping) else v
                for k, v in finding.items()
            },
            "agent": agent,
            "task": task,
            "summary": summary,
            "timestamp": iso_timestamp(utc(timestamp)),
            "task_id": task_id,
            "subtask_id": subtask_id,
            "phase": phase,
        },
        project_dir,
    )


def write_findings(
    memory: Any,
    agent: str,
    *,
    timestamp: datetime | str | None = None,
    durable: bool = True,
    **fields: Any,
) -> Path:
    """Create `findings/{agent}_{ts}.md` for one finished subagent; returns its path.

    Args:
        agent: the subagent's name (slugged for the file name, shown as given).
        timestamp: when the work finished (datetime or ISO string; default now).
        durable: False skips the fsyncs, for a caller that keeps the findings durable
            elsewhere and writes the file again when a crash of the machine lost it or cut
            it short (the orchestrator's subagents: their registry record).
        fields: `findings_text`'s: `task`, `summary` and optionally `status`,
            `key_discoveries`, `files` (the files examined: `(path, description)` pairs,
            `{"path", "description"}` dicts or `FileNote`s), `files_written` (the same
            forms; `## Files Modified/Created`, only when there are some),
            `open_questions`, `recommendations`, `task_id`, `subtask_id` and `phase`
            (recorded in the file's metadata for recovery), `project_dir`.
    """
    when = utc(timestamp)
    text = findings_text(agent, timestamp=when, **fields)
    stem = Path(findings_name(agent, when)).stem
    return Docs.of(memory).create_unique(FINDINGS, stem, ".md", text, durable=durable)


def write_merged(
    memory: Any,
    task_id: str,
    phase: str,
    findings: Sequence[Mapping[str, Any]],
    *,
    timestamp: datetime | str | None = None,
    project_dir: Pathish | None = None,
) -> Path:
    """Create `findings/merged_{ts}.md` synthesising one batch; returns its path.

    Args:
        findings: one dict per subagent with `agent` and any of `summary`, `status`,
            `task`, `subtask_id`, `key_discoveries`, `files`, `files_written`, `open_questions`,
            `recommendations`, `path` (its findings file), `timestamp`, `task_id`, `phase`.
    """
    when = utc(timestamp)
    text = render_merged(
        {
            "task_id": task_id,
            "phase": phase,
            "timestamp": iso_timestamp(when),
            "findings": [dict(f) for f in findings],
        },
        project_dir,
    )
    return Docs.of(memory).create_unique(FINDINGS, Path(merged_name(when)).stem, ".md", text)


# -- snapshots ------------------------------------------------------------------------
def write_snapshot(
    memory: Any,
    *,
    task_id: str,
    phase: str,
    reason: str = "manual",
    token_count: int = 0,
    conversation_summary: str = "",
    what_was_found: str = "",
    what_is_left: str = "",
    active_agents: Iterable[str] = (),
    important_context: str = "",
    files_in_play: Iterable[Any] = (),
    pending_decisions: Iterable[str] = (),
    resume_instructions: str = "",
    plan_path: str | None = None,
    extra: Mapping[str, Any] | None = None,
    objective: str | None = None,
    timestamp: datetime | str | None = None,
    project_dir: Pathish | None = None,
) -> Path:
    """Create `context_snapshots/snap_{ts}.md`; returns its path.

    Args:
        reason: `token_limit`, `manual`, `phase_end`, ...
        token_count: the lead's context size when the snapshot was taken.
        what_was_found, what_is_left: digests of the findings and of the remaining work
            (markdown; `orchestrator.snapshot_content` assembles them).
        files_in_play: `(path, status)` pairs or dicts.
        plan_path: the research plan, relative to the memory directory.
        extra: any JSON-able values a resumer needs (kept in the metadata block).
        objective: the task objective (also accepted as `extra["objective"]`).
    """
    extra = dict(extra or {})
    if objective is None and isinstance(extra.get("objective"), str):
        objective = extra["objective"]
    when = utc(timestamp)
    text = render_snapshot(
        {
            "task_id": task_id,
            "phase": phase,
            "reason": reason,
            "token_count": token_count,
            "timestamp": iso_timestamp(when),
            "objective": objective,
            "conversation_summary": conversation_summary,
            "what_was_found": what_was_found,
            "what_is_left": what_is_left,
            "active_agents": list(active_agents),
            "important_context": important_context,
            "files_in_play": list(files_in_play),
            "pending_decisions": list(pending_decisions),
            "resume_instructions": resume_instructions,
            "plan_path": plan_path,
            "extra": extra,
        },
        project_dir,
    )
    return Docs.of(memory).create_unique(CONTEXT_SNAPSHOTS, f"snap_{_stamp(when)}", ".md", text)
