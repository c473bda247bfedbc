"""The run as one typed model: a subtask, a plan and a finding are each defined once, here.

Everything else that has the shape of a finding is a *view* of `Finding`, derived from
`Finding.model_fields` rather than written out again:

* the subagent's final-answer tool, `orchestrator.protocol.SubmitFindings`, is `Finding`
  without the fields tether records itself (`RECORDED`: the files the agent's tool calls
  wrote), through `model_view`;
* the template inputs of a findings file and of a merged batch
  (`orchestrator.artifacts.findings`) are `Finding`'s fields with the record's identity
  (agent, task, subtask, phase) and lenient defaults;
* the fields of a merged record (`MERGED_FIELDS`) and the texts the graph state does not
  carry (`orchestrator.findings.TEXT_FIELDS`) are lists of its field names;
* rendering turns each field into markdown by its type (`orchestrator.artifacts.findings`),
  with `Inline` marking a text that stays on one line.

So a field added to `Finding` reaches the tool schema, the registry record, the findings
file's metadata, the merged record and the snapshot's records with no other change; a
template shows it once it names it. `Subtask` is the lead's unit of work (`PhasePlan`'s
entries, the graph state's subtasks, a checkpoint's subtask entries). `Plan` is what the
lead decides for the research plan: the `PhasePlan` tool extends it, the graph state and a
checkpoint's `extra` carry its fields (`orchestrator.state.LEAD_FIELDS`), and the plan
file's input is a view of it (`orchestrator.artifacts.plan.PlanInput`).

Invariant: no other module lists the fields of a finding, a subtask or the lead's plan by
hand (the graph state's `FindingRef` names the three lists it counts; the state's
`TypedDict` names each plan field, as LangGraph needs a channel per key).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, create_model
from pydantic.fields import FieldInfo


class Inline:
    """Marks a text field shown on one line (a `**Label**:` line), not as paragraphs:
    `status: Annotated[str, Inline] = ...`. JSON Schema ignores it."""


class FileNote(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: str
    description: str


class Subtask(BaseModel):
    """One unit of work for a subagent in the current phase."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(description="Short stable id, unique within the task, e.g. 'explore-memory'.")
    title: str = Field(description="One line saying what to do.")
    description: str = Field(description="What to look at and what to report.")
    agent: str = Field(
        default="researcher", description="Role of the subagent (a workflow agent name)."
    )
    scope: list[str] = Field(
        default_factory=list,
        description="Paths under the workdir this subtask should focus on (may be empty).",
    )


class Plan(BaseModel):
    """What the lead decides for the research plan (the progress in it is tether's)."""

    model_config = ConfigDict(extra="forbid")

    strategy: str = Field(description="High-level approach for this phase, 1-3 sentences.")
    key_questions: list[str] = Field(default_factory=list)
    constraints: list[str] = Field(default_factory=list)
    next_actions: list[str] = Field(default_factory=list)


class Finding(BaseModel):
    """What one subagent found: the one definition of a finding."""

    model_config = ConfigDict(extra="forbid")

    status: Annotated[str, Inline] = Field(
        default="completed", description="completed | partial | failed"
    )
    summary: str = Field(description="2-3 sentence summary of what was found.")
    key_discoveries: list[str] = Field(default_factory=list)
    files: list[FileNote] = Field(
        default_factory=list,
        description="Files examined, with a note (files written with memory tools are "
        "recorded from the tool calls).",
    )
    files_written: list[FileNote] = Field(default_factory=list)
    """Files the agent's tool calls wrote (`RECORDED`: tether fills it in, not the agent)."""
    open_questions: list[str] = Field(default_factory=list)
    recommendations: list[str] = Field(default_factory=list)


INLINE_FIELDS = tuple(k for k, f in Finding.model_fields.items() if Inline in f.metadata)
"""`Finding` fields shown on one line: together, after the finding's name, in a merged
batch (`(completed)`) and in a snapshot's digest."""

RECORDED = frozenset({"files_written"})
"""`Finding` fields tether records from the agent's tool calls; its tool does not offer them."""

MERGED_FIELDS = ("agent", *Finding.model_fields, "path", "phase")
"""The fields of a finding record (`orchestrator.findings.finding_record`) that a merged
batch keeps: who wrote it, the finding, its file and phase."""


def model_view(
    model: type[BaseModel],
    name: str,
    doc: str,
    *,
    exclude: Iterable[str] = (),
    field: Callable[[str, FieldInfo], tuple[Any, FieldInfo]] | None = None,
    base: type[BaseModel] | None = None,
    lead: Mapping[str, tuple[Any, Any]] | None = None,
    extra: Mapping[str, tuple[Any, Any]] | None = None,
    module: str | None = None,
) -> type[BaseModel]:
    """A pydantic model named `name` with `model`'s fields (but `exclude`), in their order.

    Args:
        field: `(name, FieldInfo) -> (annotation, FieldInfo)` to adapt a field (a lenient
            default, another type); default: the field as it is.
        base: the view's base class (its config and validators); default: `model`'s config.
        lead, extra: more fields, `name -> (annotation, FieldInfo or default)`, before and
            after `model`'s.
        module: the module the view is defined in (its `__module__`); default `model`'s.
    """
    skip = set(exclude)
    fields: dict[str, Any] = dict(lead or {})
    for key, info in model.model_fields.items():
        if key not in skip:
            info = copy.copy(info)
            fields[key] = field(key, info) if field else (info.rebuild_annotation(), info)
    fields.update(extra or {})
    caller = module or model.__module__
    if base is None:
        return create_model(
            name, __config__=model.model_config, __doc__=doc, __module__=caller, **fields
        )
    return create_model(name, __base__=base, __doc__=doc, __module__=caller, **fields)


def _empty(info: FieldInfo) -> Any:
    """What a missing or empty value of a field stands for: its default, else the empty text
    (the required fields of these models are texts)."""
    if info.is_required():
        return ""
    return info.get_default(call_default_factory=True)


def model_values(
    model: type[BaseModel], payload: Mapping[str, Any] | None, exclude: Iterable[str] = ()
) -> dict[str, Any]:
    """Every field of `model` (but `exclude`) from `payload` (an agent's answer, a registry
    record, a file's values, the graph state); a missing or empty value is the field's
    default."""
    payload = payload or {}
    skip = set(exclude)
    return {
        k: payload.get(k) or _empty(info) for k, info in model.model_fields.items() if k not in skip
    }


def finding_values(payload: Mapping[str, Any] | None, exclude: Iterable[str] = ()) -> dict:
    """Every `Finding` field (but `exclude`) from `payload` (see `model_values`)."""
    return model_values(Finding, payload, exclude)
