"""Rendering the files the orchestrator writes: validated inputs in, checked text out.

Every artifact (research plan, findings, merged findings, snapshot, checkpoint) is rendered
from a Jinja template through `memory.templating.render` (sandboxed, `StrictUndefined`, a
project's `templates/` overrides tether's). This module adds three guarantees on top:

* **Inputs are validated** by a pydantic model with `extra="forbid"`, so a misspelt or
  missing field is a `TemplateError` naming it, never a silently empty section.
* **Markdown stays markdown**: values are inserted as text (Jinja never re-evaluates a
  `{{` inside a value). Inline values (titles, `**Label**:` lines) have their line breaks
  folded; block values have lines that would become headings, rules or an unclosed code
  fence neutralised; list items indent continuation lines in the template. The exact values
  also travel as JSON in a trailing HTML comment (`<!-- tether:KIND {...} -->`, written with
  `tojson`, which escapes `<` and `>` so no value can close the comment), which
  `orchestrator.readback.parse_meta` reads back.
* **JSON is valid and checked**: the checkpoint template passes every value through
  `tojson`; its output must `json.loads` (no NaN/Infinity) and validate against
  `orchestrator/schemas/checkpoint.schema.json`, else `TemplateError`.

Invariant: a render function either returns text that parses back to the values it was
given, or raises `TemplateError` with a one-line message; it never writes anything.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic.fields import FieldInfo

from memory.templating import TemplateRenderError, render
from orchestrator.checkpoint_model import checkpoint_json_schema, checkpoint_problem
from orchestrator.errors import TemplateError
from orchestrator.jsonvalues import JsonObject, _json_problem  # noqa: F401 - re-exported
from orchestrator.readback import loads_strict
from orchestrator.run_model import FileNote, Finding, Inline, model_view

SCHEMA_PATH = Path(__file__).resolve().parent / "schemas" / "checkpoint.schema.json"

PLAN_TEMPLATE = "research_plan.md.j2"
FINDINGS_TEMPLATE = "findings.md.j2"
MERGED_TEMPLATE = "merged_findings.md.j2"
SNAPSHOT_TEMPLATE = "snapshot.md.j2"
CHECKPOINT_TEMPLATE = "checkpoint.json.j2"

_HEADING_LIKE = re.compile(r"^(\s{0,3})(#{1,6}(?:\s|$)|[-=*_]{3,}\s*$|[=]+\s*$)")
_FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")

Pathish = str | os.PathLike[str]


# -- markdown helpers -----------------------------------------------------------------
def _lines(text: str) -> list[str]:
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")


def md_inline(text: str) -> str:
    """`text` on one line (line breaks folded to spaces), for titles and `**Label**:` lines."""
    return " ".join(part.strip() for part in _lines(str(text)) if part.strip())


def md_block(text: str) -> str:
    """`text` as markdown paragraphs that cannot add headings or swallow the rest of the file.

    Lines that would turn into a heading (`# x`) or a rule/setext underline (`---`) are
    escaped with a backslash; an unclosed code fence is closed at the end of the value.
    """
    out: list[str] = []
    open_fence: str | None = None
    for line in _lines(str(text)):
        fence = _FENCE.match(line)
        if fence:
            marker = fence.group(1)
            if open_fence is None:
                open_fence = marker
            elif marker[0] == open_fence[0] and len(marker) >= len(open_fence):
                open_fence = None
        elif open_fence is None:
            line = _HEADING_LIKE.sub(lambda m: m.group(1) + "\\" + m.group(2), line)
        out.append(line)
    if open_fence is not None:
        out.append(open_fence)
    return "\n".join(out).strip("\n")


def md_code(text: str) -> str:
    """`text` as an inline code span, with a fence longer than any backtick run inside."""
    value = md_inline(text)
    longest = max((len(run) for run in re.findall(r"`+", value)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if value.startswith("`") or value.endswith("`") else ""
    return f"{fence}{pad}{value}{pad}{fence}"


# -- inputs ---------------------------------------------------------------------------
class _Input(BaseModel):
    model_config = ConfigDict(extra="forbid")


class FileNoteInput(FileNote):
    """A file examined or changed, with a note (`(path, description)` pairs are accepted)."""

    description: str = ""


class QuestionInput(_Input):
    """A key question of the plan and whether it has been answered."""

    text: str
    answered: bool = False


def _pairs(value: Any, first: str, second: str) -> Any:
    """Accept `(a, b)` tuples and bare strings where a model with two fields is expected."""
    if not isinstance(value, list | tuple):
        return value
    out = []
    for item in value:
        if isinstance(item, str):
            out.append({first: item})
        elif isinstance(item, list | tuple) and len(item) == 2:
            out.append({first: item[0], second: item[1]})
        elif isinstance(item, BaseModel):
            out.append(item.model_dump())
        else:
            out.append(item)
    return out


class PlanInput(_Input):
    """Everything `research_plan.md.j2` shows."""

    task_id: str
    phase: str
    objective: str
    strategy: str = ""
    key_questions: list[QuestionInput] = Field(default_factory=list)
    completed: list[str] = Field(default_factory=list)
    in_progress: list[str] = Field(default_factory=list)
    pending: list[str] = Field(default_factory=list)
    constraints: list[str] = Field(default_factory=list)
    next_actions: list[str] = Field(default_factory=list)
    skipped: list[str] = Field(default_factory=list)
    """Phases not run because the lead declared the objective answered (with the reason)."""
    updated: str

    @field_validator("key_questions", mode="before")
    @classmethod
    def _questions(cls, value: Any) -> Any:
        return _pairs(value, "text", "answered")


class _FindingBase(_Input):
    """What the template inputs of a finding add to `Finding`: files as pairs too."""

    @field_validator("files", "files_written", mode="before", check_fields=False)
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


class MergedInput(_Input):
    """Everything `merged_findings.md.j2` shows."""

    task_id: str
    phase: str
    timestamp: str
    findings: list[MergedFindingInput]


class SnapshotInput(_Input):
    """Everything `snapshot.md.j2` shows."""

    task_id: str
    phase: str
    reason: str = "manual"
    token_count: int = Field(default=0, ge=0)
    timestamp: str
    objective: str | None = None
    conversation_summary: str = ""
    what_was_found: str = ""
    what_is_left: str = ""
    active_agents: list[str] = Field(default_factory=list)
    important_context: str = ""
    files_in_play: list[FileNoteInput] = Field(default_factory=list)
    pending_decisions: list[str] = Field(default_factory=list)
    resume_instructions: str = ""
    plan_path: str | None = None
    extra: JsonObject = Field(default_factory=dict)

    @field_validator("files_in_play", mode="before")
    @classmethod
    def _files(cls, value: Any) -> Any:
        return _pairs(value, "path", "description")


def validate_input(
    model: type[BaseModel], template: str, data: BaseModel | Mapping[str, Any]
) -> Any:
    """`data` as a `model` (validated if it is a mapping), else a one-line `TemplateError`."""
    if isinstance(data, model):
        return data
    try:
        return model.model_validate(dict(data))
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "(input)"
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        raise TemplateError(
            f"invalid input for template {template!r}: field {where!r}: {err['msg']}{more}"
        ) from None


# -- rendering ------------------------------------------------------------------------
def render_template(name: str, project_dir: Pathish | None = None, **context: Any) -> str:
    """Render `name` with `context`; every failure is a one-line `TemplateError`."""
    try:
        return render(name, project_dir, **context)
    except TemplateRenderError as exc:
        raise TemplateError(str(exc)) from None
    except (TypeError, ValueError) as exc:  # e.g. `tojson` given something not JSON-able
        raise TemplateError(f"template {name!r} could not serialise a value: {exc}") from None


def _file_views(files: Sequence[FileNoteInput]) -> list[dict[str, str]]:
    return [
        {"path": f.path, "code": md_code(f.path), "description": md_block(f.description)}
        for f in files
    ]


def _blocks(items: Sequence[str]) -> list[str]:
    return [md_block(item) for item in items]


def render_plan(data: PlanInput | Mapping[str, Any], project_dir: Pathish | None = None) -> str:
    """The research plan markdown for `data` (a `PlanInput` or its fields)."""
    inp = validate_input(PlanInput, PLAN_TEMPLATE, data)
    return render_template(
        PLAN_TEMPLATE,
        project_dir,
        task_id=md_inline(inp.task_id),
        phase=md_inline(inp.phase),
        updated=md_inline(inp.updated),
        objective=md_block(inp.objective),
        strategy=md_block(inp.strategy),
        key_questions=[
            {"text": md_block(q.text), "answered": q.answered} for q in inp.key_questions
        ],
        completed=[md_inline(x) for x in inp.completed],
        in_progress=[md_inline(x) for x in inp.in_progress],
        pending=[md_inline(x) for x in inp.pending],
        skipped=[md_inline(x) for x in inp.skipped],
        constraints=_blocks(inp.constraints),
        next_actions=_blocks(inp.next_actions),
        meta=inp.model_dump(mode="json"),
    )


def _view(value: Any, inline: bool) -> Any:
    """A value of a finding as its template shows it, by its type."""
    if value is None:
        return ""
    if isinstance(value, str):
        return md_inline(value) if inline else md_block(value)
    if isinstance(value, list) and all(isinstance(v, FileNote) for v in value) and value:
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
        **finding_views(inp),
        agent=md_inline(inp.agent),
        task=md_inline(inp.task),
        timestamp=md_inline(inp.timestamp),
        meta=inp.model_dump(mode="json"),
    )


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


def render_merged(data: MergedInput | Mapping[str, Any], project_dir: Pathish | None = None) -> str:
    """The merged-findings markdown of one batch."""
    inp = validate_input(MergedInput, MERGED_TEMPLATE, data)
    counts: dict[str, int] = {}
    for f in inp.findings:
        counts[f.status] = counts.get(f.status, 0) + 1
    views = [
        {
            **finding_views(f),
            "agent": md_inline(f.agent),
            "label": label,
            "task": md_inline(f.task),
            "summary": md_block(f.summary) or "_No summary._",
            "source_code": md_code(f.path) if f.path else "",
        }
        for f, label in zip(inp.findings, _labels(inp.findings), strict=True)
    ]
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
        meta=inp.model_dump(mode="json"),
    )


def render_snapshot(
    data: SnapshotInput | Mapping[str, Any], project_dir: Pathish | None = None
) -> str:
    """The context snapshot markdown."""
    inp = validate_input(SnapshotInput, SNAPSHOT_TEMPLATE, data)
    return render_template(
        SNAPSHOT_TEMPLATE,
        project_dir,
        timestamp=md_inline(inp.timestamp),
        token_count=inp.token_count,
        reason=md_inline(inp.reason),
        conversation_summary=md_block(inp.conversation_summary),
        what_was_found=md_block(inp.what_was_found),
        what_is_left=md_block(inp.what_is_left),
        task_id=md_inline(inp.task_id),
        objective=md_block(inp.objective or ""),
        phase=md_inline(inp.phase),
        active_agents=[md_inline(a) for a in inp.active_agents],
        plan_path=inp.plan_path or "",
        plan_code=md_code(inp.plan_path) if inp.plan_path else "",
        important_context=md_block(inp.important_context),
        files_in_play=_file_views(inp.files_in_play),
        pending_decisions=_blocks(inp.pending_decisions),
        resume_instructions=md_block(inp.resume_instructions),
        meta=inp.model_dump(mode="json"),
    )


# -- JSON and the checkpoint schema ---------------------------------------------------
def checkpoint_schema() -> dict[str, Any]:
    """The checkpoint JSON Schema (draft 2020-12), generated from `SavedCheckpoint`; the
    shipped `orchestrator/schemas/checkpoint.schema.json` is the same, pinned by a test."""
    return checkpoint_json_schema()


def checkpoint_schema_problem(obj: Any) -> str | None:
    """None when `obj` is a valid checkpoint file, else its first problem (the model is
    the one validator: `orchestrator.checkpoint_model.checkpoint_problem`)."""
    return checkpoint_problem(obj)


def render_checkpoint(data: Mapping[str, Any], project_dir: Pathish | None = None) -> str:
    """Render `checkpoint.json.j2` with `data` and check the output.

    Raises:
        TemplateError: the template failed, its output is not JSON, or it does not validate
            against the shipped schema (e.g. a project override dropped a field).
    """
    text = render_template(CHECKPOINT_TEMPLATE, project_dir, **dict(data))
    try:
        obj = loads_strict(text)
    except ValueError as exc:
        raise TemplateError(
            f"template {CHECKPOINT_TEMPLATE!r} produced invalid JSON ({exc}); "
            "pass every value through `tojson`"
        ) from None
    problem = checkpoint_schema_problem(obj)
    if problem:
        raise TemplateError(
            f"template {CHECKPOINT_TEMPLATE!r} output fails the checkpoint schema {problem}; "
            f"fix the template or compare it with {str(SCHEMA_PATH)!r}"
        )
    return text
