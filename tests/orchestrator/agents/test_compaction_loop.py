"""A fresh context that refills the threshold at once is no progress: `TetherMemoryMiddleware`
compacts instead of snapshotting again, and stops with one clear error when even that
refills; it never writes snapshots in a loop.

A plain `create_agent` agent with the real `langchain-openai` client against the scripted
server (which reports usage).
"""

from __future__ import annotations

import pytest
from langchain.agents import create_agent
from langchain_openai import ChatOpenAI

from memory import MemoryStore
from orchestrator import TetherMemoryMiddleware
from orchestrator.errors import ContextLoopError
from tests.orchestrator.openai_server import ScriptedOpenAI

PAGE = "".join(f"row {i}: " + "y" * 90 + "\n" for i in range(96))  # ~9.6 KB, ~2,400 tokens


def read_page(name: str) -> str:
    """Read a page of the wiki."""
    return PAGE


def agent_with(server: ScriptedOpenAI, store: MemoryStore, events: list, **kwargs):
    memory = TetherMemoryMiddleware(
        store, "T1", threshold=3000, tool_result_tokens=1_000_000, on_event=events.append
    )
    model = ChatOpenAI(
        model="gpt-4o-mini", base_url=server.base_url, api_key="sk-test", max_retries=0
    )
    return create_agent(model, tools=[read_page], middleware=[memory], **kwargs)


def read(n: int) -> list[dict]:
    return [{"tool": "read_page", "args": {"name": f"p{i}"}} for i in range(n)]


def test_a_refill_after_a_snapshot_compacts_instead_of_snapshotting_again(tmp_path):
    store, events = MemoryStore(tmp_path / "mem"), []
    script = [*read(6), {"text": "Read six pages."}]
    with ScriptedOpenAI(script, responder=None) as server:
        out = agent_with(server, store, events).invoke(
            {"messages": [{"role": "user", "content": "Read the wiki"}]}
        )
    assert out["messages"][-1].content == "Read six pages."
    kinds = [e["event"] for e in events]
    assert kinds.count("snapshot") == 1
    assert any("refilled right after a snapshot" in e.get("message", "") for e in events)
    assert len(list((tmp_path / "mem" / "context_snapshots").glob("snap_*.md"))) == 1
    # what was sent after the compaction is small: the results went to memory entries
    assert max(len(str(b["messages"])) for b in server.requests[-2:]) < 6000
    assert store.list_entries(tag="tool:read_page", limit=None)


def test_a_context_that_refills_even_compacted_stops_with_one_error(tmp_path):
    store, events = MemoryStore(tmp_path / "mem"), []
    script = [*read(10), {"text": "never reached"}]
    big_prompt = "You follow these rules. " * 600  # ~3,600 tokens: over the threshold alone
    with ScriptedOpenAI(script, responder=None) as server:
        agent = agent_with(server, store, events, system_prompt=big_prompt)
        with pytest.raises(ContextLoopError) as err:
            agent.invoke({"messages": [{"role": "user", "content": "Read the wiki"}]})
    assert "reaches the 3000-token threshold again right after a snapshot" in str(err.value)
    assert "\n" not in str(err.value)
    assert [e["event"] for e in events].count("snapshot") == 1  # not a snapshot per call
    assert len(server.requests) <= 5
