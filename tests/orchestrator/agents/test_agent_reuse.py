"""Agents of later runs in one process (a server, a notebook, a test session) share the
compiled agent of an earlier run with tools of the same shape, yet each run calls its own
model and its own tool objects: the workdir it was given, the memory it was given."""

from __future__ import annotations

import json
from typing import Any

from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_openai import ChatOpenAI

from memory.facts.tools import memory_tools
from memory.store import MemoryStore
from orchestrator.agents.loop import run_agent
from orchestrator.offline import OfflineChatModel
from orchestrator.tools.workdir import workdir_tools
from orchestrator.types import SubmitFindings
from tests.orchestrator.openai_server import ScriptedOpenAI


def _brief() -> list:
    return [SystemMessage("You are a subagent."), HumanMessage("Read which.txt, log it, submit.")]


def _labelled_model(label: str) -> OfflineChatModel:
    """Reads which.txt, logs what it read, then submits `label: <what it read>`."""

    def policy(messages: list, tools: list[dict]) -> AIMessage:
        answers = [m for m in messages if isinstance(m, ToolMessage)]
        if not answers:
            call = {"name": "read_file", "args": {"path": "which.txt"}, "id": "r"}
            return AIMessage("", tool_calls=[call])
        read = next(ln for ln in answers[0].content.splitlines() if "this is" in ln)
        read = read[read.index("this is") :]
        if len(answers) == 1:
            call = {"name": "memory_log", "args": {"content": f"{label} read {read}"}, "id": "l"}
            return AIMessage("", tool_calls=[call])
        args = {"summary": f"{label}: {read}", "key_discoveries": [answers[1].content[:80]]}
        return AIMessage("", tool_calls=[{"name": "SubmitFindings", "args": args, "id": "f"}])

    return OfflineChatModel(policy=policy)


def _setup(tmp_path, name: str) -> tuple[list, MemoryStore]:
    root = tmp_path / name
    root.mkdir()
    (root / "which.txt").write_text(f"this is workdir {name}\n")
    store = MemoryStore(tmp_path / f"memory-{name}")
    tools = [*workdir_tools(root), *memory_tools(store, task_id="T1")]
    return tools, store


def test_each_run_uses_its_own_model_workdir_and_memory(tmp_path):
    runs = []
    for name in ("a", "b", "c"):
        tools, store = _setup(tmp_path, name)
        result = run_agent(
            _labelled_model(f"model-{name}"),
            tools=tools,
            final_tool=SubmitFindings,
            messages=_brief(),
        )
        runs.append((name, result, store))
    for name, result, store in runs:
        assert result.final.summary == f"model-{name}: this is workdir {name}"
        contents = [store.fetch(e.id) for e in store.list_entries()]
        assert len(contents) == 1 and f"model-{name} read this is workdir {name}" in contents[0]
        store.close()


def test_a_later_run_sends_its_requests_to_its_own_provider(tmp_path):
    servers = []
    for name in ("a", "b"):
        tools, store = _setup(tmp_path, name)
        steps = [
            {"tool": "read_file", "args": {"path": "which.txt"}},
            {"tool": "SubmitFindings", "args": {"summary": f"done {name}"}},
        ]
        with ScriptedOpenAI(steps, responder=None) as server:
            client = ChatOpenAI(
                model="gpt-4o-mini", base_url=server.base_url, api_key="sk-test", max_retries=0
            )
            result = run_agent(client, tools=tools, final_tool=SubmitFindings, messages=_brief())
        store.close()
        servers.append(server)
        assert result.final.summary == f"done {name}"
        # the tool result the server saw came from this run's workdir
        answer = next(m for m in server.requests[1]["messages"] if m["role"] == "tool")
        assert f"this is workdir {name}" in answer["content"]
    first, second = (json.dumps(s.requests[0]["tools"], sort_keys=True) for s in servers)
    assert first == second and len(servers[1].requests) == 2


class _Recorder(AgentMiddleware):
    """A middleware holding state of its run: what its hooks saw."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []

    def before_model(self, state: Any, runtime: Any) -> None:
        self.seen.append(f"before_model:{len(state['messages'])}")

    def wrap_model_call(self, request: Any, handler: Any) -> Any:
        self.seen.append("model:" + request.messages[-1].text[-20:])
        return handler(request)

    def after_agent(self, state: Any, runtime: Any) -> None:
        self.seen.append("after_agent:" + state["messages"][-2].tool_calls[0]["args"]["summary"])


def test_each_run_reaches_its_own_middleware(tmp_path):
    recorders = []
    for name in ("a", "b"):
        tools, store = _setup(tmp_path, name)
        recorder = _Recorder()
        run_agent(
            _labelled_model(f"model-{name}"),
            tools=tools,
            final_tool=SubmitFindings,
            messages=_brief(),
            middleware=[recorder],
        )
        store.close()
        recorders.append((name, recorder))
    for name, recorder in recorders:
        models = [s for s in recorder.seen if s.startswith("model:")]
        assert len(models) == 3 and f"this is workdir {name}" in models[1]
        assert recorder.seen.count("before_model:2") == 1
        assert recorder.seen[-1] == f"after_agent:model-{name}: this is workdir {name}"


class _WithTool(AgentMiddleware):
    """A middleware that brings a tool of its own, set on the instance."""

    def __init__(self, label: str) -> None:
        super().__init__()
        from langchain_core.tools import StructuredTool

        def shout() -> str:
            return f"shout from {label}"

        self.tools = [StructuredTool.from_function(shout, name="shout", description="Shout.")]


def test_a_middleware_with_its_own_tool_keeps_it_in_every_run(tmp_path):
    def policy(messages: list, tools: list[dict]) -> AIMessage:
        answers = [m for m in messages if isinstance(m, ToolMessage)]
        if not answers:
            return AIMessage("", tool_calls=[{"name": "shout", "args": {}, "id": "s"}])
        args = {"summary": answers[0].content}
        return AIMessage("", tool_calls=[{"name": "SubmitFindings", "args": args, "id": "f"}])

    for label in ("first", "second"):
        tools, store = _setup(tmp_path, label)
        result = run_agent(
            OfflineChatModel(policy=policy),
            tools=tools,
            final_tool=SubmitFindings,
            messages=_brief(),
            middleware=[_WithTool(label)],
        )
        store.close()
        assert result.final.summary == f"shout from {label}"
