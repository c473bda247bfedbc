"""`TetherMemoryMiddleware` in an agent the test builds with `create_agent`, as a user would.

Checks what a user relies on: messages land in `working/{task}/messages.jsonl`, the gauge
uses the provider-reported input tokens (an estimate marked `~` only without usage), the
warning comes once in the warning zone, the threshold follows the model's context window,
a snapshot + fresh context happens at the threshold without ever sending an unanswered
tool call (the strict scripted server would answer 400), and recall adds memory snippets.
"""

from __future__ import annotations

import json

from langchain.agents import create_agent
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI

from orchestrator import TetherMemoryMiddleware
from tests.orchestrator.openai_server import ScriptedOpenAI


@tool
def read_note(name: str) -> str:
    """Read a note by name."""
    return f"note {name}: " + "lorem ipsum " * 300


def _model(server: ScriptedOpenAI) -> ChatOpenAI:
    return ChatOpenAI(
        model="gpt-4o-mini", base_url=server.base_url, api_key="sk-test", max_retries=0
    )


def _steps(reads: int) -> list[dict]:
    return [{"tool": "read_note", "args": {"name": f"n{i}"}} for i in range(reads)] + [
        {"text": "All notes read."}
    ]


def test_messages_are_recorded_and_the_gauge_uses_reported_usage(memory_dir):
    events: list[dict] = []
    with ScriptedOpenAI(_steps(2), responder=None, usage=lambda n: 5000) as server:
        middleware = TetherMemoryMiddleware(memory_dir, "T1", on_event=events.append)
        agent = create_agent(_model(server), [read_note], middleware=[middleware])
        agent.invoke({"messages": [{"role": "user", "content": "Read the notes"}]})
    lines = [
        json.loads(x)
        for x in (memory_dir / "working" / "T1" / "messages.jsonl").read_text().splitlines()
    ]
    roles = [x["role"] for x in lines]
    assert roles == ["user", "assistant", "tool", "assistant", "tool", "assistant"]
    gauges = [e for e in events if e["event"] == "tokens"]
    assert [g["shown"] for g in gauges] == ["5000", "5000", "5000"]
    assert not any(g["estimated"] for g in gauges)


def test_without_usage_the_gauge_is_an_estimate_marked_with_a_tilde(memory_dir):
    events: list[dict] = []
    with ScriptedOpenAI(_steps(0), responder=None, usage=None) as server:
        middleware = TetherMemoryMiddleware(memory_dir, "T2", on_event=events.append)
        agent = create_agent(_model(server), [read_note], middleware=[middleware])
        agent.invoke({"messages": [{"role": "user", "content": "Hello"}]})
    gauge = next(e for e in events if e["event"] == "tokens")
    assert gauge["estimated"] and gauge["shown"].startswith("~")


def test_warning_then_snapshot_and_a_fresh_context_that_the_strict_api_accepts(memory_dir):
    events: list[dict] = []
    # 80K is in the warning zone (76.8K-96K), 100K crosses the 96K threshold
    grow = iter([50_000, 80_000, 90_000, 100_000, 20_000, 21_000, 22_000, 23_000])
    with ScriptedOpenAI(_steps(6), responder=None, usage=lambda n: next(grow)) as server:
        # threshold 150K configured; gpt-4o-mini's 128K window x 0.75 = 96K wins
        middleware = TetherMemoryMiddleware(memory_dir, "T3", on_event=events.append)
        agent = create_agent(_model(server), [read_note], middleware=[middleware])
        state = agent.invoke({"messages": [{"role": "user", "content": "Read all notes"}]})
    assert set(server.statuses) == {200}  # no unanswered tool call was ever sent
    assert state["messages"][-1].content == "All notes read."
    kinds = [e["event"] for e in events]
    assert "snapshot" in kinds
    snap = next(e for e in events if e["event"] == "snapshot")
    assert snap["threshold"] == 96_000
    assert (memory_dir / "context_snapshots").glob("snap_*.md")
    # the call after the snapshot is a fresh context: fewer messages than the one before it
    # (the earlier tool results are gone; the snapshot that seeds it may be longer than
    # this test's small context)
    after = kinds.index("snapshot")
    sizes = [len(r["messages"]) for r in server.requests]
    calls_before = kinds[:after].count("tokens")
    assert kinds.index("warning") < after and kinds.count("snapshot") == 1
    assert sizes[calls_before] < sizes[calls_before - 1]
    fresh = json.dumps(server.requests[calls_before]["messages"])
    assert "context snapshot" in fresh and "note n0" not in fresh
    assert "Read all notes" in fresh  # the task itself stays


def test_recall_adds_memory_snippets_to_the_first_call(memory_dir):
    from memory.store import MemoryStore

    store = MemoryStore(memory_dir)
    facts = memory_dir / "findings" / "auth.md"
    facts.parent.mkdir(parents=True, exist_ok=True)
    facts.write_text("# Auth\nThe zebrafish token service signs sessions with HMAC.\n")
    with ScriptedOpenAI(_steps(0), responder=None) as server:
        middleware = TetherMemoryMiddleware(store, "T4")
        agent = create_agent(_model(server), [read_note], middleware=[middleware])
        agent.invoke({"messages": [{"role": "user", "content": "How does zebrafish sign?"}]})
    system = server.requests[0]["messages"][0]
    assert system["role"] == "system" and "zebrafish" in system["content"]


def test_a_rerun_over_the_same_messages_does_not_log_them_twice(memory_dir):
    from langchain_core.messages import HumanMessage

    first = [HumanMessage("Read the notes", id="u1")]
    with ScriptedOpenAI(_steps(1), responder=None) as server:
        agent = create_agent(
            _model(server), [read_note], middleware=[TetherMemoryMiddleware(memory_dir, "T5")]
        )
        state = agent.invoke({"messages": first})
    log = memory_dir / "working" / "T5" / "messages.jsonl"
    before = len(log.read_text().splitlines())
    # a new process (new middleware) continues the same conversation, as after a crash
    with ScriptedOpenAI([{"text": "Done."}], responder=None) as server:
        agent = create_agent(
            _model(server), [read_note], middleware=[TetherMemoryMiddleware(memory_dir, "T5")]
        )
        agent.invoke({"messages": [*state["messages"], HumanMessage("Anything else?", id="u2")]})
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    assert len(lines) == before + 2  # the new question and the new answer only
    assert [x["content"] for x in lines[-2:]] == ["Anything else?", "Done."]
