"""The idempotency keys of the user's tool calls (`orchestrator.tools.call_keys`), one call
at a time: what a repeated call gets, and how a Python tool is given its key. The crash
tests through the CLI are `tests/orchestrator/e2e/test_tool_call_keys.py`."""

from __future__ import annotations

import contextvars

from langchain.agents.middleware import ToolCallRequest
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool

from memory.store import MemoryStore
from orchestrator import ToolCallKey, tool_call_key
from orchestrator.artifacts.documents import Docs
from orchestrator.tools.call_keys import ToolCallKeys, set_tool_call_key
from orchestrator.tools.toolbox import as_tool


def _request(call_id: str, **args: str) -> ToolCallRequest:
    call = {"name": "send_email", "args": args, "id": call_id, "type": "tool_call"}
    earlier = {"name": "send_email", "args": {"to": "first"}, "id": "c0", "type": "tool_call"}
    state = {"messages": [AIMessage("", tool_calls=[earlier]), AIMessage("", tool_calls=[call])]}
    return ToolCallRequest(tool_call=call, tool=None, state=state, runtime=None)


class TestToolCallKeys:
    def keys(self, tmp_path) -> ToolCallKeys:
        docs = Docs.of(MemoryStore(tmp_path / "memory"))
        return ToolCallKeys(docs, "T1", "exploration/a", ["send_email"])

    def test_the_same_call_again_gets_the_recorded_answer_without_running(self, tmp_path):
        seen: list[str | None] = []

        def send(request: ToolCallRequest) -> ToolMessage:
            seen.append(tool_call_key())
            return ToolMessage("sent", tool_call_id=request.tool_call["id"], name="send_email")

        first = self.keys(tmp_path).wrap_tool_call(_request("m1", to="boss"), send)
        # another process, and a model call made again: another tool-call id
        again = self.keys(tmp_path).wrap_tool_call(_request("m2", to="boss"), send)
        assert seen == ["T1/exploration/a/send_email/1"]  # the second call of send_email
        assert (first.content, again.content) == ("sent", "sent")
        assert again.tool_call_id == "m2"
        assert tool_call_key() is None  # outside a call

    def test_another_call_in_the_same_place_runs_with_the_same_key(self, tmp_path):
        seen: list[str | None] = []

        def send(request: ToolCallRequest) -> ToolMessage:
            seen.append(tool_call_key())
            return ToolMessage(f"sent to {request.tool_call['args']['to']}", tool_call_id="x")

        self.keys(tmp_path).wrap_tool_call(_request("m1", to="boss"), send)
        other = self.keys(tmp_path).wrap_tool_call(_request("m2", to="team"), send)
        assert other.content == "sent to team"
        assert seen == ["T1/exploration/a/send_email/1"] * 2

    def test_a_call_in_flight_at_a_crash_runs_again_with_its_key(self, tmp_path):
        seen: list[str | None] = []

        def crash(request: ToolCallRequest) -> ToolMessage:
            seen.append(tool_call_key())
            raise KeyboardInterrupt  # the process ends inside the call

        def send(request: ToolCallRequest) -> ToolMessage:
            seen.append(tool_call_key())
            return ToolMessage("sent", tool_call_id="x")

        try:
            self.keys(tmp_path).wrap_tool_call(_request("m1", to="boss"), crash)
        except KeyboardInterrupt:
            pass
        self.keys(tmp_path).wrap_tool_call(_request("m1", to="boss"), send)
        assert seen == ["T1/exploration/a/send_email/1"] * 2


def test_a_python_tool_gets_its_key_as_a_parameter_the_model_never_sees():
    def send_email(to: str, tool_call_key: str) -> str:
        """Send an email."""
        return f"{to} {tool_call_key}"

    @tool
    def notify(who: str, tool_call_key: ToolCallKey) -> str:
        """Notify someone."""
        return f"{who} {tool_call_key}"

    def in_a_call(made, arg: str) -> str:
        set_tool_call_key("T1/exploration/a/send_email/0")  # as `ToolCallKeys` does
        call = {"name": made.name, "args": {arg: "a"}, "id": "c", "type": "tool_call"}
        return made.invoke(call).content

    for made, arg in ((as_tool(send_email), "to"), (as_tool(notify), "who")):
        assert list(made.tool_call_schema.model_json_schema()["properties"]) == [arg]
        answer = contextvars.copy_context().run(in_a_call, made, arg)
        assert answer == "a T1/exploration/a/send_email/0"
