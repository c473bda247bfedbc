"""A run's settings: the one place where each option gets its value.

Layers, lowest first; a value set in a layer wins over every layer below it:

=========== =====================================================================
layer       sets
=========== =====================================================================
default     everything (`orchestrator.config.defaults`; the model: the first provider
            whose API key is set, else the offline model)
skill       `token_threshold`, `warning_ratio` (external-memory `SKILL.md` triggers)
workflow    `thresholds.*`, `model`, `model_timeout`, `memory_dir`, `status_file`,
            `budget_tokens`
environment `TETHER_MEMORY_DIR`, `TETHER_MEMORY_URL`, `TETHER_MODEL`,
            `TETHER_MODEL_TIMEOUT`
task        on `resume` and `approve`: the `model`, `token_threshold`,
            `max_parallel`, `max_subtasks` and `budget_tokens` the task was started
            with (or last given)
flags       CLI flags (`--model`, `--max-parallel`, ...) and the same-named
            `Orchestrator(...)` arguments (`Overrides`)
=========== =====================================================================

`Settings.resolve` walks the layers; `Settings.sources` says which layer each value came
from. The CLI, the Python API (`orchestrator.api.Orchestrator`) and the LangGraph Server
entry (`orchestrator.server`) all pass what they were given as `Overrides`; none of them
reads the environment or a workflow value on its own.

Invariant: a `Settings` that exists is valid. An invalid value raises one line that names
the layer it came from: an argument by its name, an environment variable by its name, the
workflow and skill files by their paths (those two are checked when they are parsed, by
`orchestrator.config.workflow` and `orchestrator.config.skills`), a flag by click. A new
task's own inputs (objective, task id, start phase, workdir) are checked by
`check_new_task`, before anything is written.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memory.paths import DEFAULT_RELATIVE
from memory.paths import ENV_VAR as ENV_MEMORY_DIR
from orchestrator.artifacts.brief import check_objective
from orchestrator.artifacts.tasks import check_task_id, new_task_id
from orchestrator.config.defaults import TOKEN_THRESHOLD, WARNING_RATIO
from orchestrator.errors import ModelConfigError, OrchestratorUserError, WorkdirError, WorkflowError

if TYPE_CHECKING:
    from orchestrator.config.skills import Triggers
    from orchestrator.config.workflow import Workflow

ENV_MEMORY_URL = "TETHER_MEMORY_URL"
ENV_MODEL = "TETHER_MODEL"
ENV_MODEL_TIMEOUT = "TETHER_MODEL_TIMEOUT"
DEFAULT_MODEL_TIMEOUT = 120.0
"""Seconds one model request may take before it is abandoned and retried."""
MAX_SECONDS = threading.TIMEOUT_MAX
"""The longest timeout a thread can wait for (`threading.TIMEOUT_MAX`)."""
DEFAULT_MAX_PARALLEL = 4
DEFAULT_MAX_SUBTASKS = 4
DEFAULT_MAX_WAVES = 50
OFFLINE_NAME = "tether:offline"
#: (API key variable, default small model) checked in order when nothing is chosen.
PROVIDER_DEFAULTS: tuple[tuple[str, str], ...] = (
    ("OPENAI_API_KEY", "openai:gpt-4o-mini"),
    ("ANTHROPIC_API_KEY", "anthropic:claude-haiku-4-5"),
    ("GOOGLE_API_KEY", "google_genai:gemini-2.5-flash"),
    ("MISTRAL_API_KEY", "mistralai:mistral-small-latest"),
    ("GROQ_API_KEY", "groq:llama-3.1-8b-instant"),
)

#: How each layer is named in `Settings.sources` (the model's keeps its older names:
#: `--model`, the variable, `workflow`, a key variable, `default`; see `ResolvedModel`).
DEFAULT, SKILL, WORKFLOW, TASK, FLAG = "default", "skill", "workflow", "task", "flag"


@dataclass(frozen=True)
class Overrides:
    """The top layer: options given as CLI flags or `Orchestrator(...)` arguments.

    None (and False for `status_file`) means "not given": the layers below decide.

    Raises:
        OrchestratorUserError: a non-positive number (one line naming the argument).
    """

    memory_dir: str | os.PathLike[str] | None = None
    memory_url: str | None = None
    model: str | None = None
    """`provider:model` or `offline` (a chat model object bypasses settings)."""
    model_timeout: float | None = None
    token_threshold: int | None = None
    max_parallel: int | None = None
    max_subtasks: int | None = None
    max_waves: int | None = None
    status_file: bool = False
    budget_tokens: int | None = None
    """The task's token budget (prompt plus completion tokens of all its agents)."""

    def __post_init__(self) -> None:
        if self.token_threshold is not None and _not_positive(self.token_threshold):
            raise OrchestratorUserError(
                f"token threshold {self.token_threshold!r} must be a positive number of tokens"
            )
        for name in ("max_parallel", "max_subtasks", "max_waves", "budget_tokens"):
            value = getattr(self, name)
            if value is not None and _not_positive(value):
                raise OrchestratorUserError(
                    f"{name.replace('_', ' ')} {value!r} must be at least 1"
                )
        if self.model_timeout is not None:
            _seconds(self.model_timeout, "model_timeout argument")


@dataclass(frozen=True)
class Settings:
    """The resolved options of a run (see the module docstring for the layers)."""

    memory_dir: Path
    """The memory directory (unused when `memory_url` is set)."""
    memory_url: str | None
    """A shared memory's URL (PostgreSQL): the memory and graph state kept there."""
    model: str
    """The model string (`provider:model` or `tether:offline`)."""
    model_timeout: float
    """Seconds per model request."""
    token_threshold: int
    """Lead-context tokens that trigger a snapshot (before the model's window caps it)."""
    warning_ratio: float
    max_parallel: int
    max_subtasks: int
    status_file: bool
    max_waves: int = DEFAULT_MAX_WAVES
    """Most waves of one phase (the lead asks for each next one: `continue_phase`)."""
    budget_tokens: int | None = None
    """The task's token budget, or None (no budget)."""
    sources: Mapping[str, str] = field(default_factory=dict)
    """Where each value came from: `default`, `skill`, `workflow`, an environment variable's
    name, `task` or `flag` (the model: `--model` for a flag or argument)."""

    @classmethod
    def resolve(
        cls,
        overrides: Overrides,
        workflow: Workflow,
        triggers: Triggers | None = None,
        *,
        record: Mapping[str, object] | None = None,
        env: Mapping[str, str] | None = None,
    ) -> Settings:
        """Walk the layers for every option.

        Args:
            overrides: flags or API arguments.
            workflow: the run's workflow (from a file, or the defaults).
            triggers: the external-memory skill's triggers (None: the defaults).
            record: the task being continued (`resume`, `approve`), else None.
            env: the environment (default `os.environ`).

        Raises:
            ModelConfigError: a `TETHER_MODEL_TIMEOUT` that is not a positive number.
        """
        env = os.environ if env is None else env
        record = record or {}
        limits, own = workflow.thresholds, workflow.own_thresholds
        sources: dict[str, str] = {}

        def pick(name: str, *layers: tuple[Any, str]) -> Any:
            value, source = _first(layers)
            sources[name] = source
            return value

        def limit(name: str, default: Any, skill: Any = None) -> Any:
            return pick(
                name,
                (getattr(overrides, name), FLAG),
                (record.get(name), TASK),
                (getattr(limits, name) if name in own else None, WORKFLOW),
                (skill, SKILL),
                (default, DEFAULT),
            )

        model, sources["model"] = choose_model(
            overrides.model, workflow.model, recorded=record.get("model"), env=env
        )
        where = memory_location(
            overrides.memory_dir, overrides.memory_url, env=env, workflow=workflow
        )
        sources.update(memory_dir=where.dir_source, memory_url=where.url_source)
        return cls(
            memory_dir=where.dir,
            memory_url=where.url,
            model=model,
            model_timeout=pick(
                "model_timeout",
                *_timeouts(overrides.model_timeout, workflow.model_timeout, env),
            ),
            token_threshold=limit(
                "token_threshold", TOKEN_THRESHOLD, triggers and triggers.token_threshold
            ),
            warning_ratio=pick(
                "warning_ratio",
                (limits.warning_ratio if "warning_ratio" in own else None, WORKFLOW),
                (triggers and triggers.warning_ratio, SKILL),
                (WARNING_RATIO, DEFAULT),
            ),
            max_parallel=limit("max_parallel", DEFAULT_MAX_PARALLEL),
            max_subtasks=limit("max_subtasks", DEFAULT_MAX_SUBTASKS),
            max_waves=limit("max_waves", DEFAULT_MAX_WAVES),
            status_file=pick(
                "status_file",
                (overrides.status_file or None, FLAG),
                (workflow.status_file or None, WORKFLOW),
                (False, DEFAULT),
            ),
            budget_tokens=pick(
                "budget_tokens",
                (overrides.budget_tokens, FLAG),
                (record.get("budget_tokens"), TASK),
                (workflow.budget_tokens, WORKFLOW),
                (None, DEFAULT),
            ),
            sources=sources,
        )


@dataclass(frozen=True)
class MemoryLocation:
    """Where a command's memory is: a directory, or a shared backend's URL."""

    dir: Path
    url: str | None
    dir_source: str
    url_source: str

    @property
    def url_flag(self) -> str:
        """How the URL was given, as an error message names it."""
        return "--memory-url" if self.url_source == FLAG else self.url_source


def memory_location(
    memory_dir: str | os.PathLike[str] | None = None,
    memory_url: str | None = None,
    *,
    env: Mapping[str, str] | None = None,
    workflow: Workflow | None = None,
) -> MemoryLocation:
    """The memory directory and URL: the flag or argument, the environment
    (`$TETHER_MEMORY_DIR`, `$TETHER_MEMORY_URL`), the workflow's `memory_dir`, else
    `./.temp/memory` and no URL. Commands that take no workflow (`status`, `checkpoint
    list`, ...) ask this alone."""
    env = os.environ if env is None else env
    where = workflow.resolved_memory_dir() if workflow is not None else None
    folder, dir_source = _first(
        (
            (_path(memory_dir), FLAG),
            (_path(env.get(ENV_MEMORY_DIR)), ENV_MEMORY_DIR),
            (where, WORKFLOW),
            (Path.cwd() / DEFAULT_RELATIVE, DEFAULT),
        )
    )
    url, url_source = _first(
        ((memory_url, FLAG), (env.get(ENV_MEMORY_URL), ENV_MEMORY_URL), (None, DEFAULT))
    )
    return MemoryLocation(folder, url, dir_source, url_source)


def choose_model(
    flag: str | None = None,
    workflow_model: str | None = None,
    *,
    recorded: str | None = None,
    env: Mapping[str, str] | None = None,
) -> tuple[str, str]:
    """The model string and where it came from: `--model` (a flag or argument), the
    task's recorded model (`task`), `$TETHER_MODEL`, the workflow's, the first provider
    whose API key is set (`OPENAI_API_KEY`, ...), else the offline model (`default`)."""
    env = os.environ if env is None else env
    for value, source in (
        (flag, "--model"),
        (recorded, TASK),  # a resumed task sticks to its model
        (env.get(ENV_MODEL), ENV_MODEL),
        (workflow_model, WORKFLOW),
    ):
        if value and value.strip():
            return value.strip(), source
    for key, default in PROVIDER_DEFAULTS:
        if env.get(key, "").strip():
            return default, key
    return OFFLINE_NAME, DEFAULT


def model_origin(source: str, workflow_file: str | os.PathLike[str] | None = None) -> str:
    """Where a model name came from, as an error message says it after the name: `from
    TETHER_MODEL`, `from --model`, `from the workflow file PATH`, ... (`source` as
    `choose_model` gives it)."""
    if source == WORKFLOW:
        return (
            f"from the workflow file {str(workflow_file)}" if workflow_file else "from the workflow"
        )
    if source == TASK:
        return "recorded with the task; --model changes it"
    if source in dict(PROVIDER_DEFAULTS):
        return f"chosen because {source} is set"
    if source == DEFAULT:
        return "the default"
    return f"from {source}"  # `--model`, `TETHER_MODEL`


def model_timeout(
    flag: float | None = None,
    workflow_timeout: float | None = None,
    env: Mapping[str, str] | None = None,
) -> float:
    """Seconds per model request: `--model-timeout`, `$TETHER_MODEL_TIMEOUT`, the
    workflow's `model_timeout`, else `DEFAULT_MODEL_TIMEOUT`.

    Raises:
        ModelConfigError: a value that is not a positive number (naming where it was set).
    """
    env = os.environ if env is None else env
    return _first(_timeouts(flag, workflow_timeout, env))[0]


def _timeouts(
    flag: float | None, workflow_timeout: float | None, env: Mapping[str, str]
) -> tuple[tuple[float | None, str], ...]:
    """The model timeout's layers, each value checked."""
    raw = env.get(ENV_MODEL_TIMEOUT)
    return (
        (_seconds(flag, "--model-timeout"), FLAG),
        (_seconds(raw, ENV_MODEL_TIMEOUT), ENV_MODEL_TIMEOUT),
        (_seconds(workflow_timeout, "workflow model_timeout"), WORKFLOW),
        (DEFAULT_MODEL_TIMEOUT, DEFAULT),
    )


def _first(layers: tuple[tuple[Any, str], ...]) -> tuple[Any, str]:
    """The first layer that sets a value (layers are given highest first, down to the
    default layer, whose value stands even when it is None: no `memory_url`)."""
    for value, source in layers:
        if value is not None and value != "":
            return value, source
    return layers[-1]


def _seconds(value: Any, where: str) -> float | None:
    """`value` as a positive number of seconds; None (or blank) when not set."""
    if value is None or str(value).strip() == "":
        return None
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        seconds = -1.0
    if seconds <= 0 or seconds != seconds:  # NaN is not a timeout either
        raise ModelConfigError(f"{where} {value!r} is not a positive number of seconds; e.g. 60")
    if seconds > MAX_SECONDS:  # a wait longer than the platform's (inf, 1e308) overflows
        raise ModelConfigError(
            f"{where} {value!r} is more than the longest wait this platform allows "
            f"({MAX_SECONDS:.0f} s); e.g. 60"
        )
    return seconds


def _not_positive(value: object) -> bool:
    return isinstance(value, bool) or not isinstance(value, int) or value <= 0


def _path(value: str | os.PathLike[str] | None) -> Path | None:
    """An absolute path, or None for an unset or empty value."""
    if value is None or str(value) == "":
        return None
    return Path(value).expanduser().absolute()


# -- a new task's inputs ---------------------------------------------------------------
def check_workdir(path: str | os.PathLike[str]) -> Path:
    """Return the resolved workdir, or raise `WorkdirError` if it cannot be used.

    Raises:
        WorkdirError: the path is missing, not a directory, or not readable.
    """
    raw = os.fspath(path)
    p = Path(raw).expanduser()
    if not p.exists():
        raise WorkdirError(f"workdir {raw!r} does not exist: pass an existing directory")
    if not p.is_dir():
        raise WorkdirError(f"workdir {raw!r} is not a directory: pass a directory")
    try:
        with os.scandir(p):
            pass
    except OSError as exc:
        raise WorkdirError(
            f"workdir {raw!r} is not readable ({exc.strerror or exc}): fix its permissions"
        ) from None
    return p.resolve()


def check_new_task(
    objective: str,
    task_id: str | None,
    start_phase: str | None,
    phases: list[str],
    workdir: str | os.PathLike[str] | None,
) -> tuple[str, str]:
    """Validate a new task's inputs, writing nothing: `(task_id, workdir)`.

    Raises:
        OrchestratorUserError: an empty or too long objective, an invalid task id, or a
            missing workdir.
        WorkflowError: `start_phase` is not one of `phases`.
    """
    check_objective(objective)
    if start_phase is not None and start_phase not in phases:
        raise WorkflowError(
            f"unknown phase {start_phase!r}; the workflow's phases are {', '.join(phases)}"
        )
    task_id = check_task_id(task_id) if task_id else new_task_id(objective)
    return task_id, str(check_workdir(workdir or "."))
