"""Progress events: one pydantic model per kind, the one definition of what a run reports.

A run reports progress as plain dicts (`Event`): `{"event": kind, **fields}`, delivered to
the `on_event` callback of `Orchestrator` and of `TetherMemoryMiddleware`, to the CLI's
live view (`orchestrator.cli.view`) and to LangGraph Server's `custom` stream. Every emitter
builds its dict with `build_event(kind, **fields)`, which checks the fields against the
kind's model (`EVENTS[kind]`) and returns `{"event": kind, **fields}` itself: the model
checks, it does not convert, so a callback sees the same keys and values as before the
models existed.

Invariant: every kind emitted anywhere has exactly one model here, and no event carries a
field its model does not name or a value of another type (`extra="forbid"`, strict
types); a wrong kind or field raises `EventError` at the emitter, in tests as in runs.
A field with a default (`= None`) may be absent from the dict; a field without one is
always there (its type says whether it may be None). The table of events in
`docs/events.md` is `events_table()`, checked by `tests/test_docs.py`.

Validation always runs, with or without a callback: a check costs 1.3-3.7 µs (`warning`
to a `plan` of four subtasks; a plain dict takes 0.1 µs) on this project's 2-core machine,
and a run emits tens to hundreds of events between model calls that take seconds, so a
debug flag would save nothing measurable and would let a wrong event through in runs.
"""

from __future__ import annotations

import re
import types
from typing import Any, ClassVar, Literal, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from orchestrator.errors import EventError
from orchestrator.types import JsonObject

Event = JsonObject
"""One progress event as delivered: `{"event": kind, **fields}` (JSON values only)."""

#: Each kind's model, filled by `EventModel.__init_subclass__`.
EVENTS: dict[str, type[EventModel]] = {}


class EventModel(BaseModel):
    """The fields of one kind of event (the `event` key itself is not a field)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    kind: ClassVar[str]
    """The value of the event's `event` key."""

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        kind = cls.__dict__.get("kind")
        if kind is not None:
            if kind in EVENTS:  # two models of one kind: the second would hide the first
                raise TypeError(f"event kind {kind!r} has two models: {EVENTS[kind]} and {cls}")
            EVENTS[kind] = cls


def build_event(kind: str, **fields: object) -> Event:
    """The event dict of `kind`, checked against its model.

    Raises:
        EventError: an unknown kind, or a field missing, unknown or of the wrong type.
    """
    model = EVENTS.get(kind)
    if model is None:
        raise EventError(
            f"unknown event kind {kind!r}; define a model for it in orchestrator/events.py"
        )
    try:
        model.model_validate(fields)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        at = f"{where!r}: " if where else ""
        raise EventError(
            f"event {kind!r} does not match {model.__name__}: {at}{first['msg']} "
            f"({exc.error_count()} error(s)); fix the emitter or the model in "
            "orchestrator/events.py"
        ) from None
    return {"event": kind, **fields}


# -- the run ------------------------------------------------------------------------------
class ModelEvent(EventModel):
    """The chat model a run (or resume) uses; first event of every run."""

    kind = "model"
    name: str
    offline: bool


class StartEvent(EventModel):
    """A new task starts (`Orchestrator.run`)."""

    kind = "start"
    task_id: str
    objective: str
    phases: list[str]
    memory_dir: str
    workdir: str
    model: str
    offline: bool
    token_threshold: int
    max_parallel: int
    budget_tokens: int | None = None
    """The task's token budget (absent: none)."""


class ResumeEvent(EventModel):
    """A task continues (`resume`, `approve`, `reject`); `path` is the checkpoint or snapshot."""

    kind = "resume"
    task_id: str
    source: str
    path: str | None
    memory_dir: str
    model: str
    offline: bool
    budget_tokens: int | None = None
    """The task's token budget (absent: none)."""


class PhaseEvent(EventModel):
    """A phase (or its next wave) begins (`index` and `wave` count from 1)."""

    kind = "phase"
    phase: str
    index: int
    total: int
    wave: int | None = None


class PlannedSubtask(BaseModel):
    """One subtask as the `plan` event lists it."""

    model_config = ConfigDict(extra="forbid", strict=True)

    key: str
    agent: str
    title: str


class PlanEvent(EventModel):
    """The lead planned a wave of the phase and wrote the research plan at `path`
    (`continue_phase`: another wave of this phase follows these subtasks)."""

    kind = "plan"
    phase: str
    path: str
    subtasks: list[PlannedSubtask]
    wave: int | None = None
    continue_phase: bool = False


class MergedEvent(EventModel):
    """A wave's findings were merged into the file at `path`."""

    kind = "merged"
    phase: str
    path: str
    findings: int
    failed: list[str]
    wave: int | None = None


class CheckpointEvent(EventModel):
    """A JSON checkpoint was written (`trigger`: why)."""

    kind = "checkpoint"
    path: str
    trigger: str
    phase: str


class DoneEvent(EventModel):
    """The task's last phase ended (or the lead ended it early: `reason`)."""

    kind = "done"
    task_id: str
    merged: str
    findings: int
    skipped: list[str]
    reason: str | None
    answer: str | None = None
    """The lead's answer to the objective (Markdown), which opens `merged`."""


class FailedEvent(EventModel):
    """The task failed (`failed`: the subagents or `lead` that did)."""

    kind = "failed"
    task_id: str
    failed: list[str]
    error: str


class StoppedEvent(EventModel):
    """The task stopped at its token budget (resumable with a larger one)."""

    kind = "stopped"
    task_id: str
    reason: str
    budget: int | None
    spent: int


class FinishEvent(EventModel):
    """The run returned (any status); LangGraph Server sends only the required fields."""

    kind = "finish"
    task_id: str | None
    status: str | None
    memory_dir: str
    findings: int
    plan: str | None = None
    snapshots: list[str] | None = None
    checkpoints: int | None = None
    usage: dict[str, int] | None = None
    pending_approvals: list[dict[str, Any]] | None = None
    skipped: list[str] | None = None
    reason: str | None = None


# -- agents and context -------------------------------------------------------------------
class AgentEvent(EventModel):
    """A subagent changed state; `reused`: its findings were already written. While it
    runs, after each model call: its `tokens` so far, `steps` (model calls) of its
    `max_steps`, and `tool`, the tool that call asked for."""

    kind = "agent"
    key: str
    agent: str
    state: Literal["pending", "running", "waiting", "done", "failed"]
    title: str | None = None
    tokens: int | None = None
    reused: bool | None = None
    path: str | None = None
    error: str | None = None
    steps: int | None = None
    max_steps: int | None = None
    tool: str | None = None


class RemoteEvent(EventModel):
    """A remote agent's run on LangGraph Server (`orchestrator.graph.remote`): `started`
    (a new run), `joined` (a run still going, e.g. after a crash), `read` (a run that
    finished while tether was away), `resumed` (answered an interrupt), `retry` (an earlier
    attempt failed: a new thread)."""

    kind = "remote"
    key: str
    agent: str
    action: Literal["started", "joined", "read", "resumed", "retry"]
    server: str
    """The server's URL (without credentials)."""
    thread_id: str
    run_id: str | None = None
    attempt: int = 1


class TokensEvent(EventModel):
    """An agent's context size against the threshold (`zone`: ok, warn or save); the lead's
    gauge also gives the task's spend so far: `total` tokens and `calls` (model calls)."""

    kind = "tokens"
    context: int
    threshold: int
    agent: str | None = None
    task_id: str | None = None
    tokens: int | None = None
    total: int | None = None
    warning_ratio: float | None = None
    zone: str | None = None
    estimated: bool | None = None
    shown: str | None = None
    calls: int | None = None


class WarningEvent(EventModel):
    """Something the user should know; the run goes on."""

    kind = "warning"
    message: str
    agent: str | None = None
    task_id: str | None = None


class SnapshotEvent(EventModel):
    """A context snapshot was written (`reason`: token_limit or phase_end)."""

    kind = "snapshot"
    path: str
    reason: str
    tokens: int | None = None
    threshold: int | None = None
    agent: str | None = None
    task_id: str | None = None


class OffloadedEvent(EventModel):
    """A large tool result went to memory entry `entry` instead of the context."""

    kind = "offloaded"
    tool: str | None
    entry: str
    tokens: int
    limit: int
    agent: str | None = None
    task_id: str | None = None


# -- approval -------------------------------------------------------------------------------
class _Answer(EventModel):
    """An answer names what it answers: a request (`id`) or a phase gate (`agent`, `phase`)."""

    @model_validator(mode="after")
    def _answers_something(self) -> _Answer:
        request = getattr(self, "id", None) is not None
        gate = getattr(self, "agent", None) is not None and getattr(self, "phase", None) is not None
        if request == gate:
            raise ValueError("give either `id` (a request) or `agent` and `phase` (a gate)")
        return self


class WaitingApprovalEvent(EventModel):
    """The task stopped to wait for approval of `requests`."""

    kind = "waiting_approval"
    task_id: str
    requests: list[dict[str, Any]]


class ApprovedEvent(_Answer):
    """A request (`id`) or the lead's phase gate (`agent`, `phase`) was approved."""

    kind = "approved"
    id: str | None = None
    message: str | None = None
    agent: str | None = None
    phase: str | None = None


class RejectedEvent(_Answer):
    """A request (`id`) or the lead's phase gate (`agent`, `phase`) was rejected."""

    kind = "rejected"
    message: str
    id: str | None = None
    agent: str | None = None
    phase: str | None = None


# -- the docs' table -----------------------------------------------------------------------
def _type_text(annotation: object) -> str:
    """`annotation` as the docs show it: `str | None`, `list[str]`."""
    origin = get_origin(annotation)
    if origin in (Union, types.UnionType):
        return " | ".join(_type_text(arg) for arg in get_args(annotation))
    if origin is Literal:
        return " | ".join(repr(arg) for arg in get_args(annotation))
    if origin is not None:
        args = ", ".join(_type_text(arg) for arg in get_args(annotation))
        return f"{origin.__name__}[{args}]"
    if annotation is type(None):
        return "None"
    if annotation is Any:
        return "Any"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):  # its fields
        fields = annotation.model_fields.items()
        return "{" + ", ".join(f"{n}: {_type_text(f.annotation)}" for n, f in fields) + "}"
    return getattr(annotation, "__name__", str(annotation))


def _field_text(name: str, model: type[BaseModel]) -> str:
    info = model.model_fields[name]
    annotation = info.annotation
    if not info.is_required():  # optional: shown without its `| None` default
        args = [a for a in get_args(annotation) if a is not type(None)]
        annotation = args[0] if len(args) == 1 else annotation
        return f"[`{name}: {_type_text(annotation)}`]"
    return f"`{name}: {_type_text(annotation)}`"


def events_table() -> str:
    """The markdown table of every event kind (`docs/events.md`)."""
    lines = ["| `event` | when | fields ([optional]) |", "| --- | --- | --- |"]
    for kind, model in EVENTS.items():
        fields = ", ".join(_field_text(name, model) for name in model.model_fields)
        when = " ".join((model.__doc__ or "").split())
        row = f"| `{kind}` | {when} | {fields} |"
        lines.append(re.sub(r"(`[^`]*`)", lambda m: m.group(1).replace("|", "\\|"), row))
    return "\n".join(lines)
