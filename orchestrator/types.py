"""The types of a run: the run model, the protocol tools, JSON values, the finding reference.

One module for the shapes everything else is a view of (imports only pydantic, no other
module of tether):

* **The run model.** A subtask, a plan and a finding are each defined once, here (`Subtask`,
  `Plan`, `Finding`). Everything else that has the shape of a finding is a *view* of
  `Finding`, derived from `Finding.model_fields` rather than written out again: the
  subagent's final-answer tool `SubmitFindings` is `Finding` without the fields tether
  records itself (`RECORDED`: the files the agent's tool calls wrote), through
  `model_view`; the template inputs of a findings file and of a merged batch
  (`orchestrator.artifacts.findings`) are `Finding`'s fields with the record's identity
  (agent, task, subtask, phase) and lenient defaults; the fields of a merged record
  (`MERGED_FIELDS`) and the texts the graph state does not carry (`TEXT_FIELDS`) are lists
  of its field names; rendering turns each field into markdown by its type, with `Inline`
  marking a text that stays on one line. So a field added to `Finding` reaches the tool
  schema, the registry record, the findings file's metadata, the merged record and the
  snapshot's records with no other change; a template shows it once it names it.
  `Subtask` is the lead's unit of work (`PhasePlan`'s entries, the graph state's subtasks,
  a checkpoint's subtask entries). `Plan` is what the lead decides for the research plan:
  the `PhasePlan` tool extends it, the graph state and a checkpoint's `extra` carry its
  fields (`orchestrator.state.LEAD_FIELDS`), and the plan file's input is a view of it
  (`orchestrator.artifacts.plan.PlanInput`).
* **The protocol tools.** A model (real or the offline model) ends a lead planning turn by
  calling the `PhasePlan` tool, a subagent ends its work by calling `SubmitFindings`, and
  the lead answers the objective of a finished task with `SubmitAnswer` (or in its plan,
  `PhasePlan.answer`, when it answers alone):
  plain pydantic models bound as tools with `model.bind_tools([...])`, so any LangChain
  chat model with tool calling can drive tether. Before the final call an agent may call
  the ordinary tools it was given as often as its step budget allows.
* **The subagent's payload.** `SubagentPayload`: what `Send` hands each subagent.
* **The approval request.** `PendingApproval`: one action waiting for a person's decision
  (`orchestrator.approvals` finds them, shows each as a line and answers them).
* **JSON values.** `JsonObject`, a dict of JSON values, checked fast.
* **The finding reference.** The texts of a finding are written durably twice before the
  graph state says the subagent ran: as a line of the task's artifact registry
  (`findings:{key}`) and as `findings/{agent}_{ts}.md`. The graph state, which LangGraph's
  checkpointer stores again at every super-step, carries a `FindingRef` only (where the
  file is, who wrote it, its status and counts): a view of the finding's record
  (`orchestrator.artifacts.finding.FindingRecord`, which is `Finding` with its identity and
  travels from the subagent to the answer), expanded back from the registry or, failing
  that, from the file (`FindingRecord.expand`).

Invariants: no other module lists the fields of a finding, a subtask or the lead's plan by
hand (the graph state's `FindingRef` names the three lists it counts; the state's
`TypedDict` names each plan field, as LangGraph needs a channel per key); a reference in
the state always names a findings file or a registry record that holds the whole finding.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping
from contextvars import ContextVar
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, create_model, model_validator
from pydantic.fields import FieldInfo
from typing_extensions import TypedDict

# JSON values


def _json_problem(item: Any, where: str = "") -> str | None:
    """What in `item` is not JSON (strings, numbers, booleans, None, and lists and
    string-keyed dicts of them), and where; None when nothing."""
    if item is None or isinstance(item, str | int | float):  # bool is an int
        return None
    if isinstance(item, list | tuple):
        found = (_json_problem(v, f"{where}[{i}]") for i, v in enumerate(item))
    elif isinstance(item, dict):
        bad = next((k for k in item if not isinstance(k, str)), None)
        if bad is not None:
            return f"key {bad!r} at {where or 'top'} is not a string"
        found = (_json_problem(v, f"{where}[{k!r}]") for k, v in item.items())
    else:
        return f"{type(item).__name__} at {where or 'top'} is not a JSON value"
    return next((p for p in found if p), None)


_LEAVES = frozenset({str, int, float, bool, type(None)})


def _json_only(value: dict[str, Any]) -> dict[str, Any]:
    """`value` when everything in it is JSON. (Pydantic's `JsonValue` checks the same
    through a tagged union that calls Python for every value: a third of a checkpoint's
    write; this walk looks at the exact types of the common case first, 0.12 ms for 200
    subtasks, and names the problem only when there is one.)"""
    stack: list[Any] = [value]
    pop, push = stack.pop, stack.append
    while stack:
        item = pop()
        kind = type(item)
        if kind is dict:
            for key, inner in item.items():
                if type(key) is not str and not isinstance(key, str):
                    raise ValueError(_json_problem(value))
                if type(inner) not in _LEAVES:
                    push(inner)
        elif kind is list or kind is tuple:
            stack.extend(inner for inner in item if type(inner) not in _LEAVES)
        elif item is None or isinstance(item, str | int | float):  # subclasses (StrEnum)
            continue
        elif isinstance(item, list | tuple):
            push(list(item))
        elif isinstance(item, dict):
            push(dict(item))
        else:
            raise ValueError(_json_problem(value))
    return value


JsonObject = Annotated[dict[str, Any], AfterValidator(_json_only)]
"""A dict of JSON values (validated as such, passed through as it is)."""


# The run model


class Inline:
    """Marks a text field shown on one line (a `**Label**:` line), not as paragraphs:
    `status: Annotated[str, Inline] = ...`. JSON Schema ignores it."""


class FileNote(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: str
    description: str


class ToolLog(BaseModel):
    """What an agent's tool calls did, read from its transcript (the calls and the tools'
    typed results), never from its words: what a finding rests on."""

    model_config = ConfigDict(extra="ignore")

    calls: dict[str, int] = Field(default_factory=dict)
    """Tool calls by tool name (its final call, `SubmitFindings`, not counted)."""
    read: list[str] | None = Field(default_factory=list)
    """Workdir files its tool calls read (`read_file`, the files whose lines `grep_files`
    showed), relative to the workdir, in order; None: unknown (not checked)."""
    memory: list[str] = Field(default_factory=list)
    """Memory files it read (`memory_read`'s path, an answer that is not an error)."""
    not_read: list[str] = Field(default_factory=list)
    """Files it listed as examined that exist in the workdir but it never read."""
    not_found: list[str] = Field(default_factory=list)
    """Files it listed as examined that are not in the workdir."""


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
    files_unread: list[FileNote] = Field(default_factory=list)
    """Files the agent listed as examined that its tool calls never read, with its note
    (`RECORDED`; `tools.not_found` says which of them do not exist)."""
    tools: ToolLog | None = None
    """What the agent's own tool calls did, from its transcript (`RECORDED`); None: unknown
    (a finding written before tether recorded it, a remote agent whose messages it did not
    see)."""


INLINE_FIELDS = tuple(k for k, f in Finding.model_fields.items() if Inline in f.metadata)
"""`Finding` fields shown on one line: together, after the finding's name, in a merged
batch (`(completed)`) and in a snapshot's digest."""

RECORDED = frozenset({"files_written", "files_unread", "tools"})
"""`Finding` fields tether records from the agent's tool calls; its tool does not offer them."""

MERGED_FIELDS = ("agent", *Finding.model_fields, "path", "phase")
"""The fields of a finding record (`orchestrator.artifacts.finding.FindingRecord`) that a merged
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


# The protocol tools


class PhasePlan(Plan):
    """Submit the research plan and the subtasks for the current phase."""

    model_config = ConfigDict(extra="forbid")

    subtasks: list[Subtask] = Field(
        default_factory=list,
        description="Independent subtasks to run in parallel (none when the phase needs none).",
    )
    done: bool = Field(
        default=False,
        description="True when the objective is answered once this phase's subtasks (if any) "
        "are done: no later phase runs.",
    )
    reason: str = Field(default="", description="With done: why the objective is answered.")
    continue_phase: bool = Field(
        default=False,
        description="True: after these subtasks, plan another wave of this phase (more "
        "work of this phase is left than one wave's subtasks cover).",
    )
    answered: list[int] = Field(
        default_factory=list,
        description="Numbers (1-based, as listed under 'Key questions') of the key questions "
        "the findings so far answer.",
    )
    answer: str = Field(
        default="",
        description="With done and no subtasks: your answer to the objective (Markdown).",
    )

    @model_validator(mode="after")
    def _checked(self) -> PhasePlan:
        """A plan the run's check refuses (`PLAN_CHECK`) is an invalid call."""
        check = PLAN_CHECK.get()
        problem = check(self) if check is not None else ""
        if problem:
            raise ValueError(problem)
        return self


PLAN_CHECK: ContextVar[Callable[[PhasePlan], str] | None] = ContextVar(
    "tether_plan_check", default=None
)
"""The check of a lead's plan against the workdir and the findings while the lead plans
(`orchestrator.graph.plan_check`, set by the plan node): why a `PhasePlan` is refused, or
''. Unset (elsewhere), a plan is validated by its fields alone."""


def _nonblank_answer(value: str) -> str:
    value = value.strip()
    if not value:
        raise ValueError("the answer is empty: write your answer to the objective")
    return value


class SubmitAnswer(BaseModel):
    """Submit your answer to the objective; ends the task."""

    model_config = ConfigDict(extra="forbid")

    answer: Annotated[str, AfterValidator(_nonblank_answer)] = Field(
        description="The answer, in Markdown, citing file paths."
    )
    """Trimmed; an empty or blank answer is an invalid call (the model is asked again)."""
    findings: list[str] = Field(default_factory=list, description="Findings files it uses.")
    files: list[str] = Field(default_factory=list, description="Workdir files it rests on.")
    open_questions: list[str] = Field(default_factory=list, description="What is still open.")


SubmitFindings = model_view(
    Finding,
    "SubmitFindings",
    "Submit what this subagent found; ends the subagent's work.",
    exclude=RECORDED,
    module=__name__,
)
"""The subagent's final-answer tool: `Finding` but the fields tether records itself."""


PLAN_TOOL = PhasePlan.__name__
FINDINGS_TOOL = SubmitFindings.__name__
ANSWER_TOOL = SubmitAnswer.__name__


# The finding reference

TEXT_FIELDS = tuple(k for k in Finding.model_fields if k != "status")
"""The fields of a finding that are texts (what the graph state does not carry)."""


class FindingRef(TypedDict, total=False):
    """What the graph state holds of one finished subagent's finding: a view of its
    `FindingRecord` (`orchestrator.artifacts.finding`, `FindingRecord.ref()`), the record's
    identity, its `Finding.status` and the counts of three of its lists; no texts."""

    path: str
    """The findings file, relative to the memory root."""
    agent: str
    title: str
    phase: str
    id: str
    """The subtask's id (its key is `phase/id`)."""
    tokens: int
    status: str
    """`completed`, `partial` or `failed`, as the agent reported it."""
    grounding: str
    """`grounded`, `ungrounded` or `unknown`: whether its tool log holds a tool call
    (`FindingRecord.grounding`); missing in an older run's state (unknown)."""
    counts: dict[str, int]
    """How many `key_discoveries`, `files` (examined) and `files_written` it holds."""


# The approval request


class PendingApproval(BaseModel):
    """One action waiting for a person's decision."""

    id: str
    """The request's id (LangGraph's interrupt id); one request may hold several actions."""
    agent: str
    """The agent that asked (`lead` for a phase plan)."""
    key: str = ""
    """The subtask key (`phase/id`), or `phase/plan`."""
    tool: str
    args: dict[str, Any] = Field(default_factory=dict)
    allowed_decisions: list[str] = Field(default_factory=lambda: ["approve", "reject"])
    description: str = ""
    remote: str = ""
    """Where a remote agent's run waits (`server thread THREAD_ID`); empty for local agents."""


# The subagent's payload


class SubagentPayload(TypedDict):
    """What each subagent receives through LangGraph's `Send` (`graph.nodes.spawn`): plain
    JSON, so it is checkpointed with the super-step that sent it."""

    task_id: str
    objective: str
    workdir: str
    phase: str
    key: str
    """The subtask's state key, `phase/id` (`orchestrator.state.subtask_key`)."""
    subtask: dict[str, Any]
    """The subtask as the graph state holds it (`Subtask`'s fields and `phase`)."""
    earlier: dict[str, FindingRef]
    """The findings of earlier phases (`subtask_key -> FindingRef`): the subagent is told
    those that concern its scope, so it builds on them instead of redoing them."""
