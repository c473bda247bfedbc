"""`memory mcp`: tether's memory over MCP (stdio), driven by the `mcp` SDK's own client.

The server is spawned the way an MCP client spawns it (`python -m memory --memory-dir DIR
mcp`, PYTHONPATH inherited). Tested through the protocol only: the tool list and
descriptions, recall with citations, log/fetch round trip, reading, writing, patching and
appending memory files, the read-only task tools on a finished orchestrator task, and
bad input (escaping paths, files that are not writable, unknown entry and task ids,
missing arguments) answered as MCP errors while the same session keeps working and the
memory on disk is unchanged.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

MEMORY_TOOLS = {
    "recall",
    "memory_log",
    "memory_fetch",
    "memory_read",
    "memory_list",
    "memory_write",
    "memory_patch",
    "memory_append",
}
TASK_TOOLS = {"task_status", "checkpoint_report"}
PROJECT_FACTS = "# Project\n\nDeploys run on Fridays.\n\n## Stack\n- Database: Postgres 16\n"


def server_params(memory_dir: Path) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "memory", "--memory-dir", str(memory_dir), "mcp"],
        env=dict(os.environ),
    )


def run_session(memory_dir: Path, script) -> object:
    """Run `await script(session)` against a freshly spawned `memory mcp`."""

    async def main():
        async with stdio_client(server_params(memory_dir)) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                return await script(session)

    return asyncio.run(main())


async def call(session: ClientSession, name: str, args: dict) -> tuple[bool, str]:
    result = await session.call_tool(name, args)
    return bool(result.isError), "\n".join(c.text for c in result.content)


@pytest.fixture
def finished_task(tmp_path) -> tuple[Path, str]:
    """A memory directory holding one finished offline task."""
    from orchestrator import Orchestrator
    from tests.orchestrator.conftest import build_repo

    repo = build_repo(tmp_path / "repo")
    workflow = tmp_path / "tiny.yaml"
    workflow.write_text("name: tiny\nphases: [exploration, review]\n")
    memory = tmp_path / "memory"
    result = Orchestrator(memory_dir=memory, workdir=repo, workflow=workflow).run(
        "Survey the shop", task_id="shop-1"
    )
    assert result.status == "done"
    return memory, result.task_id


def test_tools_are_listed_with_descriptions_for_a_model(tmp_path):
    async def script(session):
        return (await session.list_tools()).tools

    tools = {t.name: t for t in run_session(tmp_path / "memory", script)}
    assert set(tools) == MEMORY_TOOLS | TASK_TOOLS
    for tool in tools.values():
        assert len(tool.description) > 40, tool.name
    assert tools["recall"].inputSchema["required"] == ["query"]
    assert tools["memory_read"].annotations.readOnlyHint is True
    assert tools["task_status"].annotations.readOnlyHint is True
    assert tools["memory_write"].annotations.readOnlyHint is False


def test_log_fetch_write_patch_append_and_recall(tmp_path):
    memory = tmp_path / "memory"
    big = "\n".join(f"line {i}: pytest failure in test_checkout_{i}" for i in range(400))

    async def script(session):
        out = {}
        out["log"] = await call(session, "memory_log", {"content": big, "tags": ["pytest"]})
        entry_id = out["log"][1].split()[1]
        out["fetch"] = await call(session, "memory_fetch", {"entry_id": entry_id})
        out["write"] = await call(
            session,
            "memory_write",
            {"path": "facts/project.md", "content": PROJECT_FACTS},
        )
        out["patch"] = await call(
            session,
            "memory_patch",
            {
                "path": "facts/project.md",
                "patches": [
                    {"old_text": "Database: Postgres 16", "new_text": "Database: Postgres 17"}
                ],
            },
        )
        out["append"] = await call(
            session,
            "memory_append",
            {"path": "episodes/2026-11.md", "entry": "## Upgraded the database\n- Postgres 17"},
        )
        out["list"] = await call(session, "memory_list", {})
        out["recall"] = await call(session, "recall", {"query": "database Postgres", "limit": 3})
        out["read"] = await call(session, "memory_read", {"path": "facts/project.md#L1-L3"})
        return out

    out = run_session(memory, script)
    assert [k for k, (is_error, _t) in out.items() if is_error] == [], out
    assert out["fetch"][1] == big
    assert "Postgres 17" in (memory / "facts" / "project.md").read_text()
    assert "~~" in (memory / "facts" / "project.md").read_text()  # the old fact is kept
    assert "Upgraded the database" in (memory / "episodes" / "2026-11.md").read_text()
    assert "facts/project.md" in out["list"][1] and "episodes/2026-11.md" in out["list"][1]
    assert "facts/project.md#L" in out["recall"][1]
    assert out["read"][1].startswith("1: # Project")


def test_bad_input_is_an_mcp_error_and_changes_nothing(tmp_path):
    memory = tmp_path / "memory"
    (memory / "facts").mkdir(parents=True)
    (memory / "facts" / "keep.md").write_text("# Keep\n\nUntouched.\n")
    outside = tmp_path / "outside.md"
    outside.write_text("secret\n")

    async def script(session):
        bad = [
            ("memory_read", {"path": "../outside.md"}),
            ("memory_read", {"path": str(outside)}),
            ("memory_write", {"path": "../outside.md", "content": "x"}),
            ("memory_write", {"path": "findings/forged.md", "content": "x"}),
            (
                "memory_patch",
                {"path": "facts/keep.md", "patches": [{"old_text": "absent", "new_text": "y"}]},
            ),  # noqa: E501
            ("memory_fetch", {"entry_id": "mem-20260101-000000-deadbeef"}),
            ("memory_fetch", {}),
            ("recall", {"query": "  "}),
            ("task_status", {"task_id": "no-such-task"}),
            ("checkpoint_report", {}),
            ("no_such_tool", {}),
        ]
        answers = [(name, *await call(session, name, args)) for name, args in bad]
        answers.append(
            ("memory_read", *await call(session, "memory_read", {"path": "facts/keep.md"}))
        )  # noqa: E501
        return answers

    answers = run_session(memory, script)
    *errors, (_, last_error, last_text) = answers
    for name, is_error, text in errors:
        assert is_error, (name, text)
        assert text.strip() and "Traceback" not in text, (name, text)
    messages = {name: text for name, _e, text in errors}
    assert "leaves the memory directory" in answers[0][2]
    assert "not writable" in answers[3][2]
    assert "mem-20260101-000000-deadbeef" in answers[5][2]
    assert "entry_id" in answers[6][2]  # the missing argument is named
    assert "no-such-task" in messages["task_status"]
    assert "no task" in messages["checkpoint_report"]
    assert not last_error and "Untouched." in last_text  # the session still works
    assert outside.read_text() == "secret\n"
    assert (memory / "facts" / "keep.md").read_text() == "# Keep\n\nUntouched.\n"
    assert not (memory / "findings" / "forged.md").exists()


def test_task_tools_report_a_finished_task(finished_task):
    memory, task_id = finished_task

    async def script(session):
        return (
            await call(session, "task_status", {}),
            await call(session, "checkpoint_report", {"task_id": task_id}),
        )

    (status_error, status_text), (report_error, report_text) = run_session(memory, script)
    assert not status_error and not report_error
    status = json.loads(status_text)
    assert status["task_id"] == task_id and status["objective"] == "Survey the shop"
    assert status["phases"] == ["exploration", "review"]
    assert status["findings"] >= 2 and all(
        s["state"] == "done" for s in status["subtasks"].values()
    )
    assert report_text.startswith("Checkpoint: checkpoints/cp_")
    assert f"Task: {task_id}" in report_text


def test_langchain_agent_uses_the_tools_through_langchain_mcp_adapters(finished_task):
    """tether's tools load through `langchain-mcp-adapters` into a `create_agent` agent."""
    from langchain.agents import create_agent
    from langchain_core.messages import AIMessage
    from langchain_mcp_adapters.client import MultiServerMCPClient
    from langchain_mcp_adapters.tools import load_mcp_tools

    from orchestrator.offline import OfflineChatModel

    memory, task_id = finished_task
    params = server_params(memory)
    client = MultiServerMCPClient(
        {
            "tether": {
                "transport": "stdio",
                "command": params.command,
                "args": params.args,
                "env": params.env,
            }
        }
    )
    model = OfflineChatModel(
        policy=[
            AIMessage(
                content="",
                tool_calls=[{"name": "recall", "args": {"query": "shop modules"}, "id": "c1"}],
            ),
            AIMessage(
                content="",
                tool_calls=[{"name": "task_status", "args": {"task_id": task_id}, "id": "c2"}],
            ),
            AIMessage(content="The shop survey is done."),
        ]
    )

    async def main():
        async with client.session("tether") as session:  # one server process for the run
            tools = await load_mcp_tools(session)
            agent = create_agent(model, tools)
            return tools, await agent.ainvoke({"messages": [("user", "What do we know?")]})

    tools, result = asyncio.run(main())
    assert {t.name for t in tools} == MEMORY_TOOLS | TASK_TOOLS
    replies = {m.tool_call_id: m.content for m in result["messages"] if m.type == "tool"}
    recall_text = replies["c1"] if isinstance(replies["c1"], str) else replies["c1"][0]["text"]
    status_text = replies["c2"] if isinstance(replies["c2"], str) else replies["c2"][0]["text"]
    assert "findings/" in recall_text and "#L" in recall_text
    assert json.loads(status_text)["task_id"] == task_id
    assert result["messages"][-1].content == "The shop survey is done."


def test_memory_serves_alone_without_importing_orchestrator(tmp_path):
    """`memory` never imports `orchestrator`; without its provider only the
    memory tools are offered."""
    code = (
        "import sys, asyncio\n"
        "from memory.store import MemoryStore\n"
        "from memory.mcp.mcp_server import build_server\n"
        f"server = build_server(MemoryStore({str(tmp_path / 'm')!r}), providers=())\n"
        "names = sorted(t.name for t in asyncio.run(server.list_tools()))\n"
        "print(','.join(names), 'orchestrator' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    names, imported = out.stdout.split()
    assert set(names.split(",")) == MEMORY_TOOLS
    assert imported == "False"
