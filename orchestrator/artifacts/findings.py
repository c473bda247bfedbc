"""Findings: `findings/{agent}_{ts}.md` per finished subagent, `findings/merged_{ts}.md`
per merged batch.

This module owns everything about these files: their names (`findings_name`,
`merged_name`; `ts` is UTC `YYYYMMDDTHHMMSSffffffZ`, so names sort by time), their template
inputs (views of `orchestrator.types.Finding`), rendering each `Finding` field by its
type (`finding_views`), writing (`write_finding` for a subagent's `FindingRecord`,
`write_findings` for loose fields, `write_merged`), reading back
(`read_findings`, `read_merged`, their metadata line) and listing (`list_findings`).

New files are created with `Docs.create_unique`, so a taken name (two writers in the same
microsecond) gets a suffix, names never collide and an existing file is never overwritten.
Agent names are slugged for file names; the exact names stay in the file.

Invariant: no function here deletes or overwrites a findings file. (Only a resume replaces
a subagent's findings file, and only one that no longer reads back as its findings, from
the registry's record: `orchestrator.artifacts.recorded.repair_findings`.)
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, field_validator
from pydantic.fields import FieldInfo

from orchestrator.artifacts.documents import FINDINGS, Docs
from orchestrator.artifacts.finding import (
    UNGROUNDED,
    FindingRecord,
    grounding,
    grounding_line,
    unread_mark,
)
from orchestrator.artifacts.names import iso_timestamp, slug, timestamp, utc
from orchestrator.artifacts.render import (
    FileNoteInput,
    Pathish,
    _file_views,
    _Input,
    _pairs,
    md_block,
    md_code,
    md_inline,
    render_template,
    validate_input,
)
from orchestrator.artifacts.text import _name, _newest_first, _read_kind, _text_and_meta
from orchestrator.types import INLINE_FIELDS, FileNote, Finding, Inline, model_view

FINDINGS_TEMPLATE = "findings.md.j2"
MERGED_TEMPLATE = "merged_findings.md.j2"


# -- names ----------------------------------------------------------------------------
#: Agent names that would make a findings file look like another kind of artifact.
RESERVED_AGENT_SLUGS = frozenset({"merged"})


def agent_slug(agent: str) -> str:
    """`agent` as the first part of a findings file's name (`merged` -> `agent-merged`)."""
    value = slug(agent)
    return f"agent-{value}" if value.lower() in RESERVED_AGENT_SLUGS else value


def agent_file_name(sub: dict) -> str:
    """`{agent}-{subtask id}` of a subtask, reduced to characters safe in a file name: what
    its subagent's findings file is named after."""
    return slug(f"{sub['agent']}-{sub['id']}", "agent", max_len=120)


def findings_name(agent: str, when: datetime | str) -> str:
    """`findings/{agent}_{ts}.md`: the name a findings file gets when it is free (a taken
    one gets a suffix after the timestamp)."""
    return f"findings/{agent_slug(agent)}_{timestamp(when)}.md"


def merged_name(when: datetime | str) -> str:
    """`findings/merged_{ts}.md`: the name a batch's merged findings get when it is free."""
    return f"findings/merged_{timestamp(when)}.md"


# -- inputs ---------------------------------------------------------------------------
class _FindingBase(_Input):
    """What the template inputs of a finding add to `Finding`: files as pairs too."""

    @field_validator("files", "files_written", "files_unread", mode="before", check_fields=False)
    @classmethod
    def _files(cls, value: Any) -> Any:
        return _pairs(value, "path", "description")


def _lenient(name: str, info: FieldInfo) -> tuple[Any, FieldInfo]:
    """A `Finding` field as a template takes it: notes as `FileNoteInput`, a required text
    defaulting to empty (a merged batch may hold a finding without a summary)."""
    annotation = info.rebuild_annotation()
    if info.annotation == list[FileNote]:
        annotation = list[FileNoteInput]
    if info.is_required():
        info = FieldInfo.merge_field_infos(info, default="")
    return annotation, info


_FindingFields = model_view(
    Finding,
    "_FindingFields",
    "The fields a findings file and its entry in a merged batch share: `Finding`'s, with "
    "the record's identity.",
    field=_lenient,
    base=_FindingBase,
    lead={"agent": (str, ...)},
    extra={
        "task": (str, ""),
        "subtask_id": (str | None, None),
        "task_id": (str | None, None),
        "phase": (str | None, None),
    },
    module=__name__,
)


class FindingsInput(_FindingFields):
    """Everything `findings.md.j2` shows."""

    task: str
    summary: str
    timestamp: str


class MergedFindingInput(_FindingFields):
    """One subagent's findings inside a merged batch."""

    path: str | None = None
    """Where this agent's own findings file is (relative to the memory directory)."""
    timestamp: str | None = None


class CitationsInput(_Input):
    """The check of an answer's citations: how many, and those not found (with why)."""

    checked: int = 0
    not_found: list[dict[str, str]] = []
    """`{"cite": what the answer named, "why": why it is not a source}`."""
    unchecked: int = 0


class AnswerInput(_Input):
    """The lead's answer to the objective, which opens a task's final synthesis."""

    answer: str
    findings: list[str] = []
    files: list[str] = []
    open_questions: list[str] = []
    by: str = "answer"
    """`answer` (the lead's final call), `plan` (it answered alone in its plan)."""
    citations: CitationsInput | None = None
    """How its citations fared (`orchestrator.graph.citations`); None: not checked."""


class MergedInput(_Input):
    """Everything `merged_findings.md.j2` shows."""

    task_id: str
    phase: str
    timestamp: str
    findings: list[MergedFindingInput]
    answer: AnswerInput | None = None


# -- rendering ------------------------------------------------------------------------
def _view(value: Any, inline: bool) -> Any:
    """A value of a finding as its template shows it, by its type."""
    if value is None:
        return ""
    if isinstance(value, str):
        return md_inline(value) if inline else md_block(value)
    if isinstance(value, list) and value and all(isinstance(v, FileNote) for v in value):
        return _file_views(value)
    if isinstance(value, list):
        return [_view(v, inline) for v in value]
    return value


def finding_views(finding: BaseModel) -> dict[str, Any]:
    """Every `Finding` field of `finding` (a template input) as markdown: texts as blocks
    (`Inline` ones on one line), lists item by item, file notes with their code spans."""
    return {
        name: _view(getattr(finding, name), Inline in info.metadata)
        for name, info in Finding.model_fields.items()
    }


def render_findings(
    data: FindingsInput | Mapping[str, Any], project_dir: Pathish | None = None
) -> str:
    """The findings markdown of one subagent."""
    inp = validate_input(FindingsInput, FINDINGS_TEMPLATE, data)
    return render_template(
        FINDINGS_TEMPLATE,
        project_dir,
        **{**finding_views(inp), "files_unread": _unread_views(inp)},
        agent=md_inline(inp.agent),
        task=md_inline(inp.task),
        task_id=md_inline(inp.task_id or ""),
        subtask=md_inline(_subtask_line(inp.subtask_id, inp.task)),
        phase=md_inline(inp.phase or ""),
        timestamp=md_inline(inp.timestamp),
        grounding=md_inline(grounding_line(inp.tools)),
        meta={**inp.model_dump(mode="json"), "grounding": grounding(inp.tools)},
    )


def _unread_views(finding: Any) -> list[dict[str, str]]:
    """The files a finding listed but did not read, each with its mark (`not read`, `not
    found`) and the agent's note."""
    return [
        {**view, "mark": unread_mark(finding.tools, note.path)}
        for note, view in zip(finding.files_unread, _file_views(finding.files_unread), strict=True)
    ]


def _subtask_line(subtask_id: str | None, title: str) -> str:
    """`id: title` of a subtask (either alone when the other is missing; a title that
    opens with `[id]`, as the orchestrator writes it, shows the id once)."""
    if subtask_id and title.startswith(f"[{subtask_id}] "):
        title = title[len(subtask_id) + 3 :]
    if subtask_id and title and title != subtask_id:
        return f"{subtask_id}: {title}"
    return subtask_id or title or "-"


def _labels(batch: Sequence[MergedFindingInput]) -> list[str]:
    """How each finding is attributed: its agent, or its subtask when agents repeat."""
    per_agent = Counter(f.agent for f in batch)
    return [
        md_inline(f.subtask_id if per_agent[f.agent] > 1 and f.subtask_id else f.agent)
        for f in batch
    ]


def _merged_files(
    findings: Sequence[MergedFindingInput], kind: str = "files"
) -> list[dict[str, Any]]:
    """Files (`kind`: `files` or `files_written`) across the batch, first description wins,
    with the agents that named them."""
    by_path: dict[str, dict[str, Any]] = {}
    for f, agent in zip(findings, _labels(findings), strict=True):
        for note in getattr(f, kind):
            row = by_path.setdefault(
                note.path,
                {
                    "path": note.path,
                    "code": md_code(note.path),
                    "description": md_block(note.description),
                    "agents": [],
                },
            )
            if not row["description"] and note.description:
                row["description"] = md_block(note.description)
            if agent not in row["agents"]:
                row["agents"].append(agent)
    return list(by_path.values())


def _merged_view(f: MergedFindingInput, label: str) -> dict[str, Any]:
    """One finding of a merged batch as the template shows it; `inline`: its one-line
    fields together (`completed`)."""
    views = finding_views(f)
    inline = [v for v in (views[k] for k in INLINE_FIELDS) if v]
    if grounding(f.tools) == UNGROUNDED:
        inline.append(f"{UNGROUNDED}: no tool call")
    return {
        **views,
        "agent": md_inline(f.agent),
        "label": label,
        "task": md_inline(f.task),
        "inline": ", ".join(inline),
        "summary": md_block(f.summary) or "_No summary._",
        "source_code": md_code(f.path) if f.path else "",
    }


def render_merged(data: MergedInput | Mapping[str, Any], project_dir: Pathish | None = None) -> str:
    """The merged-findings markdown of one batch."""
    inp = validate_input(MergedInput, MERGED_TEMPLATE, data)
    counts: dict[str, int] = {}
    for f in inp.findings:
        counts[f.status] = counts.get(f.status, 0) + 1
    labels = _labels(inp.findings)
    views = [_merged_view(f, label) for f, label in zip(inp.findings, labels, strict=True)]
    return render_template(
        MERGED_TEMPLATE,
        project_dir,
        task_id=md_inline(inp.task_id),
        phase=md_inline(inp.phase),
        timestamp=md_inline(inp.timestamp),
        status_counts=", ".join(f"{n} {md_inline(s)}" for s, n in sorted(counts.items())) or "none",
        findings=views,
        sources=f"{len(views)} finding{'' if len(views) == 1 else 's'}",
        files=_merged_files(inp.findings),
        files_written=_merged_files(inp.findings, "files_written"),
        discoveries_count=sum(len(f.key_discoveries) for f in inp.findings),
        questions_count=sum(len(f.open_questions) for f in inp.findings),
        recommendations_count=sum(len(f.recommendations) for f in inp.findings),
        answer=_answer_view(inp.answer),
        meta=inp.model_dump(mode="json"),
    )


def _answer_view(answer: AnswerInput | None) -> dict[str, Any] | None:
    """The lead's answer as `merged_findings.md.j2` shows it."""
    if answer is None:
        return None
    return {
        "text": md_block(answer.answer),
        "findings": [md_code(p) for p in answer.findings],
        "files": [md_code(p) for p in answer.files],
        "open_questions": [md_block(q) for q in answer.open_questions],
        "offline": answer.by == "offline",
        "citations": _citations_view(answer.citations),
    }


def _citations_view(citations: CitationsInput | None) -> dict[str, Any] | None:
    """The check of an answer's citations as `merged_findings.md.j2` shows it."""
    if citations is None:
        return None
    failed = [
        f"{md_code(c.get('cite', ''))} ({md_inline(c.get('why', ''))})" for c in citations.not_found
    ]
    if citations.unchecked:
        failed.append(f"{citations.unchecked} more, not checked (over the limit): dropped")
    return {"checked": citations.checked, "not_found": failed}


# -- writing --------------------------------------------------------------------------
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

    `finding`: the other fields of an `orchestrator.types.Finding` (`status`,
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


def finding_text(
    record: FindingRecord,
    task_id: str,
    timestamp: datetime | str,
    project_dir: Pathish | None = None,
) -> str:
    """The markdown of `record`'s findings file (what `write_finding` writes)."""
    return findings_text(
        _file_agent(record),
        timestamp=timestamp,
        project_dir=project_dir,
        **record.file_fields(task_id),
    )


def write_finding(
    memory: Docs,
    record: FindingRecord,
    task_id: str,
    *,
    timestamp: datetime | str,
    durable: bool = True,
    project_dir: Pathish | None = None,
) -> tuple[Path, bool]:
    """Create the findings file of one subagent's `record` (named after its agent and
    subtask id and `timestamp`, `finding_file_name`); returns its path and whether that
    name was taken (the file got a suffix: its path must be recorded). `durable`: as
    `write_findings`'s."""
    path = write_findings(
        memory,
        _file_agent(record),
        timestamp=timestamp,
        durable=durable,
        project_dir=project_dir,
        **record.file_fields(task_id),
    )
    return path, path.name != Path(finding_file_name(record, timestamp)).name


def finding_file_name(record: FindingRecord, timestamp: datetime | str) -> str:
    """The name `write_finding` gives `record`'s file at `timestamp` when it is free."""
    return findings_name(_file_agent(record), timestamp)


def _file_agent(record: FindingRecord) -> str:
    return agent_file_name({"agent": record.agent, "id": record.id})


def write_merged(
    memory: Any,
    task_id: str,
    phase: str,
    findings: Sequence[Mapping[str, Any]],
    *,
    timestamp: datetime | str | None = None,
    project_dir: Pathish | None = None,
    answer: Mapping[str, Any] | None = None,
) -> Path:
    """Create `findings/merged_{ts}.md` synthesising one batch; returns its path.

    Args:
        findings: one dict per subagent with `agent` and any of `summary`, `status`,
            `task`, `subtask_id`, `key_discoveries`, `files`, `files_written`, `open_questions`,
            `recommendations`, `path` (its findings file), `timestamp`, `task_id`, `phase`.
        answer: the lead's answer (`answer`, `findings`, `files`, `open_questions`, `by`)
            for a task's final synthesis; it comes first in the file.
    """
    when = utc(timestamp)
    text = render_merged(
        {
            "task_id": task_id,
            "phase": phase,
            "timestamp": iso_timestamp(when),
            "findings": [dict(f) for f in findings],
            "answer": {k: v for k, v in answer.items() if k in AnswerInput.model_fields}
            if answer
            else None,
        },
        project_dir,
    )
    return Docs.of(memory).create_unique(FINDINGS, Path(merged_name(when)).stem, ".md", text)


# -- reading --------------------------------------------------------------------------
def read_findings(path: Path, docs: Docs | None = None) -> dict[str, Any]:
    """The values a findings file was written with, plus `sections`, `text` and `path`.

    Files written before "Files Examined" existed list every file under "Files
    Modified/Created"; they read back the same way (their `files`, and `files_written`
    empty), with that heading in `sections`.
    """
    return {"files_written": [], **_read_kind(path, "findings", "findings file", docs)}


def findings_meta(path: Path, docs: Docs | None = None) -> dict[str, Any]:
    """Only the values a findings file was written with (no sections): what a lookup by
    task and subtask compares."""
    return _text_and_meta(path, "findings", "findings file", docs)[1]


def read_merged(path: Path, docs: Docs | None = None) -> dict[str, Any]:
    """The values a merged-findings file was written with, plus `sections`, `text`, `path`."""
    return _read_kind(path, "merged", "merged findings file", docs)


def list_findings(memory: Any, *, merged: bool | None = None) -> list[Path]:
    """Findings files, newest first; `merged=True/False` keeps only merged/agent files."""
    docs = Docs.of(memory)
    found = docs.list(FINDINGS, ".md")
    if merged is not None:
        found = [i for i in found if _name(i).startswith("merged_") == merged]
    return _newest_first(docs, found)
