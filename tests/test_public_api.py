"""The public API of both packages is pinned: a change here is a deliberate API change."""

from __future__ import annotations

import os
import subprocess
import sys

import memory
import orchestrator

MEMORY_API = [
    "Archive",
    "BuiltContext",
    "ChunkOutOfRangeError",
    "ContextBudgets",
    "ContextBuilder",
    "CorruptDataError",
    "Entry",
    "InvalidInputError",
    "InvalidQueryError",
    "Layout",
    "MemoryDirError",
    "MemoryRuntimeError",
    "MemoryStore",
    "MemoryStoreError",
    "MemoryUserError",
    "PathEscapeError",
    "SearchResult",
    "UnknownEntryError",
    "WorkingMemory",
    "build_context",
    "memory_tools",
    "resolve_root",
]


ORCHESTRATOR_API = [
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


def test_memory_all_is_sorted_pinned_and_importable():
    assert memory.__all__ == sorted(memory.__all__) == MEMORY_API
    for name in memory.__all__:
        assert getattr(memory, name) is not None


def test_orchestrator_all_is_sorted_pinned_and_importable():
    assert orchestrator.__all__ == sorted(orchestrator.__all__) == ORCHESTRATOR_API
    for name in orchestrator.__all__:
        assert getattr(orchestrator, name) is not None


def test_importing_memory_does_not_import_langchain_or_langgraph():
    code = (
        "import sys, memory, memory.cli.app; "
        "bad = [m for m in sys.modules if m.startswith(('langchain', 'langgraph'))]; "
        "print(bad)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_memory_log_and_search_import_no_langchain_langgraph_or_psycopg(tmp_path):
    code = (
        "import sys\n"
        "from memory.cli.app import cli\n"
        "for args in (['log', 'the flaky test timed out'], ['search', 'flaky timeout']):\n"
        "    cli(args, standalone_mode=False)\n"
        "heavy = ('langchain', 'langgraph', 'psycopg', 'mcp', 'jinja2')\n"
        "print(sorted({m.split('.')[0] for m in sys.modules if m.startswith(heavy)}))\n"
    )
    env = {**os.environ, "TETHER_MEMORY_DIR": str(tmp_path / "memory")}
    env.pop("TETHER_MEMORY_URL", None)
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    assert "Citation: mem-" in out.stdout
    assert out.stdout.strip().splitlines()[-1] == "[]"
