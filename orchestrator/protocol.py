"""The structured replies agents give the orchestrator, as tool schemas.

A model (real or tether's offline model) ends a lead planning turn by calling the
`PhasePlan` tool and a subagent ends its work by calling `SubmitFindings`. Both are plain
pydantic models bound as tools with `model.bind_tools([...])`, so any LangChain chat
model with tool calling can drive tether. Before the final call an agent may call the
ordinary tools it was given (file tools, `recall_memory`, memory tools) as often as its
step budget allows.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


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


class PhasePlan(BaseModel):
    """Submit the research plan and the subtasks for the current phase."""

    model_config = ConfigDict(extra="forbid")

    strategy: str = Field(description="High-level approach for this phase, 1-3 sentences.")
    key_questions: list[str] = Field(default_factory=list)
    subtasks: list[Subtask] = Field(
        default_factory=list,
        description="Independent subtasks to run in parallel (none when the phase needs none).",
    )
    constraints: list[str] = Field(default_factory=list)
    next_actions: list[str] = Field(default_factory=list)
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


class FileNote(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: str
    description: str


class SubmitFindings(BaseModel):
    """Submit what this subagent found; ends the subagent's work."""

    model_config = ConfigDict(extra="forbid")

    status: str = Field(default="completed", description="completed | partial | failed")
    summary: str = Field(description="2-3 sentence summary of what was found.")
    key_discoveries: list[str] = Field(default_factory=list)
    files: list[FileNote] = Field(
        default_factory=list,
        description="Files examined, with a note (files written with memory tools are "
        "recorded from the tool calls).",
    )
    open_questions: list[str] = Field(default_factory=list)
    recommendations: list[str] = Field(default_factory=list)


PLAN_TOOL = PhasePlan.__name__
FINDINGS_TOOL = SubmitFindings.__name__
