"""The workflow: phases, agents, thresholds and model of a run, from an optional YAML file.

```yaml
name: survey
phases: [exploration, planning, implementation, review]
agents:
  researcher:
    role: researcher
    description: Reads the code in its scope and reports what it found.
    tools: [list_files, read_file, grep_files, recall_memory]
    max_steps: 8
thresholds:
  token_threshold: 150000   # default: the external-memory skill's triggers
  warning_ratio: 0.8
  max_parallel: 4
  max_subtasks: 4
model: openai:gpt-4o-mini   # optional; --model and $TETHER_MODEL win
model_timeout: 60           # optional; seconds per model request (default 120)
memory_dir: .temp/memory    # optional; relative to the workflow file
```

Everything is optional. Precedence, lowest first: built-in defaults, the external-memory
skill's front matter, the workflow file, then command-line overrides (`with_overrides`).
Parsing is strict: unknown keys, malformed YAML, empty or duplicate phases, ill-typed agents
and non-positive thresholds are a `WorkflowError` with one line naming the file.

Invariant: a `Workflow` that exists is valid (pydantic, `extra="forbid"`), and every phase
name is usable in a file name.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    StrictInt,
    StrictStr,
    ValidationError,
    field_validator,
    model_validator,
)

from orchestrator.defaults import DEFAULT_PHASES, TOKEN_THRESHOLD, WARNING_RATIO
from orchestrator.errors import WorkflowError
from orchestrator.paths import read_text
from orchestrator.skills import external_memory_triggers, yaml_problem

DEFAULT_AGENT = "researcher"
PHASE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
DEFAULT_TOOLS = (
    "list_files",
    "read_file",
    "grep_files",
    "recall_memory",
    "memory_fetch",
    "memory_read",
)
#: Every tool name an agent may list: the workdir tools, then the memory tools.
#: A test checks this against the tools a run actually builds, so it cannot drift.
KNOWN_TOOLS = (
    "list_files",
    "read_file",
    "grep_files",
    "recall_memory",
    "memory_read",
    "memory_write",
    "memory_patch",
    "memory_append",
    "memory_list",
    "memory_log",
    "memory_fetch",
)


class AgentSpec(BaseModel):
    """A kind of subagent the lead can assign subtasks to."""

    model_config = ConfigDict(extra="forbid")

    role: StrictStr = DEFAULT_AGENT
    description: StrictStr = (
        "Investigates one subtask with the tools it is given and reports findings."
    )
    tools: list[StrictStr] = Field(default_factory=lambda: list(DEFAULT_TOOLS))
    """Tool names: workdir tools (`list_files`, `read_file`, `grep_files`), memory tools
    (`recall_memory`, `memory_*`)."""
    model: StrictStr | None = None
    """`provider:model` for this agent; None means the run's model."""
    max_steps: StrictInt = Field(default=8, gt=0)
    """Model calls the subagent may make before it must submit its findings."""

    @field_validator("tools")
    @classmethod
    def _known_tools(cls, tools: list[str]) -> list[str]:
        unknown = [t for t in tools if t not in KNOWN_TOOLS]
        if unknown:
            raise ValueError(f"unknown tool {unknown[0]!r}; known tools: {', '.join(KNOWN_TOOLS)}")
        return tools


class Thresholds(BaseModel):
    """Token and concurrency limits of a run."""

    model_config = ConfigDict(extra="forbid")

    token_threshold: StrictInt = Field(default=TOKEN_THRESHOLD, gt=0)
    """Tokens of lead context at which a snapshot is written (save zone)."""
    warning_ratio: float = Field(default=WARNING_RATIO, gt=0, le=1)
    """Fraction of `token_threshold` where the warning zone starts."""
    max_parallel: StrictInt = Field(default=4, gt=0)
    """Subagents running at once."""
    max_subtasks: StrictInt = Field(default=4, gt=0)
    """Most subtasks the lead may plan per phase."""
    subagent_context_tokens: StrictInt = Field(default=32_000, gt=0)
    """Budget of each subagent's own context."""

    @field_validator("warning_ratio", mode="before")
    @classmethod
    def _number(cls, value: Any) -> Any:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError("must be a number between 0 and 1")
        return value

    @property
    def warning_tokens(self) -> int:
        """The first token count in the warning zone."""
        return int(self.token_threshold * self.warning_ratio)


class Workflow(BaseModel):
    """Phases, agents, thresholds and model of a run."""

    model_config = ConfigDict(extra="forbid")

    name: StrictStr = "default"
    phases: list[StrictStr] = Field(default_factory=lambda: list(DEFAULT_PHASES))
    agents: dict[str, AgentSpec] = Field(default_factory=lambda: {DEFAULT_AGENT: AgentSpec()})
    thresholds: Thresholds = Field(default_factory=Thresholds)
    model: StrictStr | None = None
    model_timeout: float | None = Field(default=None, gt=0)
    """Seconds one model request may take (default 120; `--model-timeout` wins)."""
    memory_dir: StrictStr | None = None
    _source: Path | None = PrivateAttr(default=None)

    @field_validator("phases")
    @classmethod
    def _phases(cls, phases: list[str]) -> list[str]:
        if not phases:
            raise ValueError("must name at least one phase")
        for phase in phases:
            if not PHASE_RE.match(phase):
                raise ValueError(
                    f"phase {phase!r} must be letters, digits, '.', '_' or '-' "
                    "(it is used in file names)"
                )
        dupes = sorted({p for p in phases if phases.count(p) > 1})
        if dupes:
            raise ValueError(f"phase {dupes[0]!r} is listed more than once")
        return phases

    @model_validator(mode="after")
    def _agents(self) -> Workflow:
        if not self.agents:
            raise ValueError("agents: must define at least one agent (or leave 'agents' out)")
        return self

    # -- queries -----------------------------------------------------------------------
    @property
    def source(self) -> Path | None:
        """The YAML file this workflow came from, if any."""
        return self._source

    def phase_index(self, name: str) -> int:
        """Position of phase `name`.

        Raises:
            WorkflowError: unknown phase; the message lists the valid ones.
        """
        try:
            return self.phases.index(name)
        except ValueError:
            raise WorkflowError(
                f"unknown phase {name!r}; this workflow's phases are: {', '.join(self.phases)}"
            ) from None

    def next_phase(self, name: str) -> str | None:
        """The phase after `name`, or None after the last one."""
        i = self.phase_index(name)
        return self.phases[i + 1] if i + 1 < len(self.phases) else None

    def agent(self, name: str | None) -> AgentSpec:
        """The spec for agent `name`; unknown or empty names get the default agent's spec."""
        if name and name in self.agents:
            return self.agents[name]
        if DEFAULT_AGENT in self.agents:
            return self.agents[DEFAULT_AGENT]
        return next(iter(self.agents.values()))

    def resolved_memory_dir(self) -> Path | None:
        """`memory_dir`, relative to the workflow file's folder (or the cwd)."""
        if not self.memory_dir:
            return None
        path = Path(self.memory_dir).expanduser()
        if not path.is_absolute():
            base = self._source.parent if self._source else Path.cwd()
            path = base / path
        return path.absolute()

    def with_overrides(
        self,
        token_threshold: int | None = None,
        max_parallel: int | None = None,
        model: str | None = None,
    ) -> Workflow:
        """A copy with command-line overrides applied (None leaves a value alone).

        Raises:
            WorkflowError: a non-positive threshold or parallelism.
        """
        for flag, value in (
            ("--token-threshold", token_threshold),
            ("--max-parallel", max_parallel),
        ):
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value <= 0
            ):
                raise WorkflowError(f"{flag} must be a positive integer, got {value!r}")
        thresholds = self.thresholds.model_copy(
            update={
                k: v
                for k, v in (("token_threshold", token_threshold), ("max_parallel", max_parallel))
                if v is not None
            }
        )
        updated = self.model_copy(update={"thresholds": thresholds})
        if model is not None:
            updated = updated.model_copy(update={"model": model})
        updated._source = self._source
        return updated


# -- loading --------------------------------------------------------------------------
class _UniqueKeyLoader(yaml.SafeLoader):
    """`yaml.SafeLoader` that refuses duplicate mapping keys (YAML silently keeps the last)."""


def _construct_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark
            )
        seen.add(key)
    return loader.construct_mapping(node)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _validation_problem(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"])
    msg = err["msg"].removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        parent = err["loc"][:-1]
        allowed = _allowed_keys(parent)
        return f"unknown key {where!r}" + (f"; allowed: {', '.join(allowed)}" if allowed else "")
    if err["type"] == "missing":
        return f"{where!r} is required"
    prefix = f"{where!r}: " if where else ""
    return f"{prefix}{msg} (got {err.get('input')!r})" if "input" in err and where else prefix + msg


def _allowed_keys(parent: tuple[Any, ...]) -> list[str]:
    if not parent:
        return list(Workflow.model_fields)
    if parent == ("thresholds",):
        return list(Thresholds.model_fields)
    if len(parent) == 2 and parent[0] == "agents":
        return list(AgentSpec.model_fields)
    return []


def default_workflow(project_dir: str | os.PathLike[str] | None = None) -> Workflow:
    """The built-in workflow with thresholds from the external-memory skill."""
    return Workflow(thresholds=_skill_thresholds(project_dir))


def _skill_thresholds(project_dir: str | os.PathLike[str] | None) -> Thresholds:
    triggers = external_memory_triggers(project_dir)
    return Thresholds(
        token_threshold=triggers.token_threshold, warning_ratio=triggers.warning_ratio
    )


def _read_yaml(path: Path) -> Any:
    # here, not at the top: this function is the module's one use of it
    from orchestrator import _yaml

    text = read_text(path, "workflow file", WorkflowError, encoding="utf-8-sig")
    try:
        return _yaml.load(text, _UniqueKeyLoader)  # bounded: a project's file is untrusted
    except yaml.YAMLError as exc:
        raise WorkflowError(
            f"workflow file {str(path)!r}: malformed YAML: {yaml_problem(exc)}"
        ) from None


def load_workflow(
    path: str | os.PathLike[str] | None = None,
    project_dir: str | os.PathLike[str] | None = None,
) -> Workflow:
    """Load a workflow YAML file, or the defaults when `path` is None.

    Thresholds the file leaves out come from the external-memory skill's triggers (a
    project's own skill wins over the shipped one).

    Raises:
        WorkflowError: missing file, malformed YAML, unknown keys, empty or duplicate
            phases, ill-typed values; one line naming the file.
        SkillError: the external-memory skill's front matter is invalid.
    """
    if path is None:
        return default_workflow(project_dir)
    path = Path(path)
    data = _read_yaml(path)
    if data is None:
        raise WorkflowError(
            f"workflow file {str(path)!r} is empty; give at least 'phases:' or drop --workflow"
        )
    if not isinstance(data, dict):
        raise WorkflowError(
            f"workflow file {str(path)!r} must be a mapping of keys such as 'phases' and "
            f"'agents', got {type(data).__name__}"
        )
    thresholds = data.get("thresholds")
    if thresholds is None or isinstance(thresholds, dict):
        base = _skill_thresholds(project_dir).model_dump()
        data = {**data, "thresholds": {**base, **(thresholds or {})}}
    try:
        workflow = Workflow.model_validate(data)
    except ValidationError as exc:
        raise WorkflowError(f"workflow file {str(path)!r}: {_validation_problem(exc)}") from None
    workflow._source = path.absolute()
    return workflow
