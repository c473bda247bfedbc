"""Large tool results go to memory: the model gets their head and an entry id, reads more
with `memory_fetch`, and a provider that counts far more tokens than tether's estimate
never sees a request over its window.

Through the real `langchain-openai` client against the scripted server, which can count
`scale` times more tokens than 4 characters a token and refuses a prompt over its window
with `context_length_exceeded` (as the real API does).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from langchain.agents import create_agent
from langchain_openai import ChatOpenAI

from memory import MemoryStore
from memory.facts.tools import memory_tools
from orchestrator import TetherMemoryMiddleware
from orchestrator.api import Orchestrator
from tests.orchestrator.fixtures.widget_tools import big_report
from tests.orchestrator.openai_server import ScriptedOpenAI
from tests.orchestrator.scripted_agents import agents, findings, one_subtask, tool_answers

ENTRY = re.compile(r"entry (mem-[0-9]{8}-[0-9]{6}-[0-9a-f]{8})")
REPORTER = """
phases: [exploration]
agents:
  reporter:
    description: Reads the inventory report.
    prompt: AGENT=reporter
    tools: [big_report, memory_fetch]
"""


def client(server: ScriptedOpenAI, window: int | None = None) -> ChatOpenAI:
    profile = {"max_input_tokens": window} if window else None
    return ChatOpenAI(
        model="gpt-4o-mini", base_url=server.base_url, api_key="sk-test", max_retries=0,
        **({"profile": profile} if profile else {}),
    )  # fmt: skip


def fetch_first_chunk(body: dict) -> dict:
    entry = ENTRY.search(tool_answers(body)[-1]).group(1)
    return {"tool": "memory_fetch", "args": {"entry_id": entry, "chunk": 0}}


def test_a_200_kb_tool_result_is_never_sent_whole_and_memory_returns_it_exactly(
    tmp_path, memory_dir
):
    wf = tmp_path / "wf.yaml"
    wf.write_text(REPORTER)
    report = big_report(3600)
    assert len(report.encode()) > 200_000
    steps = {
        "reporter": [
            {"tool": "big_report", "args": {"lines": 3600}},
            fetch_first_chunk,
            lambda body: findings("Read the report head and its first chunk."),
        ]
    }
    with ScriptedOpenAI(responder=agents(one_subtask("reporter"), steps)) as server:
        result = Orchestrator(
            workdir=tmp_path, workflow=wf, model=client(server), tools=[big_report]
        ).run("What does the inventory report say?", task_id="r1")
    assert result.status == "done", result.failed
    bodies = [json.dumps(b) for b in server.requests]
    assert max(len(b) for b in bodies) < 60_000  # never the whole 200 KB
    assert not any("line 003599" in b for b in bodies)  # the report's last line never sent
    answers = [a for b in server.requests for a in tool_answers(b)]
    reference = next(a for a in answers if "over the" in a and "memory as entry" in a)
    assert reference.startswith("line 000000: widget inventory row")  # its head comes first
    entry = ENTRY.search(reference).group(1)
    assert MemoryStore(memory_dir).fetch(entry) == report  # byte for byte
    chunk = next(a for a in answers if a.startswith("line 000000") and "entry" not in a)
    assert chunk == MemoryStore(memory_dir).fetch(entry, chunk=0)  # memory_fetch by chunk


def test_a_provider_counting_far_more_tokens_never_gets_an_oversized_request(tmp_path, memory_dir):
    """The server counts 6x more tokens than the estimate and its window is 12,000: two
    2.6 KB results (~650 estimated, ~3,900 of the provider's tokens each) would overflow it;
    with the ratio known from the lead's first call, each is evicted (over 10% of the
    window) and every request fits."""
    wf = tmp_path / "wf.yaml"
    wf.write_text(REPORTER)
    steps = {
        "reporter": [
            {"tool": "big_report", "args": {"lines": 45}},
            {"tool": "big_report", "args": {"lines": 45}},
            lambda body: findings("Two reports read."),
        ]
    }
    with ScriptedOpenAI(
        responder=agents(one_subtask("reporter"), steps), window=12_000, scale=6
    ) as server:
        result = Orchestrator(
            workdir=tmp_path, workflow=wf, model=client(server, window=12_000),
            tools=[big_report],
        ).run("Read the report twice", task_id="s1")  # fmt: skip
    assert result.status == "done", result.failed
    assert 400 not in server.statuses  # no context_length_exceeded, ever
    evicted = [a for b in server.requests for a in tool_answers(b) if "memory as entry" in a]
    assert evicted  # the results went to memory
    assert MemoryStore(memory_dir).list_entries(tag="tool:big_report", limit=None)


def test_any_create_agent_with_tether_memory_middleware_evicts_large_results(tmp_path):
    """A plain `create_agent` agent: a 15 KB file under heavy reported usage goes to memory
    instead of filling the context, so no snapshot loop starts."""
    store = MemoryStore(tmp_path / "mem")
    page = "".join(f"row {i}: " + "x" * 70 + "\n" for i in range(200))  # ~15 KB

    def read_page(name: str) -> str:
        """Read a page of the wiki."""
        return page

    script = [
        {"tool": "read_page", "args": {"name": "home"}},
        {"tool": "read_page", "args": {"name": "home"}},
        {"text": "The page lists 200 rows."},
    ]
    events: list[dict] = []
    with ScriptedOpenAI(script, responder=None, window=60_000, scale=10) as server:
        fetch = [t for t in memory_tools(store, "T1") if t.name == "memory_fetch"]
        memory = TetherMemoryMiddleware(store, "T1", threshold=40_000, on_event=events.append)
        agent = create_agent(
            client(server, window=60_000), tools=[read_page, *fetch], middleware=[memory]
        )
        out = agent.invoke({"messages": [{"role": "user", "content": "Summarise the home page"}]})
    assert out["messages"][-1].content == "The page lists 200 rows."
    assert 400 not in server.statuses
    kinds = [e["event"] for e in events]
    assert kinds.count("offloaded") == 2 and "snapshot" not in kinds
    entry = ENTRY.search(str(out["messages"][2].content)).group(1)
    assert store.fetch(entry) == page
    log = Path(tmp_path / "mem" / "working" / "T1" / "messages.jsonl").read_text()
    assert entry in log  # the reference, as the model saw it, is in the message log


def test_a_subagent_reading_files_under_scaled_usage_finishes_within_the_window(tmp_path):
    """The offline policy's researcher reads three 2.6 KB files through the real client; the
    server counts 6x the estimate and its window is 12,000. Before, the subagent failed with
    `context_length_exceeded` (the context budget of 32,000 was never held to the window);
    now every request fits and the task is done."""
    from tests.orchestrator.openai_server import policy_responder

    work = tmp_path / "work"
    (work / "pkg").mkdir(parents=True)
    for i in range(3):
        body = "".join(f"def f{i}_{j}(x):\n    return x + {j}  # widget math\n" for j in range(60))
        (work / "pkg" / f"mod{i}.py").write_text(f'"""Module {i}."""\n' + body)
    wf = tmp_path / "wf.yaml"
    wf.write_text("phases: [exploration]\n")
    with ScriptedOpenAI(responder=policy_responder, scale=6, window=12_000) as server:
        result = Orchestrator(
            memory_dir=tmp_path / "mem", workdir=work, workflow=wf,
            model=client(server, window=12_000),
        ).run("How is widget math done?", task_id="w")  # fmt: skip
    assert result.status == "done", result.failed
    assert 400 not in server.statuses


def broken_text() -> str:
    """A report whose text holds a lone surrogate (output that was not UTF-8)."""
    return "widgets: 7 in caf\udce9 aisle"


def test_a_tool_result_with_a_lone_surrogate_reaches_the_model_cleaned(tmp_path, memory_dir):
    """Issue 42 item 10: the agent is not failed as a provider failure (5 retries); the
    model gets the text with U+FFFD in place of the surrogate."""
    wf = tmp_path / "wf.yaml"
    wf.write_text(REPORTER.replace("[big_report, memory_fetch]", "[broken_text]"))
    steps = {
        "reporter": [
            {"tool": "broken_text", "args": {}},
            lambda body: findings("Read: " + tool_answers(body)[-1]),
        ]
    }
    with ScriptedOpenAI(responder=agents(one_subtask("reporter"), steps)) as server:
        orch = Orchestrator(
            workdir=tmp_path, workflow=wf, model=client(server), tools=[broken_text]
        )
        result = orch.run("Read the report", task_id="sur")
        answers = [a for body in server.requests for a in tool_answers(body)]
    assert result.status == "done", result.failed
    assert "widgets: 7 in caf\ufffd aisle" in answers
    assert "Read: widgets: 7 in caf\ufffd aisle" in (memory_dir / result.findings[0]).read_text()
