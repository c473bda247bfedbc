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
from collections.abc import Iterator, Mapping, Sequence
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
    record: Mapping[str, Any], project_dir: str, agents: Mapping[str, AgentSpec] | None
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
    record: Mapping[str, Any] | None = None,
) -> Iterator[Toolbox]:
    """The run's user tools (Python and MCP; the servers run for the block) after checking
    every agent's tool names, before anything is written.

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
    with McpServers(workflow.mcp_servers, timeout=timeout) as servers:
        box = Toolbox(tools, workflow.python_tools, servers.tools, search=search)
        box.check(workflow)
        yield box
