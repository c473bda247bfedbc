"""The workflow: phases, agents, thresholds and model of a run, from an optional YAML file.

```yaml
name: survey
phases: [exploration, planning, implementation, review]
agents:
  researcher:
    description: Reads the code in its scope and reports what it found.  # the lead picks by it
    prompt: You are a careful code reader.  # or prompt_file: prompts/researcher.md
    tools: [list_files, read_file, grep_files, recall_memory, count_widgets, mcp:tickets]
    model: anthropic:claude-sonnet-4-5   # optional, per agent
    max_steps: 8
    nudges: 1                            # replies without a tool call nudged, not forced
    max_tokens: 40000                    # optional cap: at it, the agent submits what it has
    interrupt_on: [write_file]           # or {write_file: {allowed_decisions: [approve, reject]}}
  coder:
    description: Edits and tests code in its own sandbox.
    remote:                              # a graph served by LangGraph Server
      url: http://10.0.0.5:2024          # or a list: subtasks spread over the servers
      graph: coder                       # the assistant / graph id on that server
      headers: {x-api-key: ${CODER_KEY}} # optional; ${VAR} expanded at connect time only
python_tools: ["mypkg.tools:count_widgets"]   # LangChain tools or typed functions, by import path
mcp_servers:                                  # langchain-mcp-adapters' connection shape
  tickets: {command: python, args: [tickets_server.py]}   # transport stdio is added
approve_plan: false         # true: each phase's plan waits for `orchestrator approve`
run_all_phases: false       # true: every phase runs even when the lead says it is done
thresholds:
  token_threshold: 150000   # default: the external-memory skill's triggers
  warning_ratio: 0.8
  max_parallel: 4
  max_subtasks: 4           # per wave
  max_waves: 50             # waves per phase while the lead asks for more (continue_phase)
  subagent_max_tokens: 60000  # optional; each subagent's cap unless its max_tokens says
  tool_result_tokens: 8000  # default: 10% of the model's window; larger results go to memory
model: openai:gpt-4o-mini   # optional; --model and $TETHER_MODEL win
model_timeout: 60           # optional; seconds per model request (default 120)
tool_timeout: 120           # optional; seconds a tool call may take before it answers an error
memory_dir: .temp/memory    # optional; relative to the workflow file
secret_files: ["*.secret"]  # optional; kept from agents besides the credentials defaults
```

Everything is optional. Where a run's options come from (defaults, the external-memory
skill, this file, the environment, flags and arguments) is decided in one place,
`orchestrator.config.settings`; `own_thresholds` tells it which thresholds the file itself set.
Parsing is strict: unknown keys, malformed YAML, empty or duplicate phases, ill-typed agents,
`prompt` beside `prompt_file`, a `prompt_file` outside the workflow file's folder and
non-positive thresholds are a `WorkflowError` with one line naming the file. Tool names are
checked against the tools a run has (tether's, the Python tools, the MCP servers' tools) by
`orchestrator.tools.toolbox` before anything is written.

Invariant: a `Workflow` that exists is valid (pydantic, `extra="forbid"`), and every phase
name is usable in a file name.
"""

from __future__ import annotations

import os
import re
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

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

from orchestrator.artifacts.names import read_text
from orchestrator.config._http import header_message, header_problem, host_port
from orchestrator.config.defaults import (
    DEFAULT_NUDGES,
    DEFAULT_PHASES,
    SUBAGENT_MAX_TOKENS,
    TOKEN_THRESHOLD,
    WARNING_RATIO,
)
from orchestrator.config.secret_files import check_pattern
from orchestrator.config.skills import external_memory_triggers, yaml_problem
from orchestrator.errors import WorkflowError

if TYPE_CHECKING:
    from orchestrator.types import JsonObject

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
#: tether's own tool names: the workdir tools, the opt-in write tools, then the memory
#: tools. A test checks this against the tools a run actually builds, so it cannot drift.
KNOWN_TOOLS = (
    "list_files",
    "read_file",
    "grep_files",
    "write_file",
    "edit_file",
    "recall_memory",
    "memory_read",
    "memory_write",
    "memory_patch",
    "memory_append",
    "memory_list",
    "memory_log",
    "memory_fetch",
)
#: Tools that change the workdir: an agent gets them only when it lists them.
WRITE_TOOLS = ("write_file", "edit_file")
DECISIONS = ("approve", "edit", "reject", "respond")
#: The graph id of tether's own subagent graph on LangGraph Server (`orchestrator.server`).
TETHER_SUBAGENT_GRAPH = "tether_subagent"
#: `AgentSpec` fields that configure a tether subagent's own loop: a remote agent running
#: any other graph has its own (`remote.graph` with `tether_subagent` runs tether's loop).
LOCAL_ONLY = (
    "tools",
    "model",
    "max_steps",
    "max_tokens",
    "nudges",
    "interrupt_on",
    "skills",
)
_VAR_RE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_URL_RE = re.compile(r"^https?://[^\s/]+(/\S*)?$")


class RemoteSpec(BaseModel):
    """Where a remote agent runs: a graph served by LangGraph Server (one or more servers).

    The header values are kept as written (`${VAR}` unexpanded): `connect_headers` expands
    them when a client connects, so the recorded workflow, the memory, logs and errors
    never hold what the variables hold.
    """

    model_config = ConfigDict(extra="forbid")

    url: StrictStr | list[StrictStr]
    """The server's URL, or several: one agent's subtasks spread over them."""
    graph: StrictStr = Field(min_length=1)
    """The assistant or graph id on the server (`tether_subagent`: tether's own subagent)."""
    headers: dict[StrictStr, StrictStr] = Field(default_factory=dict)
    """HTTP headers of every request (`${VAR}` expanded from the environment at connect
    time, e.g. `{x-api-key: ${CODER_KEY}}`)."""

    @field_validator("url")
    @classmethod
    def _urls(cls, value: str | list[str]) -> str | list[str]:
        urls = [value] if isinstance(value, str) else value
        if not urls:
            raise ValueError("must name at least one server URL")
        for url in urls:
            if not _URL_RE.match(url):
                raise ValueError(f"{url!r} is not an http(s):// URL of a LangGraph Server")
        if len(set(urls)) != len(urls):
            raise ValueError("lists a server URL more than once")
        return value

    @property
    def urls(self) -> list[str]:
        """The servers, without a trailing slash, in the order given."""
        urls = [self.url] if isinstance(self.url, str) else self.url
        return [u.rstrip("/") for u in urls]

    @property
    def runs_tether(self) -> bool:
        """Whether the remote graph is tether's own subagent graph."""
        return self.graph == TETHER_SUBAGENT_GRAPH

    def missing_variables(self) -> list[tuple[str, str]]:
        """`(header, VAR)` for each `${VAR}` of the headers that the environment lacks."""
        return [
            (name, var)
            for name, value in sorted(self.headers.items())
            for var in _VAR_RE.findall(value)
            if var not in os.environ
        ]

    def connect_headers(self, agent: str) -> dict[str, str]:
        """The headers with `${VAR}` expanded from the environment (now, not before).

        Raises:
            WorkflowError: a variable is not set, or what it holds makes a header no
                request can send (the message names the variable, never a value).
        """
        missing = self.missing_variables()
        if missing:
            raise WorkflowError(unset_message(agent, *missing[0]))
        out = {}
        for name, value in self.headers.items():
            out[name] = _VAR_RE.sub(lambda m: os.environ[m.group(1)], value)
            problem = header_problem(name, out[name])
            if problem is not None:
                used = ", ".join(f"${{{v}}}" for v in _VAR_RE.findall(value))
                raise WorkflowError(header_message(agent, name, problem, used))
        return out

    def problems(self) -> list[str]:
        """What no request can send, as written (before `${VAR}` expansion): a header name
        that is no HTTP token, a header value with a line break, a control character or
        a character beyond ASCII, a URL's port outside 1-65535. Never names a value."""
        out = [
            f"remote header {name!r}: {problem}"
            for name, value in self.headers.items()
            if (problem := header_problem(name, _VAR_RE.sub("", value))) is not None
        ]
        for url in self.urls:
            host, port = host_port(url)
            if port is not None and not (port.isdigit() and 0 < int(port) < 65536):
                out.append(f"remote url of host {host!r} has port {port!r}; a port is 1 to 65535")
        return out


def unset_message(agent: str, header: str, var: str) -> str:
    """The one line saying a remote agent's header needs an unset variable."""
    return (
        f"agent {agent!r}: remote header {header!r} needs ${{{var}}}, which is not set; "
        f"export {var} before running the task"
    )


class AgentSpec(BaseModel):
    """A kind of subagent the lead can assign subtasks to (deepagents' `SubAgent` shape)."""

    model_config = ConfigDict(extra="forbid")

    role: StrictStr = DEFAULT_AGENT
    description: StrictStr = (
        "Investigates one subtask with the tools it is given and reports findings."
    )
    """What the agent is for; the lead assigns subtasks by it."""
    prompt: StrictStr | None = None
    """The agent's own instructions, added to tether's protocol text in its system prompt."""
    prompt_file: StrictStr | None = None
    """A file holding `prompt`, relative to the workflow file's folder (and inside it)."""
    tools: list[StrictStr] = Field(default_factory=lambda: list(DEFAULT_TOOLS))
    """Tool names: tether's (`KNOWN_TOOLS`), the run's Python tools, MCP tools by name, or
    `mcp:SERVER` for all of one server's tools."""
    model: StrictStr | None = None
    """`provider:model` for this agent; None means the run's model."""
    max_steps: StrictInt = Field(default=8, gt=0)
    """Model calls the subagent may make before it must submit its findings."""
    nudges: StrictInt = Field(default=DEFAULT_NUDGES, ge=0)
    """Replies without a tool call (while steps remain) answered by a nudge to use a tool or
    finish; the next one gets the final tool forced (0: forced at the first)."""
    max_tokens: StrictInt | None = Field(default=None, gt=0)
    """Tokens (prompt plus completion, all its calls) at which the subagent stops: its next
    call must submit its findings, which are marked partial (None: the workflow's
    `thresholds.subagent_max_tokens`, else no cap)."""
    interrupt_on: dict[StrictStr, bool | dict[str, Any]] = Field(default_factory=dict)
    """Tools whose calls wait for a person's decision (`HumanInTheLoopMiddleware`'s
    `interrupt_on`; a plain list of tool names is shorthand for `{name: true}`)."""
    skills: list[StrictStr] = Field(default_factory=list)
    """Skills (by name) this agent may use: their names and descriptions go into its system
    prompt and it gets `read_skill` to read one's body. None by default for subagents (the
    lead sees every skill)."""
    remote: RemoteSpec | None = None
    """Run this agent's subtasks as runs of a graph on LangGraph Server instead of in this
    process (`orchestrator.graph.remote`); the fields of `LOCAL_ONLY` then apply only to
    `tether_subagent`, tether's own subagent graph."""

    @field_validator("interrupt_on", mode="before")
    @classmethod
    def _interrupt_list(cls, value: object) -> Any:
        if isinstance(value, list):
            if not all(isinstance(v, str) for v in value):
                raise ValueError("must be a list of tool names or a mapping of them")
            return dict.fromkeys(value, True)
        return value if value is not None else {}

    @field_validator("interrupt_on")
    @classmethod
    def _interrupt_configs(cls, value: JsonObject) -> JsonObject:
        for name, config in value.items():
            if isinstance(config, bool):
                continue
            unknown = sorted(set(config) - {"allowed_decisions", "description"})
            if unknown:
                raise ValueError(
                    f"tool {name!r}: unknown key {unknown[0]!r}; "
                    "allowed: allowed_decisions, description"
                )
            allowed = config.get("allowed_decisions", list(DECISIONS))
            if not isinstance(allowed, list) or not allowed:
                raise ValueError(f"tool {name!r}: allowed_decisions must be a non-empty list")
            bad = [d for d in allowed if d not in DECISIONS]
            if bad:
                raise ValueError(
                    f"tool {name!r}: unknown decision {bad[0]!r}; use {', '.join(DECISIONS)}"
                )
        return value

    @model_validator(mode="after")
    def _one_prompt(self) -> AgentSpec:
        if self.prompt is not None and self.prompt_file is not None:
            raise ValueError("give 'prompt' or 'prompt_file', not both")
        if self.remote is not None and not self.remote.runs_tether:
            local = [f for f in LOCAL_ONLY if f in self.model_fields_set]
            if local:
                raise ValueError(
                    f"{local[0]!r} does not apply to a remote agent (its graph "
                    f"{self.remote.graph!r} has its own); drop it, or serve "
                    f"{TETHER_SUBAGENT_GRAPH!r} to run tether's subagent remotely"
                )
        return self

    def served(self) -> AgentSpec:
        """This spec as a local subagent (`remote` dropped): what `tether_subagent` runs."""
        return self.model_copy(update={"remote": None})

    def instructions(self, base: Path | None = None) -> str:
        """The agent's own prompt text (`prompt`, or `prompt_file` read from `base`).

        Raises:
            WorkflowError: the prompt file is outside `base`, missing or not UTF-8 text.
        """
        if self.prompt_file is None:
            return (self.prompt or "").strip()
        return read_prompt_file(self.prompt_file, base)


def read_prompt_file(name: str, base: Path | None) -> str:
    """The text of an agent's `prompt_file`, which must lie inside `base` (the workflow
    file's folder, else the current directory).

    Raises:
        WorkflowError: outside `base`, missing, a folder, or not UTF-8 text.
    """
    base = (base or Path.cwd()).resolve()
    path = (base / Path(name).expanduser()).resolve()
    if not path.is_relative_to(base):
        raise WorkflowError(
            f"prompt_file {name!r} is outside the workflow file's folder {str(base)!r}; "
            "keep agent prompts beside the workflow"
        )
    return read_text(path, "prompt file", WorkflowError).strip()


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
    """Most subtasks the lead may plan per wave of a phase."""
    max_waves: StrictInt = Field(default=50, gt=0)
    """Most waves of one phase: the lead plans another wave while its plan says
    `continue_phase` (see `orchestrator.graph.nodes.advance`)."""
    subagent_context_tokens: StrictInt = Field(default=32_000, gt=0)
    subagent_max_tokens: StrictInt | None = Field(default=SUBAGENT_MAX_TOKENS, gt=0)
    """Each subagent's token cap when its spec sets no `max_tokens` (None: no cap)."""
    """Budget of each subagent's own context."""
    tool_result_tokens: StrictInt | None = Field(default=None, gt=0)
    """A tool result larger than this goes to a memory entry and the agent gets its head
    and the entry id (default: 10% of the model's context window, else 8,000)."""

    @field_validator("warning_ratio", mode="before")
    @classmethod
    def _number(cls, value: object) -> Any:
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
    model_timeout: float | None = Field(default=None, gt=0, le=threading.TIMEOUT_MAX)
    """Seconds one model request may take (default 120; `--model-timeout` wins)."""
    tool_timeout: float | None = Field(default=None, gt=0, le=threading.TIMEOUT_MAX)
    """Seconds one tool call may take before the agent gets an error answer (default 120)."""
    python_tools: list[StrictStr] = Field(default_factory=list)
    """Tools by import path, `module:attribute` (a LangChain tool or a typed function with a
    docstring), so any process (`resume`, `approve`, a server) can rebuild them."""
    mcp_servers: dict[StrictStr, dict[str, Any]] = Field(default_factory=dict)
    """MCP servers in `langchain-mcp-adapters`' connection shape (`transport: stdio` is
    added when only `command` is given)."""
    approve_plan: bool = False
    """Each phase's plan waits for `orchestrator approve` before its subagents run."""
    run_all_phases: bool = False
    """Run every phase even when the lead declares the objective answered."""
    memory_dir: StrictStr | None = None
    status_file: bool = False
    """Refresh tether's block in the workdir's `STATUS.md` after each phase and at the
    task's end (`--status-file` asks for it too); off by default, so a run leaves the
    workdir as it found it."""
    secret_files: list[StrictStr] = Field(default_factory=list)
    """Files kept from every agent besides `DEFAULT_SECRET_FILES` (credentials): a file
    name glob (`*.secret`), a path glob (`config/prod/*.yaml`) or a folder (`vault/`)."""
    budget_tokens: int | None = Field(default=None, gt=0, strict=True)
    """The task's token budget: prompt plus completion tokens of all its agents; once it
    is spent no model call starts and the task stops (`--budget-tokens` wins)."""
    _source: Path | None = PrivateAttr(default=None)
    _own_thresholds: frozenset[str] | None = PrivateAttr(default=None)

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

    @field_validator("python_tools")
    @classmethod
    def _import_paths(cls, paths: list[str]) -> list[str]:
        for path in paths:
            module, sep, attr = path.partition(":")
            if not (sep and module.strip() and attr.strip()):
                raise ValueError(f"{path!r} must be 'module:attribute', e.g. 'mypkg.tools:search'")
        return paths

    @field_validator("secret_files")
    @classmethod
    def _secret_files(cls, patterns: list[str]) -> list[str]:
        return [check_pattern(p) for p in patterns]

    @field_validator("mcp_servers")
    @classmethod
    def _connections(cls, servers: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        out = {}
        for name, conn in servers.items():
            if not isinstance(conn, dict):
                raise ValueError(f"server {name!r} must be a mapping such as {{command: ...}}")
            conn = dict(conn)
            if "transport" not in conn and "command" in conn:
                conn["transport"] = "stdio"
            transport = conn.get("transport")
            if transport is None:
                raise ValueError(
                    f"server {name!r} needs 'command' (stdio) or 'transport' and 'url'"
                )
            if transport == "stdio" and not isinstance(conn.get("command"), str):
                raise ValueError(f"server {name!r}: stdio needs 'command' (a program name)")
            if transport != "stdio" and not isinstance(conn.get("url"), str):
                raise ValueError(f"server {name!r}: transport {transport!r} needs 'url'")
            out[name] = conn
        return out

    @model_validator(mode="after")
    def _agents(self) -> Workflow:
        if not self.agents:
            raise ValueError("agents: must define at least one agent (or leave 'agents' out)")
        for name, spec in sorted(self.agents.items()):
            problems = spec.remote.problems() if spec.remote is not None else []
            if problems:  # a request that cannot be sent: no retry or resume fixes it
                tail = "; a header value is one line of text" if "line break" in problems[0] else ""
                raise ValueError(f"agent {name!r}: {problems[0]}{tail}")
        lead = self.agents.get("lead")  # the spec of the lead itself (`graph.lead.LEAD`)
        if lead is not None and lead.max_tokens is not None:
            raise ValueError(
                "agent 'lead': max_tokens caps a subagent, not the lead (whose calls the "
                "task's --budget-tokens bounds); drop it"
            )
        return self

    def prompts(self) -> dict[str, str]:
        """Each agent's own prompt text (`prompt` or `prompt_file`), by agent name.

        Raises:
            WorkflowError: a `prompt_file` outside the workflow file's folder, missing, or
                not UTF-8 text (one line naming the file and the agent).
        """
        base = self._source.parent if self._source else None
        out = {}
        for name, spec in self.agents.items():
            try:
                out[name] = spec.instructions(base)
            except WorkflowError as exc:
                where = f"workflow file {str(self._source)!r}: " if self._source else ""
                raise WorkflowError(f"{where}agent {name!r}: {exc}") from None
        return out

    # -- queries -----------------------------------------------------------------------
    @property
    def source(self) -> Path | None:
        """The YAML file this workflow came from, if any."""
        return self._source

    @property
    def own_thresholds(self) -> frozenset[str]:
        """The `thresholds` keys this workflow sets itself (a file: the keys it names; a
        workflow built in Python: the fields it was given), not filled in from the skill."""
        if self._own_thresholds is not None:
            return self._own_thresholds
        return frozenset(self.thresholds.model_fields_set)

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

    def check_remote(self, shared: bool) -> None:
        """Check the remote agents before a task starts or continues: every `${VAR}` of
        their headers is set (and makes a header a request can send), and `tether_subagent`
        runs only beside a memory `shared` between machines (the servers write the findings
        into it).

        Raises:
            WorkflowError: one line naming the agent (never a header's value).
        """
        where = f"workflow file {str(self._source)!r}: " if self._source else ""
        for name, spec in sorted(self.agents.items()):
            if spec.remote is None:
                continue
            missing = spec.remote.missing_variables()
            if missing:
                raise WorkflowError(where + unset_message(name, *missing[0]))
            try:  # what the variables hold makes a header no request can send
                spec.remote.connect_headers(name)
            except WorkflowError as exc:
                raise WorkflowError(f"{where}{exc}") from None
            if spec.remote.runs_tether and not shared:
                raise WorkflowError(
                    f"{where}agent {name!r} runs {TETHER_SUBAGENT_GRAPH!r} on LangGraph "
                    "Server, which writes its findings into the task's memory: run the task "
                    "on the servers' PostgreSQL memory (--memory-url, the servers' "
                    "TETHER_MEMORY_URL)"
                )

    def served(self) -> Workflow:
        """A copy whose agents all run locally (`AgentSpec.served`): the workflow a server
        running `tether_subagent` uses for the task's subagents."""
        copy = self.model_copy(update={"agents": {k: v.served() for k, v in self.agents.items()}})
        copy._source, copy._own_thresholds = self._source, self._own_thresholds
        return copy

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
        """A copy with these values in place (None leaves a value alone).

        A run does not use it: flags and API arguments go through
        `orchestrator.config.settings.Overrides`.

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
        updated._own_thresholds = self.own_thresholds | set(thresholds.model_fields_set)
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
    if "input" not in err or not where:
        return prefix + msg
    if "headers" in where or isinstance(err["input"], dict):  # a mapping may hold headers
        return prefix + msg
    return f"{prefix}{msg} (got {err['input']!r})"


def _allowed_keys(parent: tuple[Any, ...]) -> list[str]:
    if not parent:
        return list(Workflow.model_fields)
    if parent == ("thresholds",):
        return list(Thresholds.model_fields)
    if len(parent) == 2 and parent[0] == "agents":
        return list(AgentSpec.model_fields)
    if len(parent) == 3 and parent[0] == "agents" and parent[2] == "remote":
        return list(RemoteSpec.model_fields)
    return []


def default_workflow(project_dir: str | os.PathLike[str] | None = None) -> Workflow:
    """The built-in workflow with thresholds from the external-memory skill."""
    workflow = Workflow(thresholds=_skill_thresholds(project_dir))
    workflow._own_thresholds = frozenset()
    return workflow


def _skill_thresholds(project_dir: str | os.PathLike[str] | None) -> Thresholds:
    triggers = external_memory_triggers(project_dir)
    return Thresholds(
        token_threshold=triggers.token_threshold, warning_ratio=triggers.warning_ratio
    )


def _read_yaml(path: Path) -> Any:
    # here, not at the top: this function is the module's one use of it
    from orchestrator.config import _yaml

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
    own = frozenset(thresholds) if isinstance(thresholds, dict) else frozenset()
    if thresholds is None or isinstance(thresholds, dict):
        base = _skill_thresholds(project_dir).model_dump()
        data = {**data, "thresholds": {**base, **(thresholds or {})}}
    try:
        workflow = Workflow.model_validate(data)
    except ValidationError as exc:
        raise WorkflowError(f"workflow file {str(path)!r}: {_validation_problem(exc)}") from None
    workflow._source = path.absolute()
    workflow._own_thresholds = own
    workflow.prompts()  # a bad prompt_file is reported now, before anything is written
    return workflow
