"""The graph's state and its reducers.

State is a `TypedDict` whose fan-in channels merge through keyed, idempotent reducers:
parallel subagents (one `Send` each) return `{subtask_key: record}` dicts and
`merge_keyed` folds them into the existing dict. Applying the same update twice (a
super-step replayed after a crash, or two writers reporting the same subtask) leaves the
same state, which a list reducer such as `operator.add` cannot promise.

Invariant: every value in the state is plain JSON (str, int, float, bool, None, list,
dict), so it serialises into LangGraph's SQLite checkpointer, into tether's JSON
checkpoints, and back again without custom types.

Subtask keys are `"{phase}/{subtask_id}"` (`subtask_key`), so the same id proposed in
two phases never collides; a later wave of a phase that proposes an id again gets a suffix
(`plan`). A phase runs in waves (`wave`, 1-based): each subtask record names its wave, and
a batch of merged findings is keyed by `merge_key(phase, wave)`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

from typing_extensions import TypedDict  # pydantic (LangGraph Server schemas) needs it on 3.11

from orchestrator.types import Plan

if TYPE_CHECKING:
    from orchestrator.types import JsonObject

#: Value that deletes a key in `merge_keyed` (e.g. a failure cleared by a later success).
DELETE = None


def merge_keyed(left: JsonObject | None, right: JsonObject | None) -> JsonObject:
    """Merge `right` into `left` by key; a `None` value removes the key.

    Idempotent: `merge_keyed(merge_keyed(a, b), b) == merge_keyed(a, b)`.
    """
    merged = dict(left or {})
    for key, value in (right or {}).items():
        if value is DELETE:
            merged.pop(key, None)
        else:
            merged[key] = value
    return merged


def subtask_key(phase: str, subtask_id: str) -> str:
    """The state key of a subtask: unique across phases of one task."""
    return f"{phase}/{subtask_id}"


LEAD_FIELDS = (
    *Plan.model_fields,  # strategy, key_questions, constraints, next_actions
    "answered",
    "plan_notes",
    "done_reason",
    "wave",
    "continue_phase",
    "lead_summary",
    "approved",
    "usage",
    "lean_seed",
    "lead_log",
    "lead_calls",
    "seed_snapshot",
    "first_call_done",
    "warned",
    "answer",
    "answer_info",
    "answering",
    "stop_reason",
)
"""State fields a checkpoint keeps in its `extra`, so a rebuilt lead continues where it was."""


class OrchestratorState(TypedDict, total=False):
    """Everything the graph needs to continue a task from any super-step."""

    task_id: str
    objective: str
    workdir: str
    phases: list[str]
    phase_index: int
    """Index into `phases` of the phase being worked on."""
    wave: int
    """The wave of the current phase (1-based): the lead plans a wave, its subagents run,
    their findings merge, and while the plan says `continue_phase` the next wave follows."""
    continue_phase: bool
    """The current wave's plan asked for another wave of this phase (`PhasePlan`)."""
    lead_summary: list[str]
    """The running summary of the lead's older turns (one line per folded wave, L1, and
    one per group of folded lines, L2; `orchestrator.graph.lead.fold_lead_log`): what
    keeps the lead's prompt from growing with the task."""
    status: str
    """`running` until `advance` finishes the last phase, then `done`."""

    subtasks: Annotated[dict[str, dict[str, Any]], merge_keyed]
    """`subtask_key -> {id, title, description, agent, scope, phase}`, all phases."""
    findings: Annotated[dict[str, dict[str, Any]], merge_keyed]
    """`subtask_key -> FindingRef` (`orchestrator.types`: path, agent, title, phase, id,
    tokens, status, counts) for every finished subagent; the texts are in the registry and
    the findings file, never in the graph state (which every super-step stores again)."""
    failed: Annotated[dict[str, dict[str, Any]], merge_keyed]
    """`subtask_key -> {agent, error}` for subagents that raised; retried on resume."""
    merged: Annotated[dict[str, str], merge_keyed]
    """`phase -> merged findings path`."""
    tokens: Annotated[dict[str, int], merge_keyed]
    """Tokens used per agent (`lead` and `{agent}:{subtask_key}`)."""
    usage: Annotated[dict[str, dict[str, int]], merge_keyed]
    """Model calls and prompt tokens per agent (same keys as `tokens`):
    `{"calls": n, "input_tokens": n}`."""
    checkpoints: Annotated[dict[str, str], merge_keyed]
    """`checkpoint_id -> path` of the JSON checkpoints this run wrote."""

    plan_path: str
    strategy: str
    key_questions: list[str]
    answered: list[int]
    """1-based numbers of the key questions the lead declared answered (`PhasePlan.answered`)."""
    plan_notes: list[str]
    """What tether changed in or could not check of the lead's plans (`graph.plan_check`:
    a dropped subtask, a removed scope, a remote scope not checked), newest last."""
    done_reason: str | None
    """Set when the lead declared the objective answered (`PhasePlan.done`): the current
    phase is the last one, the later ones are recorded as skipped with this reason."""
    approved: list[str]
    """Phases whose plan passed the `approve` node (`approve_plan`, or nothing to approve)."""
    lean_seed: bool
    """The lead's fresh context was itself over the threshold (or the window): its contexts
    are the lean ones from then on (`_lead.lead_messages`)."""
    constraints: list[str]
    next_actions: list[str]

    lead_log: list[dict[str, str]]
    """The lead's conversation since its context was last refreshed (role/content)."""
    lead_calls: list[dict[str, Any]]
    """One record per lead call: `{phase, tokens, fresh}`; lets tests check handoffs."""
    seed_snapshot: str | None
    """Snapshot the lead's fresh context is seeded from (after a threshold or handoff)."""
    snapshots: list[str]
    warned: bool
    """Whether the warning zone was already announced for the current lead context."""
    first_call_done: bool
    """The memory index message goes into the lead's very first call only."""
    final_summary: str | None
    """The digest of every finding (the template's merge, no model call)."""
    answer: str | None
    """The lead's answer to the objective (Markdown), once the task is done: its final
    call (`SubmitAnswer`), or its plan when it answered alone (`PhasePlan.answer`)."""
    answer_info: dict[str, Any] | None
    """What the answer rests on: `{findings, files, open_questions, path, by}` (`path`: the
    task's final `findings/merged_{ts}.md`, which opens with the answer)."""
    answering: bool
    """The last phase is over: the `answer` node answers the objective and ends the task."""
    stop_reason: str | None
    """Why a `stopped` task stopped (its token budget was reached)."""


def initial_state(
    *,
    task_id: str,
    objective: str,
    workdir: str,
    phases: list[str],
    phase_index: int = 0,
) -> OrchestratorState:
    """A fresh state for a new task (or a rebuilt one; callers fill in the rest)."""
    return OrchestratorState(
        task_id=task_id,
        objective=objective,
        workdir=workdir,
        phases=list(phases),
        phase_index=phase_index,
        wave=1,
        continue_phase=False,
        lead_summary=[],
        status="running",
        subtasks={},
        findings={},
        failed={},
        merged={},
        tokens={},
        usage={},
        checkpoints={},
        plan_path="",
        strategy="",
        key_questions=[],
        answered=[],
        plan_notes=[],
        done_reason=None,
        approved=[],
        lean_seed=False,
        constraints=[],
        next_actions=[],
        lead_log=[],
        lead_calls=[],
        seed_snapshot=None,
        snapshots=[],
        warned=False,
        first_call_done=False,
        final_summary=None,
        answer=None,
        answer_info=None,
        answering=False,
        stop_reason=None,
    )


def current_phase(state: OrchestratorState) -> str:
    return state["phases"][state["phase_index"]]


def phase_subtasks(state: OrchestratorState, phase: str | None = None) -> dict[str, dict]:
    """The subtasks of `phase` (default: the current one), keyed by subtask key."""
    phase = phase or current_phase(state)
    return {k: v for k, v in (state.get("subtasks") or {}).items() if v.get("phase") == phase}


def current_wave(state: OrchestratorState) -> int:
    """The wave of the current phase (1 for a state written before waves existed)."""
    return int(state.get("wave") or 1)


def wave_of(record: dict[str, Any]) -> int:
    """The wave a subtask record belongs to (1 when it names none)."""
    return int(record.get("wave") or 1)


def wave_subtasks(state: OrchestratorState) -> dict[str, dict]:
    """The subtasks of the current wave of the current phase."""
    wave = current_wave(state)
    return {k: v for k, v in phase_subtasks(state).items() if wave_of(v) == wave}


def merge_key(phase: str, wave: int) -> str:
    """The `merged` key of a phase's wave: the phase itself for its first wave (as before
    waves), `phase#N` for the next ones."""
    return phase if wave <= 1 else f"{phase}#{wave}"


def merge_phase(key: str) -> str:
    """The phase a `merged` key belongs to (`merge_key`'s inverse)."""
    return key.split("#", 1)[0]


def last_phase(state: OrchestratorState) -> bool:
    """True in the workflow's last phase, or once the lead declared the objective answered."""
    return bool(state.get("done_reason")) or state["phase_index"] + 1 >= len(state["phases"])


def skipped_phases(state: OrchestratorState) -> list[str]:
    """The phases a task that ends now does not run (after `done_reason`)."""
    if not state.get("done_reason"):
        return []
    return list(state["phases"][state["phase_index"] + 1 :])


def pending_subtasks(state: OrchestratorState) -> dict[str, dict]:
    """Subtasks of the current phase without findings (failed ones included: retried)."""
    done = state.get("findings") or {}
    return {k: v for k, v in phase_subtasks(state).items() if k not in done}


def usage_record(result: Any, before: dict[str, int] | None = None) -> dict[str, int]:
    """An agent run's model calls and prompt tokens, added to `before` (the lead's so far)."""
    before = before or {}
    return {
        "calls": int(before.get("calls", 0)) + int(getattr(result, "calls", 0) or 0),
        "input_tokens": int(before.get("input_tokens", 0))
        + int(getattr(result, "input_tokens", 0) or 0),
    }


def usage_totals(usage: dict[str, dict[str, int]] | None) -> dict[str, int]:
    """Model calls and prompt tokens of the whole run."""
    values = list((usage or {}).values())
    return {
        "calls": sum(int(v.get("calls", 0)) for v in values),
        "input_tokens": sum(int(v.get("input_tokens", 0)) for v in values),
    }


def spend(tokens: dict[str, int] | None, lead_calls: list[JsonObject] | None) -> dict:
    """What a task's agents spent (prompt plus completion tokens), in all, by phase and by
    agent: subagents' keys name both (`{agent}:{phase}/{id}`); the lead's spend is split
    over the phases by its planning turns (`lead_calls[].spent`), its answer call counted
    under the phase it came after."""
    tokens = dict(tokens or {})
    by_phase: dict[str, int] = {}
    by_agent: dict[str, int] = {}
    for key, n in tokens.items():
        agent, _, where = key.partition(":")
        by_agent[agent] = by_agent.get(agent, 0) + int(n or 0)
        if where:
            phase = where.split("/", 1)[0]
            by_phase[phase] = by_phase.get(phase, 0) + int(n or 0)
    lead_total = int(tokens.get("lead") or 0)
    split = 0
    for call in lead_calls or []:
        n = int(call.get("spent") or 0)
        if n and call.get("phase"):
            by_phase[call["phase"]] = by_phase.get(call["phase"], 0) + n
            split += n
    if lead_total > split:  # turns recorded before their spend was, or the answer call
        by_phase["(lead, unsplit)"] = lead_total - split
    return {"spent": sum(by_agent.values()), "by_phase": by_phase, "by_agent": by_agent}


def failure_summary(failed: dict[str, JsonObject]) -> str:
    """`key (agent): error; ...` for the final line, the plan and the checkpoint."""
    return "; ".join(
        f"{k} ({v.get('agent', '?')}): {v.get('error', 'failed')}"[:300]
        for k, v in sorted(failed.items())
    )
