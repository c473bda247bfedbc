"""What a run is assembled from besides the model: its workflow and its tools.

* `run_workflow`: the workflow file (or the defaults) with the agents given from Python
  (`Orchestrator(agents=...)`) in place of the file's, prompts read and checked;
* `task_workflow`: the workflow an existing task continues with: its file and the agents
  recorded with it;
* `open_toolbox`: the user's tools of a run (Python tools and the MCP servers' tools, the
  servers running for the block), every agent's tool names checked, before anything is
  written.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from orchestrator.config.workflow import AgentSpec, Workflow, _validation_problem, load_workflow
from orchestrator.errors import ToolConfigError, WorkflowError
from orchestrator.tools.mcp_client import McpServers
from orchestrator.tools.toolbox import DEFAULT_TOOL_TIMEOUT, Toolbox


def agent_specs(agents: Mapping[str, Any]) -> dict[str, AgentSpec]:
    """`AgentSpec`s from specs or dicts of their fields.

    Raises:
        WorkflowError: a spec that does not validate (one line naming the agent).
    """
    out = {}
    for name, spec in agents.items():
        try:
            out[str(name)] = spec if isinstance(spec, AgentSpec) else AgentSpec.model_validate(spec)
        except ValidationError as exc:
            raise WorkflowError(f"agents[{name!r}]: {_validation_problem(exc)}") from None
    if not out:
        raise WorkflowError("agents: give at least one agent (or leave agents out)")
    return out


def run_workflow(
    path: str | None, project_dir: str, agents: Mapping[str, AgentSpec] | None = None
) -> Workflow:
    """The workflow at `path` (None: the defaults), with `agents` in place of its own.

    Raises:
        WorkflowError: a missing or invalid file, or a bad `prompt_file`.
    """
    if path is not None and not Path(path).is_file():
        raise WorkflowError(f"workflow file {path!r} not found; pass an existing YAML file")
    workflow = load_workflow(path, project_dir)
    if agents is not None:
        source, own = workflow.source, workflow.own_thresholds
        workflow = workflow.model_copy(update={"agents": dict(agents)})
        workflow._source, workflow._own_thresholds = source, own
        workflow.prompts()  # a bad prompt_file fails now
    return workflow


def task_workflow(
    record: Mapping[str, object], project_dir: str, agents: Mapping[str, AgentSpec] | None
) -> Workflow | None:
    """The workflow a recorded task continues with: its file, with `agents` (else the
    agents recorded with the task); None when the task was started with the defaults."""
    recorded = record.get("agents")
    if agents is None and isinstance(recorded, dict):
        agents = agent_specs(recorded)
    if record.get("workflow") or agents is not None:
        return run_workflow(record.get("workflow"), project_dir, agents)
    return None


@contextlib.contextmanager
def open_toolbox(
    workflow: Workflow,
    tools: Sequence[Any],
    project_dir: str,
    record: Mapping[str, object] | None = None,
    on_warning: Callable[[str], None] | None = None,
    stderr_log: str | os.PathLike[str] | None = None,
) -> Iterator[Toolbox]:
    """The run's user tools (Python and MCP; the servers run for the block) after checking
    every agent's tool names, before anything is written (`on_warning`: what the MCP
    servers do wrong without failing, one line each; `stderr_log`: the file their stderr
    goes to, `orchestrator.tools.mcp_client`).

    Raises:
        ToolConfigError: an unknown or doubly provided tool, a Python tool that cannot be
            imported, an MCP server that cannot start, or (continuing `record`'s task)
            in-process tools this process was not given.
    """
    timeout = workflow.tool_timeout or DEFAULT_TOOL_TIMEOUT
    search = [Path(project_dir)]
    if workflow.source is not None:
        search.insert(0, workflow.source.parent)
    python = Toolbox(tools, workflow.python_tools, search=search)  # imports first
    missing = [n for n in (record or {}).get("in_process_tools") or [] if n not in python.tools]
    if missing:
        raise ToolConfigError(
            f"task {(record or {}).get('task_id')!r} uses tools given in-process "
            f"({', '.join(missing)}), which this process cannot rebuild; continue it from "
            "Python with Orchestrator(tools=[...]), or name them in the workflow's "
            "python_tools"
        )
    with McpServers(
        workflow.mcp_servers, timeout=timeout, on_warning=on_warning, stderr_log=stderr_log
    ) as servers:
        box = Toolbox(tools, workflow.python_tools, servers.tools, search=search)
        box.check(workflow)
        yield box


def run_files(workflow: Workflow, project_dir: str) -> list[tuple[Path, str]]:
    """`(path, what it is)` of what a run of `workflow` reads and executes, which the write
    tools refuse to change: the workflow file, its prompt files, the `python_tools`
    modules (and the `__init__.py` of their packages), the project's `skills/` and
    `templates/`."""
    out: list[tuple[Path, str]] = []
    base = workflow.source.parent if workflow.source is not None else Path.cwd()
    if workflow.source is not None:
        out.append((workflow.source, "the run's workflow file"))
    for name, spec in workflow.agents.items():
        if spec.prompt_file:
            path = (base / Path(spec.prompt_file).expanduser()).resolve()
            out.append((path, f"the prompt file of agent {name!r}"))
    for tool in workflow.python_tools:
        module = tool.partition(":")[0].strip()
        for path in _module_files(module):
            out.append((path, f"a module of python_tools {tool!r}"))
    out.append((Path(project_dir) / "skills", "the project's skills folder"))
    out.append((Path(project_dir) / "templates", "the project's templates folder"))
    return out


def _module_files(module: str) -> list[Path]:
    """The file of an imported (or importable) module and its packages' `__init__.py`."""
    import importlib.util
    import sys

    out = []
    parts = module.split(".")
    for i in range(1, len(parts) + 1):
        name = ".".join(parts[:i])
        loaded = sys.modules.get(name)
        origin = getattr(loaded, "__file__", None)
        if origin is None:
            try:
                spec = importlib.util.find_spec(name)
            except (ImportError, ValueError):
                spec = None
            origin = spec.origin if spec is not None else None
        if origin and origin not in ("built-in", "frozen"):
            out.append(Path(origin))
    return out


def workflow_digests(workflow: Workflow) -> dict[str, str]:
    """SHA-256 of the workflow file and its agents' prompt files, by path (recorded when a
    task starts: a continued task refuses a workflow changed since, `check_unchanged`)."""
    files = [
        p
        for p, what in run_files(workflow, ".")
        if what == "the run's workflow file" or what.startswith("the prompt file")
    ]
    return {str(p): _digest_of(p) for p in files}


def check_unchanged(recorded: Mapping[str, str] | None, workflow: Workflow) -> None:
    """A continued task runs the workflow file (and prompt files) it started with.

    Raises:
        WorkflowError: a file recorded when the task started changed since (an agent with
            write tools could have put a command there), one line naming it.
    """
    for path, digest in workflow_digests(workflow).items():
        if recorded and path in recorded and recorded[path] != digest:
            raise WorkflowError(
                f"{path!r} changed since the task started (a workflow's MCP commands, "
                "tools and prompts run as the task's own); restore it, or start a new task "
                "with `orchestrator run`"
            )


def _digest_of(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return "missing"
