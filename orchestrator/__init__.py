"""tether's orchestrator: a LangGraph graph that runs a lead agent and subagents in phases.

Public API (`__all__`, pinned by `tests/test_public_api.py`)::

    from orchestrator import Orchestrator
    result = Orchestrator(workdir=".").run("Survey this repository")
    print(result.status, result.plan, result.findings)

Everything is imported lazily on first attribute access, so `import orchestrator` (and
the CLI's start-up) does not pull in LangGraph or LangChain.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from orchestrator.agents.gauge import TokenGauge
    from orchestrator.agents.memory_middleware import TetherMemoryMiddleware
    from orchestrator.agents.offload import OffloadLargeToolResults
    from orchestrator.api import Orchestrator
    from orchestrator.config.workflow import AgentSpec, Workflow, load_workflow
    from orchestrator.errors import (
        ApprovalError,
        CheckpointError,
        Interrupted,
        ModelCallError,
        ModelConfigError,
        OrchestratorError,
        OrchestratorRuntimeError,
        OrchestratorUserError,
        RecoveryError,
        SkillError,
        TemplateError,
        ToolConfigError,
        UnknownTaskError,
        WorkdirError,
        WorkflowError,
    )
    from orchestrator.graph.build import build_graph
    from orchestrator.result import RunResult
    from orchestrator.state import OrchestratorState
    from orchestrator.tools.call_keys import ToolCallKey, tool_call_key
    from orchestrator.types import PendingApproval, PhasePlan, SubmitFindings, Subtask

_EXPORTS = {
    "AgentSpec": "orchestrator.config.workflow",
    "ApprovalError": "orchestrator.errors",
    "CheckpointError": "orchestrator.errors",
    "Interrupted": "orchestrator.errors",
    "ModelCallError": "orchestrator.errors",
    "ModelConfigError": "orchestrator.errors",
    "OffloadLargeToolResults": "orchestrator.agents.offload",
    "Orchestrator": "orchestrator.api",
    "OrchestratorError": "orchestrator.errors",
    "OrchestratorRuntimeError": "orchestrator.errors",
    "OrchestratorState": "orchestrator.state",
    "OrchestratorUserError": "orchestrator.errors",
    "PendingApproval": "orchestrator.types",
    "PhasePlan": "orchestrator.types",
    "RecoveryError": "orchestrator.errors",
    "RunResult": "orchestrator.result",
    "SkillError": "orchestrator.errors",
    "SubmitFindings": "orchestrator.types",
    "Subtask": "orchestrator.types",
    "TemplateError": "orchestrator.errors",
    "TetherMemoryMiddleware": "orchestrator.agents.memory_middleware",
    "TokenGauge": "orchestrator.agents.gauge",
    "ToolCallKey": "orchestrator.tools.call_keys",
    "ToolConfigError": "orchestrator.errors",
    "UnknownTaskError": "orchestrator.errors",
    "WorkdirError": "orchestrator.errors",
    "Workflow": "orchestrator.config.workflow",
    "WorkflowError": "orchestrator.errors",
    "build_graph": "orchestrator.graph.build",
    "load_workflow": "orchestrator.config.workflow",
    "tool_call_key": "orchestrator.tools.call_keys",
}

__all__ = [
    "AgentSpec",
    "ApprovalError",
    "CheckpointError",
    "Interrupted",
    "ModelCallError",
    "ModelConfigError",
    "OffloadLargeToolResults",
    "Orchestrator",
    "OrchestratorError",
    "OrchestratorRuntimeError",
    "OrchestratorState",
    "OrchestratorUserError",
    "PendingApproval",
    "PhasePlan",
    "RecoveryError",
    "RunResult",
    "SkillError",
    "SubmitFindings",
    "Subtask",
    "TemplateError",
    "TetherMemoryMiddleware",
    "TokenGauge",
    "ToolCallKey",
    "ToolConfigError",
    "UnknownTaskError",
    "WorkdirError",
    "Workflow",
    "WorkflowError",
    "build_graph",
    "load_workflow",
    "tool_call_key",
]


def __getattr__(name: str) -> object:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'orchestrator' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
