"""The checkpoint as one typed model: what `checkpoints/cp_{phase}_{ts}.json` holds.

`Checkpoint` is what tether assembles and reads back (`checkpoint_id` and `timestamp` are
filled in when it is written); `SavedCheckpoint` is a file on disk: every field present,
strictly typed (no coercion), the timestamp in UTC ISO 8601. The shipped JSON Schema,
`orchestrator/schemas/checkpoint.schema.json`, is `SavedCheckpoint`'s
(`checkpoint_json_schema()`), pinned by a test, and the one validator of a checkpoint file is
the model itself (`checkpoint_problem`): rendering from the Jinja template, reading back,
recovery and `status` all agree on one shape.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError
from pydantic.fields import FieldInfo

from orchestrator.errors import TemplateError
from orchestrator.types import JsonObject, PendingApproval, Subtask, model_view

CHECKPOINT_TEMPLATE = "checkpoint.json.j2"
TIMESTAMP_PATTERN = (
    r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,6})?"
    r"(Z|[+-][0-9]{2}:[0-9]{2})$"
)
SCHEMA_ID = "urn:tether:schema:checkpoint:2"


def _whole(value: Any) -> Any:
    """A JSON number with no fraction (`1.0`) is an integer, as JSON Schema says."""
    return int(value) if type(value) is float and value.is_integer() else value


Count = Annotated[int, Field(ge=0), BeforeValidator(_whole)]
"""A non-negative JSON integer (strict: no strings, no booleans)."""


class CheckpointState(BaseModel):
    """What the run was doing: subtasks by state, agents, findings so far."""

    model_config = ConfigDict(extra="forbid")

    completed_subtasks: list[str] = Field(default_factory=list)
    pending_subtasks: list[str] = Field(default_factory=list)
    active_agents: list[str] = Field(default_factory=list)
    blocked_agents: list[str] = Field(default_factory=list)
    findings_count: int = Field(default=0, ge=0)


class LangGraphRef(BaseModel):
    """Where LangGraph's own durable state for this run is."""

    model_config = ConfigDict(extra="forbid")

    thread_id: str | None = None
    checkpoint_id: str | None = None


class Checkpoint(BaseModel):
    """One recovery point. Paths are relative to the memory directory."""

    model_config = ConfigDict(extra="forbid")

    task_id: str = Field(min_length=1)
    phase: str = Field(min_length=1)
    checkpoint_id: str | None = None
    """`cp_{phase}_{ts}`; filled in by `write_checkpoint` (equal to the file's stem)."""
    timestamp: str | None = None
    """ISO 8601 UTC; filled in by `write_checkpoint` when None."""
    state: CheckpointState = Field(default_factory=CheckpointState)
    context_summary: str = ""
    next_action: str = ""
    recovery_instructions: str = ""
    plan: str | None = None
    findings: list[str] = Field(default_factory=list)
    entries: list[str] = Field(default_factory=list)
    langgraph: LangGraphRef = Field(default_factory=LangGraphRef)
    objective: str = ""
    workdir: str | None = None
    phases: list[str] = Field(default_factory=list)
    phase_index: int = Field(default=0, ge=0)
    subtasks: list[JsonObject] = Field(default_factory=list)
    """The current phase's subtasks (full dicts, each with an `id`)."""
    completed_findings: dict[str, str] = Field(default_factory=dict)
    """Subtask id -> findings path."""
    pending_approvals: list[PendingApproval] = Field(default_factory=list)
    """Requests waiting for a person's decision (a checkpoint of a `waiting` task)."""
    skipped_phases: list[str] = Field(default_factory=list)
    """Phases not run because the lead declared the objective answered."""
    extra: JsonObject = Field(default_factory=dict)

    @classmethod
    def own(cls, fields: Mapping[str, object]) -> Checkpoint:
        """A checkpoint of `fields` that tether assembled from its own state, not validated
        here (that was a sixth of a write): `write_checkpoint` checks the JSON it renders
        against the schema, which asks as much, and a value that is not JSON fails to
        render."""
        given = dict(fields)
        unknown = sorted(set(given) - set(cls.model_fields))
        if unknown:  # what the model would refuse is not dropped in silence either
            raise TemplateError(
                f"invalid input for template {CHECKPOINT_TEMPLATE!r}: unknown field(s) "
                + ", ".join(repr(k) for k in unknown)
            )
        given["state"] = CheckpointState.model_construct(**given.get("state", {}))
        given["pending_approvals"] = [
            PendingApproval.model_validate(p) for p in given.get("pending_approvals") or []
        ]
        given["langgraph"] = LangGraphRef.model_construct(**given.get("langgraph", {}))
        return cls.model_construct(**given)


class _SubtaskEntryBase(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)


def _entry_field(name: str, info: FieldInfo) -> tuple[Any, FieldInfo]:
    """A `Subtask` field as a checkpoint lists it: `id` required and not empty, the others
    optional (a checkpoint holds the subtasks as the state has them)."""
    if name == "id":
        return Annotated[info.rebuild_annotation(), Field(min_length=1)], info
    if info.is_required():
        info = FieldInfo.merge_field_infos(info, default="")
    return info.rebuild_annotation(), info


SubtaskEntry = model_view(
    Subtask,
    "SubtaskEntry",
    "A subtask as a checkpoint lists it: a `Subtask` (`id` required; the rest as the state "
    "holds it), with its phase and state key.",
    field=_entry_field,
    base=_SubtaskEntryBase,
    module=__name__,
    extra={
        "phase": (str, Field(default="", description="The phase the subtask belongs to.")),
        "key": (str, Field(default="", description="Its key in the run's state: `phase/id`.")),
    },
)


class SavedState(CheckpointState):
    """`CheckpointState` as written: every count and list present."""

    model_config = ConfigDict(extra="forbid", strict=True)

    completed_subtasks: list[str]
    pending_subtasks: list[str]
    active_agents: list[str]
    blocked_agents: list[str]
    findings_count: Count


class SavedLangGraphRef(LangGraphRef):
    model_config = ConfigDict(extra="forbid", strict=True)

    thread_id: str | None
    checkpoint_id: str | None


class SavedCheckpoint(BaseModel):
    """A checkpoint file: a recovery point written to checkpoints/cp_{phase}_{ts}.json: the
    phase, what the run was doing, a summary and the next action, plus tether's references
    to the plan, findings, memory entries and the LangGraph thread."""

    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        title="tether checkpoint",
        json_schema_extra={
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": SCHEMA_ID,
        },
    )

    checkpoint_id: str = Field(min_length=1, max_length=255)
    task_id: str = Field(min_length=1, max_length=255)
    phase: str = Field(min_length=1, max_length=255)
    timestamp: str = Field(
        pattern=TIMESTAMP_PATTERN,
        description="UTC ISO 8601 time the checkpoint was taken, e.g. 2025-01-04T12:00:00.000000Z.",
    )
    state: SavedState
    context_summary: str
    next_action: str
    recovery_instructions: str
    plan: str | None = Field(
        description="Path of the research plan, relative to the memory directory."
    )
    findings: list[str] = Field(
        description="Paths of the findings files written so far, relative to the memory directory."
    )
    entries: list[str] = Field(description="Ids of memory entries this checkpoint refers to.")
    langgraph: SavedLangGraphRef
    objective: str
    workdir: str | None
    phases: list[str] = Field(min_length=1)
    phase_index: Count
    subtasks: list[SubtaskEntry] = Field(
        description="The current phase's subtasks as given to the subagents."
    )
    completed_findings: dict[str, str] = Field(
        description="Subtask id -> findings path (relative to the memory directory)."
    )
    pending_approvals: list[PendingApproval] = Field(
        default_factory=list,
        description="Requests waiting for a person's decision (`orchestrator approve`).",
    )
    skipped_phases: list[str] = Field(
        default_factory=list,
        description="Phases not run because the lead declared the objective answered.",
    )
    extra: dict[str, Any]


@functools.cache
def checkpoint_json_schema() -> JsonObject:
    """The JSON Schema of a checkpoint file (draft 2020-12), generated from the model."""
    return SavedCheckpoint.model_json_schema()


def checkpoint_problem(obj: Any) -> str | None:
    """None when `obj` (parsed JSON) is a valid checkpoint file, else its first problem."""
    try:
        SavedCheckpoint.model_validate(obj)
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        where = "/".join(str(p) for p in err["loc"]) or "(top level)"
        message = re.sub(r" or instance of \w+", "", err["msg"])
        if err["type"] == "missing":  # say which field, where JSON Schema tools do
            where = "/".join(str(p) for p in err["loc"][:-1]) or "(top level)"
            message = f"{err['loc'][-1]!r} is a required property"
        if len(message) > 200:
            message = message[:197] + "..."
        return f"at {where!r}: {message}"
    return None


if __name__ == "__main__":  # regenerate the shipped schema from the model
    import json

    print(json.dumps(checkpoint_json_schema(), indent=2, ensure_ascii=False))
