"""Read-only orchestrator tools for tether's MCP memory server (`memory mcp`).

`memory.mcp.mcp_server` loads this module by name (`TOOL_PROVIDERS`) and calls `register`;
memory never imports orchestrator, the one direction imports go between the packages (see the
`memory.mcp.mcp_server` docstring). The tools wrap the same functions as `orchestrator status`
and `orchestrator checkpoint report`, and only read: they never run, resume or checkpoint
a task.
"""

# No `from __future__ import annotations`: FastMCP evaluates the tools' annotations.

import functools
import json
from typing import Annotated, Any

from mcp.server.fastmcp.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from orchestrator.artifacts.checkpoint import latest_valid_checkpoint, report
from orchestrator.artifacts.documents import Docs
from orchestrator.artifacts.tasks import TaskList
from orchestrator.errors import OrchestratorError
from orchestrator.recovery.status import task_status as status_of

_TASK = Annotated[
    str | None,
    Field(description="Task id (see task_status); omit it for the most recent task."),
]


def _guarded(fn: Any) -> Any:
    """Orchestrator errors (unknown task, no checkpoint) become one-line MCP errors."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> str:
        try:
            return fn(*args, **kwargs)
        except (OrchestratorError, ValueError) as exc:
            raise ToolError(str(exc)) from None

    return wrapper


def register(server: Any, store: Any) -> None:
    """Add `task_status` and `checkpoint_report` over the memory directory of `store`."""
    docs = Docs.of(store)

    def task_status(task_id: _TASK = None) -> str:
        return json.dumps(status_of(docs, task_id), indent=1, default=str)

    def checkpoint_report(task_id: _TASK = None) -> str:
        task = TaskList(docs).record(task_id)["task_id"]
        cp, path, warnings = latest_valid_checkpoint(docs, task)
        head = [f"Checkpoint: {docs.rel(path)}"]
        head += [f"Warning: {w}" for w in warnings]
        return "\n".join([*head, report(cp, store)])

    read_only = ToolAnnotations(readOnlyHint=True, openWorldHint=False)
    server.add_tool(
        _guarded(task_status),
        name="task_status",
        description="Where an orchestrator task stands (JSON): objective, status, current "
        "phase, each subtask done/failed/pending, tokens used, plan and latest checkpoint "
        "and snapshot paths. Read-only. Unknown task ids are an error that lists known ids.",
        annotations=read_only,
    )
    server.add_tool(
        _guarded(checkpoint_report),
        name="checkpoint_report",
        description="The latest valid checkpoint of a task as a report: phase, completed and "
        "pending subtasks, next action, recovery instructions and [MEMORY REFERENCES] "
        "(stored outputs to memory_fetch). Read it to continue someone else's task.",
        annotations=read_only,
    )
