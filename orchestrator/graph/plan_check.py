"""Plans checked against the workdir and the findings, before any subagent runs.

A lead's `PhasePlan` can name a scope that is not in the workdir (`scope: ["logs"]` on a
project without `logs/`: the subagent explores nothing) or mark key questions answered
that no finding addresses (its own new questions, in its first plan). `PlanCheck` holds a
plan to the facts while the lead plans:

* **Refused, with one line.** Each subtask's scope entries must exist in the workdir
  (resolved inside it; a glob must match something), and each key question newly marked
  in `answered` must be addressed by a finding of this task (`artifacts.plan.addressed_by`,
  the measure the plan file uses). A plan that fails is an invalid `PhasePlan` call: the
  lead gets the tool error (`PhasePlan`'s validator calls the check through
  `types.PLAN_CHECK`) and plans again, within its turn's steps.
* **Settled, with a note.** After `PLAN_RETRIES` refused plans of one turn the plan is
  accepted and tether settles it itself (`settle`): the scope entries that do not exist
  are removed, a subtask none of whose scope exists is dropped, unsupported `answered`
  marks are dropped; each is a note in the plan file (`Progress`), a `warning` event and
  a line of the lead's log.
* **Flagged.** A remote agent's scope is the server's to resolve: it is not checked here,
  and the plan file says so.

The refusals are counted from the lead's conversation (the tool errors it was given), so a
replayed turn counts the same, and a plan is refused only while a call of the lead is
answered (a replayed turn's accepted plan, read back, is not refused again).

Invariant: no subagent is sent a scope that does not exist in the workdir without the
plan file saying so.
"""

from __future__ import annotations

import contextlib
import glob
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import ToolMessage

from memory.errors import PathEscapeError
from memory.paths import confine
from orchestrator.artifacts.plan import addressed_by
from orchestrator.types import PLAN_CHECK, PLAN_TOOL, PhasePlan

PLAN_RETRIES = 2
"""Plans refused in one planning turn before tether settles the plan itself."""
REFUSED = "plan refused:"
"""What a refusal starts with (how the refusals of a turn are counted)."""
MAX_NOTES = 20
"""Notes on settled or flagged plans the plan file keeps (the newest)."""


def scope_problem(workdir: Path, entry: str) -> str:
    """Why a scope entry is not in the workdir; '' when it is."""
    raw = str(entry).strip().rstrip("/") or "."
    if raw in (".", "./"):
        return ""
    try:
        if any(c in raw for c in "*?["):
            if os.path.isabs(raw) or ".." in Path(raw).parts:
                return "is outside the workdir"
            found = glob.glob(raw, root_dir=workdir, recursive=True)
            return "" if found else "matches nothing in the workdir"
        target = confine(workdir, raw, label="the workdir")
    except PathEscapeError:
        return "is outside the workdir"
    return "" if target.exists() else "does not exist in the workdir"


class PlanCheck(AgentMiddleware):
    """The check of one planning turn (module docstring); also the lead's middleware that
    counts the turn's refusals from its conversation.

    Args:
        workdir: the task's workdir.
        remote: the workflow agents that run remotely (their scope is not checked).
        default_agent: the agent a subtask of an unknown agent goes to.
        questions: the key questions so far; answered: those already marked answered.
        records: this task's findings so far, as `addressed_by` reads them (called once,
            when a plan marks a question answered).
        phases: the workflow's phases.
    """

    def __init__(
        self,
        workdir: str | os.PathLike[str],
        *,
        remote: set[str],
        known: set[str],
        default_agent: str,
        questions: Sequence[str],
        answered: set[int],
        records: Callable[[], list[Mapping[str, Any]]],
        phases: Sequence[str],
    ) -> None:
        super().__init__()
        self.workdir = Path(workdir).resolve()
        self.remote, self.known, self.default_agent = remote, known, default_agent
        self.questions, self.answered = list(questions), set(answered)
        self._records_of, self._records = records, None
        self.phases = list(phases)
        self.refusals = 0
        self._active = 0

    # -- the lead's middleware: how many plans of this turn were refused -------------------
    def wrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        self.refusals = sum(
            1
            for m in request.messages
            if isinstance(m, ToolMessage) and m.name == PLAN_TOOL and REFUSED in str(m.content)
        )
        return self._within(handler, request)

    def wrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        return self._within(handler, request)

    def _within(self, handler: Callable[[Any], Any], request: Any) -> Any:
        """`handler(request)`, the check armed: a plan is refused only while the lead's
        call is answered, never when a replayed turn's accepted plan is read back."""
        self._active += 1
        try:
            return handler(request)
        finally:
            self._active -= 1

    # -- the checks ------------------------------------------------------------------------
    def _agent(self, name: str) -> str:
        return name if name in self.known else self.default_agent

    def scope_problems(self, plan: PhasePlan) -> dict[int, list[tuple[str, str]]]:
        """Per subtask (by index), its scope entries not in the workdir, with why."""
        out: dict[int, list[tuple[str, str]]] = {}
        for i, sub in enumerate(plan.subtasks):
            if self._agent(sub.agent) in self.remote:
                continue
            bad = [(s, p) for s in sub.scope if (p := scope_problem(self.workdir, s))]
            if bad:
                out[i] = bad
        return out

    def unsupported(self, plan: PhasePlan) -> list[int]:
        """The key questions `plan` newly marks answered that no finding addresses."""
        questions = list(dict.fromkeys([*self.questions, *plan.key_questions]))
        new = sorted({i for i in plan.answered if 1 <= i <= len(questions)} - self.answered)
        if not new:
            return []
        if self._records is None:
            self._records = list(self._records_of())
        return [
            i for i in new if not addressed_by(questions[i - 1], self._records, phases=self.phases)
        ]

    def __call__(self, plan: PhasePlan) -> str:
        """The one line refusing `plan`, or '' (also once the turn's retries are spent)."""
        if not self._active or self.refusals >= PLAN_RETRIES:
            return ""
        parts = [
            f"subtask {plan.subtasks[i].id!r}: scope " + ", ".join(f"{s!r} {why}" for s, why in bad)
            for i, bad in self.scope_problems(plan).items()
        ]
        questions = list(dict.fromkeys([*self.questions, *plan.key_questions]))
        parts += [
            f"key question {i} ({questions[i - 1][:80]!r}) is marked answered but no finding "
            "of this task addresses it yet"
            for i in self.unsupported(plan)
        ]
        if not parts:
            return ""
        return (
            f"{REFUSED} " + "; ".join(parts) + ". Give scopes that exist in the workdir "
            "(list_files shows them) and mark answered only what findings address."
        )

    def settle(self, plan: PhasePlan) -> tuple[PhasePlan, list[str]]:
        """`plan` with what still fails the check removed, and a note for each removal and
        for each remote scope not checked."""
        notes: list[str] = []
        problems = self.scope_problems(plan)
        subtasks = []
        for i, sub in enumerate(plan.subtasks):
            if self._agent(sub.agent) in self.remote and sub.scope:
                notes.append(
                    f"subtask {sub.id}: scope {', '.join(sub.scope)} not checked (remote "
                    f"agent {self._agent(sub.agent)}: its server resolves it)"
                )
            bad = dict(problems.get(i, []))
            if not bad:
                subtasks.append(sub)
                continue
            kept = [s for s in sub.scope if s not in bad]
            said = ", ".join(f"{s} {why}" for s, why in bad.items())
            if kept:
                notes.append(f"subtask {sub.id}: scope {said}: removed from its scope")
                subtasks.append(sub.model_copy(update={"scope": kept}))
            else:
                notes.append(f"subtask {sub.id} dropped: scope {said}")
        dropped = set(self.unsupported(plan))
        if dropped:
            notes.append(
                "key question(s) "
                + ", ".join(map(str, sorted(dropped)))
                + " not marked answered: no finding of this task addresses them"
            )
        answered = [i for i in plan.answered if i not in dropped]
        return plan.model_copy(update={"subtasks": subtasks, "answered": answered}), notes


@contextlib.contextmanager
def checking(check: PlanCheck) -> Iterator[PlanCheck]:
    """`PhasePlan` validated with `check` while the lead's turn runs."""
    token = PLAN_CHECK.set(check)
    try:
        yield check
    finally:
        PLAN_CHECK.reset(token)
