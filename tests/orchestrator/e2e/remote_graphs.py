"""Graphs a test `langgraph dev` serves as remote agents (any graph whose state has `messages`).

* `echo`: reads its input message and answers with one AI message that names the server
  (`$REMOTE_NAME`) and the subtask, reporting its token usage. Words in the message steer
  it, as a real agent's input would: `sleep=S` works S seconds first (a slow model),
  `hold=DIR` works until `DIR/release-{server}` exists, `fail=1` raises, `structured=1`
  also answers a `structured_response` in tether's findings shape, `big=N` answers N
  characters.
* `asks`: stops at an `interrupt` whose value is a `HITLRequest` (LangChain's
  human-in-the-loop shape) asking to run `deploy`, then answers with the decision it got.
* `flaky`: `echo`, but the first run of each subtask in this server process fails.
* `hollow`: the first run of each subtask in this server process ends `success` with a
  state that gives no finding (`messages: []` or `messages: 5`); later runs answer, their
  usage malformed (`input_tokens: "abc"`, a negative `output_tokens`).

The dev server keeps its runs in memory and writes them to `.langgraph_api/` every 10
seconds; `FLUSH_EVERY` shortens that for the tests that kill a server and start it again
(what its restart re-queues is what it last wrote).
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path
from typing import Annotated, Any

from langchain_core.messages import AIMessage, AnyMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import interrupt
from typing_extensions import TypedDict

FLUSH_EVERY = 1.0
try:  # the dev server's persistence interval (seconds); a private knob of the dev runtime
    from langgraph_runtime_inmem import _persistence

    _persistence._flush_interval = FLUSH_EVERY
except ImportError:  # not under `langgraph dev`
    pass

USAGE = {"input_tokens": 120, "output_tokens": 30, "total_tokens": 150}


class AgentState(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    structured_response: dict[str, Any]


def _text(state: AgentState) -> str:
    humans = [m for m in state.get("messages") or [] if m.type == "human"]
    return str(humans[-1].content) if humans else ""


def _subtask(text: str) -> str:
    found = re.search(r"^Subtask: (\S+)", text, re.MULTILINE)
    return found.group(1) if found else "?"


def echo_node(state: AgentState) -> dict[str, Any]:
    text = _text(state)
    sleep = re.search(r"\bsleep=([\d.]+)", text)
    if sleep:
        time.sleep(float(sleep.group(1)))
    hold = re.search(r"\bhold=(\S+)", text)
    release = (
        Path(hold.group(1)) / f"release-{os.environ.get('REMOTE_NAME', '?')}" if hold else None
    )
    deadline = time.monotonic() + 120
    while release is not None and not release.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    if "fail=1" in text:
        raise ValueError("the remote agent failed on purpose")
    server, sub = os.environ.get("REMOTE_NAME", "?"), _subtask(text)
    summary = f"Subtask {sub} read on server {server}."
    big = re.search(r"\bbig=(\d+)", text)
    if big:
        summary += " " + "x" * int(big.group(1))
    out: dict[str, Any] = {"messages": [AIMessage(summary, usage_metadata=USAGE)]}
    if "structured=1" in text:
        out["structured_response"] = {
            "summary": summary + " (structured)",
            "key_discoveries": [f"server {server} saw {sub}"],
            "files": [{"path": "README.md", "description": "read remotely"}],
        }
    return out


_SEEN: set[str] = set()


def flaky_node(state: AgentState) -> dict[str, Any]:
    sub = _subtask(_text(state))
    if sub not in _SEEN:
        _SEEN.add(sub)
        raise RuntimeError(f"flaky agent: first run of {sub} fails")
    return echo_node(state)


class LooseState(TypedDict, total=False):
    messages: Any  # no reducer: whatever a node returns is the state


_HOLLOW: set[str] = set()


def hollow_node(state: LooseState) -> dict[str, Any]:
    messages = state.get("messages") if isinstance(state.get("messages"), list) else []
    text = " ".join(str(m.get("content", "")) for m in messages if isinstance(m, dict))
    sub = _subtask(text)
    if sub not in _HOLLOW:
        _HOLLOW.add(sub)
        return {"messages": 5 if len(sub) % 2 else []}
    answer = {
        "type": "ai",
        "content": f"Subtask {sub} read on the second try.",
        "usage_metadata": {"input_tokens": "abc", "output_tokens": -999_999_999},
    }
    return {"messages": [*messages, answer]}


def asks_node(state: AgentState) -> dict[str, Any]:
    request = {
        "action_requests": [
            {"name": "deploy", "args": {"target": "staging"}, "description": "Deploy it?"}
        ],
        "review_configs": [{"action_name": "deploy", "allowed_decisions": ["approve", "reject"]}],
    }
    decision = interrupt(request)
    kinds = [d.get("type") for d in (decision or {}).get("decisions") or []]
    message = " ".join(d.get("message", "") for d in (decision or {}).get("decisions") or [])
    answer = f"Deploy {'done' if kinds == ['approve'] else 'refused'}: {kinds} {message}".strip()
    return {"messages": [AIMessage(answer)]}


def _graph(node: Any, name: str, state: Any = AgentState) -> Any:
    graph = StateGraph(state)
    graph.add_node("agent", node)
    graph.add_edge(START, "agent")
    graph.add_edge("agent", END)
    compiled = graph.compile()
    compiled.name = name
    return compiled


echo = _graph(echo_node, "echo")
asks = _graph(asks_node, "asks")
flaky = _graph(flaky_node, "flaky")
hollow = _graph(hollow_node, "hollow", LooseState)
