"""The research plan: `research_plans/{task_id}.md`, one per task, rewritten in place.

The name is `Docs.plan(task_id)` (`orchestrator.artifacts.documents`). `write_plan` renders
`research_plan.md.j2` from a `PlanInput` (the lead's `orchestrator.types.Plan`, each
field rendered by its type, plus the task and its progress) and keeps what a person added by hand
(`keep_hand_edits`); `read_plan` gives back the values it was written with (its metadata
line), its sections and text.

Invariant: a write leaves a complete new plan version or nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pydantic import Field, field_validator
from pydantic.fields import FieldInfo

from orchestrator.artifacts.documents import Docs
from orchestrator.artifacts.names import iso_timestamp
from orchestrator.artifacts.render import (
    Pathish,
    _Input,
    _pairs,
    md_block,
    md_code,
    md_inline,
    render_template,
    validate_input,
)
from orchestrator.artifacts.text import _read_kind, parse_meta, sections
from orchestrator.errors import TemplateError
from orchestrator.types import Plan, model_view

PLAN_TEMPLATE = "research_plan.md.j2"


class QuestionInput(_Input):
    """A key question of the plan and whether it has been answered."""

    text: str
    answered: bool = False


class _PlanBase(_Input):
    """What the plan file's input adds to `Plan`: key questions as pairs or strings too."""

    @field_validator("key_questions", mode="before", check_fields=False)
    @classmethod
    def _questions(cls, value: Any) -> Any:
        return _pairs(value, "text", "answered")


def _lenient(name: str, info: FieldInfo) -> tuple[Any, FieldInfo]:
    """A `Plan` field as the template takes it: key questions with whether they are
    answered, a required text defaulting to empty."""
    annotation = info.rebuild_annotation()
    if name == "key_questions":
        annotation = list[QuestionInput]
    if info.is_required():
        info = FieldInfo.merge_field_infos(info, default="")
    return annotation, info


def _progress(description: str) -> tuple[Any, FieldInfo]:
    return list[str], Field(default_factory=list, description=description)


PlanInput = model_view(
    Plan,
    "PlanInput",
    "Everything `research_plan.md.j2` shows: the task, the lead's `Plan` and the progress.",
    field=_lenient,
    base=_PlanBase,
    lead={"task_id": (str, ...), "phase": (str, ...), "objective": (str, ...)},
    extra={
        "completed": _progress("Finished subtasks."),
        "in_progress": _progress("Subtasks running or to be retried."),
        "pending": _progress("Phases still to come."),
        "skipped": _progress(
            "Phases not run because the lead declared the objective answered (with the reason)."
        ),
        "updated": (str, ...),
        "answer": (str, Field(default="", description="The lead's answer, once the task is done.")),
        "answer_path": (str, Field(default="", description="The final synthesis holding it.")),
    },
    module=__name__,
)


def _view(value: Any) -> Any:
    """A value of the lead's `Plan` as the template shows it: texts as blocks, a key
    question with whether it is answered."""
    if isinstance(value, str):
        return md_block(value)
    if isinstance(value, QuestionInput):
        return {"text": md_block(value.text), "answered": value.answered}
    if isinstance(value, list):
        return [_view(v) for v in value]
    return value


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
        **{name: _view(getattr(inp, name)) for name in Plan.model_fields},
        completed=[md_inline(x) for x in inp.completed],
        in_progress=[md_inline(x) for x in inp.in_progress],
        pending=[md_inline(x) for x in inp.pending],
        skipped=[md_inline(x) for x in inp.skipped],
        answer=md_block(inp.answer) if inp.answer else "",
        answer_path=md_code(inp.answer_path) if inp.answer_path else "",
        meta=inp.model_dump(mode="json"),
    )


def write_plan(
    memory: Any,
    task_id: str,
    *,
    objective: str,
    phase: str,
    completed: Iterable[str] = (),
    in_progress: Iterable[str] = (),
    pending: Iterable[str] = (),
    skipped: Iterable[str] = (),
    project_dir: Pathish | None = None,
    answer: str = "",
    answer_path: str = "",
    **plan: Any,
) -> Path:
    """Write (or rewrite) `research_plans/{task_id}.md`; returns its path.

    Args:
        completed, in_progress, pending: subtask ids or titles for the Progress section.
        skipped: phases not run, with the reason.
        answer, answer_path: the lead's answer of a done task and the file that holds it;
            the plan opens with it.
        project_dir: where a project's `templates/` override lives (default: cwd).
        plan: the fields of an `orchestrator.types.Plan` (`strategy`, `key_questions`
            as `(text, answered)` pairs, `{"text", "answered"}` dicts or strings,
            `constraints`, `next_actions`, ...); an unknown one is a `TemplateError`.
    """
    text = render_plan(
        {
            **{k: list(v) if _many(v) else v for k, v in plan.items()},
            "task_id": task_id,
            "phase": phase,
            "objective": objective,
            "completed": list(completed),
            "in_progress": list(in_progress),
            "pending": list(pending),
            "skipped": list(skipped),
            "updated": iso_timestamp(),
            "answer": answer,
            "answer_path": answer_path,
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


def _many(value: Any) -> bool:
    """Whether `value` is a sequence of values given as any iterable (not a text or dict)."""
    return isinstance(value, Iterable) and not isinstance(value, str | Mapping)


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


def read_plan(path: Path, docs: Docs | None = None) -> dict[str, Any]:
    """The values a research plan was written with, plus `sections`, `text` and `path`."""
    return _read_kind(path, "plan", "research plan", docs)
