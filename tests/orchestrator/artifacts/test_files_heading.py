"""Findings name the files an agent examined apart from the files it wrote.

Every workdir tool is read-only, so a survey's findings say "## Files Examined"; only an
agent whose memory tools did write a file gets "## Files Modified/Created" for it. Files
written before the split (every file under "Files Modified/Created") still read back.
"""

from __future__ import annotations

import re

from langchain_core.messages import AIMessage, ToolMessage

from memory.paths import Layout
from orchestrator import artifacts
from orchestrator.api import Orchestrator
from orchestrator.offline import OfflineChatModel, ResearchPolicy, tool_names


def _headings(path) -> list[str]:
    return re.findall(r"^## .*$", path.read_text(encoding="utf-8"), re.M)


def test_a_survey_lists_files_examined_and_none_modified(fixture_repo, tiny_workflow, memory_dir):
    result = Orchestrator(workdir=fixture_repo, workflow=tiny_workflow).run("Survey the shop")
    for rel in [*result.findings, *result.merged.values()]:
        headings = _headings(memory_dir / rel)
        assert "## Files Examined" in headings
        assert "## Files Modified/Created" not in headings


class _WritesAFact:
    """The offline policy, except that subagents first read the package's `__init__.py`
    and save a fact with `memory_write`."""

    def __init__(self) -> None:
        self.inner = ResearchPolicy()

    def __call__(self, messages, tools) -> AIMessage:
        names = tool_names(tools)
        if "SubmitFindings" not in names:
            return self.inner(messages, tools)
        done = {m.name for m in messages if isinstance(m, ToolMessage)}
        if "read_file" not in done:
            args = {"path": "src/shop/__init__.py"}
            return AIMessage("", tool_calls=[{"name": "read_file", "args": args, "id": None}])
        if "memory_write" not in done:
            args = {"path": "facts/shop.md", "content": "# Shop\n\n> Summary: carts and orders\n"}
            return AIMessage("", tool_calls=[{"name": "memory_write", "args": args, "id": None}])
        files = [
            {"path": "facts/shop.md", "description": "saved what the shop does"},
            {"path": "src/shop/__init__.py", "description": "read: the package docstring"},
        ]
        args = {"summary": "The shop keeps carts and orders.", "files": files}
        return AIMessage("", tool_calls=[{"name": "SubmitFindings", "args": args, "id": None}])


def test_an_agent_that_wrote_a_file_lists_it_as_modified(fixture_repo, tmp_path, memory_dir):
    workflow = tmp_path / "writer.yaml"
    workflow.write_text(
        "phases: [exploration]\nagents:\n  researcher:\n"
        "    tools: [list_files, read_file, memory_write]\n"
    )
    orch = Orchestrator(
        workdir=fixture_repo, workflow=workflow, model=OfflineChatModel(policy=_WritesAFact())
    )
    result = orch.run("Survey the shop", task_id="w")
    path = memory_dir / result.findings[0]
    assert _headings(path)[:4] == [
        "## Summary",
        "## Key Discoveries",
        "## Files Examined",
        "## Files Modified/Created",
    ]
    back = artifacts.read_findings(path)
    assert back["files"] == [
        {"path": "src/shop/__init__.py", "description": "read: the package docstring"}
    ]
    assert back["files_written"] == [
        {"path": "facts/shop.md", "description": "saved what the shop does"}
    ]
    merged = (memory_dir / result.merged["exploration"]).read_text()
    assert "## Files Modified/Created\n- `facts/shop.md` - saved what the shop does [" in merged
    assert (memory_dir / "facts" / "shop.md").is_file()


def test_a_failed_write_is_not_listed_as_modified():
    from orchestrator.graph.written import files_written

    call = {"name": "memory_write", "args": {"path": "../x.md", "content": "x"}, "id": "c1"}
    transcript = [
        AIMessage("", tool_calls=[call]),
        ToolMessage("Error: path '../x.md' leaves the memory directory", tool_call_id="c1"),
    ]
    assert files_written(transcript) == []


def test_findings_written_with_the_old_heading_still_read_back(memory_dir):
    layout = Layout.at(memory_dir).ensure()
    old = layout.findings / "researcher_20250104T120000000000Z.md"
    old.write_text(
        "# Findings: researcher\n**Task**: t\n**Timestamp**: 2025-01-04T12:00:00.000000Z\n"
        "**Status**: completed\n\n## Summary\nS.\n\n## Key Discoveries\n_None._\n\n"
        "## Files Modified/Created\n- `a.py` - read it\n\n## Open Questions\n_None._\n\n"
        "## Recommendations\n_None._\n\n"
        '<!-- tether:findings {"agent": "researcher", "files": [{"description": "read it", '
        '"path": "a.py"}], "key_discoveries": [], "open_questions": [], "phase": null, '
        '"recommendations": [], "status": "completed", "subtask_id": null, "summary": "S.", '
        '"task": "t", "task_id": null, "timestamp": "2025-01-04T12:00:00.000000Z"} -->\n',
        encoding="utf-8",
    )
    back = artifacts.read_findings(old)
    assert back["files"] == [{"path": "a.py", "description": "read it"}]
    assert back["files_written"] == []
    assert back["sections"]["Files Modified/Created"] == "- `a.py` - read it"
