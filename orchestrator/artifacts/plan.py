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
from typing import TYPE_CHECKING, Any

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

if TYPE_CHECKING:
    from orchestrator.artifacts.documents import MemoryTarget
    from orchestrator.types import JsonObject

PLAN_TEMPLATE = "research_plan.md.j2"


class QuestionInput(_Input):
    """A key question of the plan and whether it has been answered."""

    text: str
    answered: bool = False
    """The lead said so (`PhasePlan.answered`)."""
    addressed_by: list[str] = Field(default_factory=list)
    """What of a done task addressed it (subtask keys, `the answer`): see `addressed_by`."""


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
        "waiting": _progress("Subtasks of a plan that waits for a person's approval."),
        "pending": _progress("Phases still to come."),
        "skipped": _progress(
            "Phases not run because the lead declared the objective answered (with the reason)."
        ),
        "waves": _progress("Phases that ran in more than one wave, with their counts."),
        "notes": _progress(
            "What tether changed in or could not check of the lead's plans (a dropped "
            "subtask, a scope removed or not checked)."
        ),
        "updated": (str, ...),
        "answer": (str, Field(default="", description="The lead's answer, once the task is done.")),
        "answer_path": (str, Field(default="", description="The final synthesis holding it.")),
    },
    module=__name__,
)


def _view(value: object) -> Any:
    """A value of the lead's `Plan` as the template shows it: texts as blocks, a key
    question with whether it is answered."""
    if isinstance(value, str):
        return md_block(value)
    if isinstance(value, QuestionInput):
        by = [md_inline(b) for b in value.addressed_by]
        shown = ", ".join(by[:MAX_ADDRESSED]) + (
            f" (+{len(by) - MAX_ADDRESSED} more)" if len(by) > MAX_ADDRESSED else ""
        )
        return {"text": md_block(value.text), "answered": value.answered, "by": shown}
    if isinstance(value, list):
        return [_view(v) for v in value]
    return value


# -- key questions of a done task -----------------------------------------------------
MAX_ADDRESSED = 4
"""Most sources named after a key question (the rest counted)."""
_STOP = frozenset(
    "what which where when how why who whom whose does do did is are was were be been the a an "
    "and or of in on at to for from by with this that these those it its should would could "
    "can will matter matters report objective there their them they each about into".split()
)
_WORD = re.compile(r"[a-z][a-z0-9_]{2,}")


def _stems(text: str) -> set[str]:
    """Words of `text` cut to five letters (`redirects`, `redirect` and `redirected` meet)."""
    return {w[:5] for w in _WORD.findall(text.lower()) if w not in _STOP}


def _names(question: str, path: str) -> bool:
    """Whether `question` names `path` (a file or folder) or a folder holding it."""
    return any(
        re.search(rf"(?<![\w/.-]){re.escape(part)}(?![\w/-])", question) for part in _prefixes(path)
    )


def _prefixes(path: str) -> list[str]:
    parts = [p for p in str(path).strip("/").split("/") if p and p != "."]
    return ["/".join(parts[: i + 1]) for i in range(len(parts))]


def addressed_by(
    question: str,
    records: Iterable[Mapping[str, object]],
    *,
    phases: Iterable[str] = (),
    answer: str = "",
) -> list[str]:
    """What addressed a key question of a done task: the keys of the findings `records`
    (each with `key`, `phase`, `scope`, `files`, `summary`, `key_discoveries`), and
    `the answer` (the lead's `answer`). Nothing is judged true or false here: a question
    is *addressed* when the work it asks about was done.

    * A question that names phases (`What should the review phase report?`) or folders
      and files of the findings (`Which files in lib/router matter?`) is addressed by the
      findings of those phases that cover those places (their scope or files examined).
    * Any other question is addressed by the answer, or a finding, whose text holds every
      content word of the question (first five letters, so `redirects` meets `redirect`).
    * A question with no content word, or that nothing matches, is addressed by nothing:
      the plan leaves it open and says so.
    """
    records = list(records)
    named = [p for p in phases if re.search(rf"\b{re.escape(p)}\b", question, re.I)]
    places = {
        str(r.get("key")): [*(r.get("scope") or []), *(_note_path(f) for f in r.get("files") or [])]
        for r in records
    }
    folders = any(_names(question, p) for ps in places.values() for p in ps if p)
    if named or folders:
        return [
            str(r.get("key"))
            for r in records
            if (not named or r.get("phase") in named)
            and (not folders or any(_names(question, p) for p in places[str(r.get("key"))] if p))
        ]
    wanted = _stems(question)
    if not wanted:
        return []
    out = ["the answer"] if answer and wanted <= _stems(answer) else []
    for r in records:
        said = " ".join([str(r.get("summary") or ""), *map(str, r.get("key_discoveries") or [])])
        if wanted <= _stems(said):
            out.append(str(r.get("key")))
    return out


def _note_path(note: object) -> str:
    if isinstance(note, Mapping):
        return str(note.get("path") or "")
    return str(getattr(note, "path", "") or "")


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
        waiting=[md_inline(x) for x in inp.waiting],
        pending=[md_inline(x) for x in inp.pending],
        skipped=[md_inline(x) for x in inp.skipped],
        waves=[md_inline(x) for x in inp.waves],
        notes=[md_inline(x) for x in inp.notes],
        answer=md_block(inp.answer) if inp.answer else "",
        answer_path=md_code(inp.answer_path) if inp.answer_path else "",
        meta=inp.model_dump(mode="json"),
    )


def write_plan(
    memory: MemoryTarget,
    task_id: str,
    *,
    objective: str,
    phase: str,
    completed: Iterable[str] = (),
    in_progress: Iterable[str] = (),
    waiting: Iterable[str] = (),
    pending: Iterable[str] = (),
    skipped: Iterable[str] = (),
    waves: Iterable[str] = (),
    project_dir: Pathish | None = None,
    answer: str = "",
    answer_path: str = "",
    notes: Iterable[str] = (),
    **plan: object,
) -> Path:
    """Write (or rewrite) `research_plans/{task_id}.md`; returns its path.

    Args:
        completed, in_progress, pending: subtask ids or titles for the Progress section.
        waiting: subtasks planned but not run until a person approves the plan
            (`approve_plan`).
        skipped: phases not run, with the reason.
        waves: per phase that ran in more than one wave, `phase: N waves, M subtasks`.
        notes: what tether changed in or could not check of the lead's plans
            (`orchestrator.graph.plan_check`), shown under Progress.
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
            "waiting": list(waiting),
            "pending": list(pending),
            "skipped": list(skipped),
            "waves": list(waves),
            "notes": list(notes),
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


def _many(value: object) -> bool:
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


def read_plan(path: Path, docs: Docs | None = None) -> JsonObject:
    """The values a research plan was written with, plus `sections`, `text` and `path`."""
    return _read_kind(path, "plan", "research plan", docs)
