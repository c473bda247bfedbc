"""The structured replies agents give the orchestrator, as tool schemas.

A model (real or tether's offline model) ends a lead planning turn by calling the
`PhasePlan` tool and a subagent ends its work by calling `SubmitFindings`. Both are plain
pydantic models bound as tools with `model.bind_tools([...])`, so any LangChain chat
model with tool calling can drive tether. Before the final call an agent may call the
ordinary tools it was given (file tools, `recall_memory`, memory tools) as often as its
step budget allows.

`Subtask`, `Plan` and `Finding` are defined once, in `orchestrator.run_model`: `PhasePlan`
is a `Plan` with the phase's subtasks and the lead's verdict, and `SubmitFindings` a view
of `Finding` (`model_view`), so the tools' schemas follow the model.
"""

from __future__ import annotations

from pydantic import ConfigDict, Field

from orchestrator.run_model import RECORDED, FileNote, Finding, Plan, Subtask, model_view

__all__ = ["FINDINGS_TOOL", "PLAN_TOOL", "FileNote", "PhasePlan", "SubmitFindings", "Subtask"]


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
    answered: list[int] = Field(
        default_factory=list,
        description="Numbers (1-based, as listed under 'Key questions') of the key questions "
        "the findings so far answer.",
    )


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
