"""One compiled `create_agent` graph per shape of agent, shared by the runs of a process.

Building and compiling a `create_agent` graph costs more than a fast model's whole run, and
the graph holds nothing of a run: its model and tools come with each request, and its
middleware are *slots* that call the run's own middleware instances. So runs with the same
model class, final tool, tools of the same shape (class, name, description, arguments
model) and middleware classes share one graph: the subagents of a run, and the agents of
later runs in the same process. What a run brings (`Current`: its middleware, and its
model and tools where the graph was built with others) reaches the graph through a context
variable, which LangGraph copies into the threads it runs nodes and tools in.

A slot is one of a few fixed classes, each forwarding some hooks to the middleware at the
same position of the run's list: `_WrapSlot` both `wrap_*` hooks (a hook the middleware
does not have passes the call through), and one class per node hook (`before_agent`,
`before_model`, `after_model`, `after_agent`), since `create_agent` adds a graph node for
every node hook a class defines. Middleware a slot cannot stand in for (an async hook
without its sync one, tools or state of its own, hooks that jump) gets a graph of its own,
with the real instances.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware
from pydantic import BaseModel

from orchestrator.agents.final_answer import final_tool_object

if TYPE_CHECKING:
    from langchain.agents.middleware import (
        AgentState,
        ModelCallResult,
        ModelRequest,
        ModelResponse,
        ToolCallRequest,
    )
    from langchain_core.messages import ToolMessage
    from langgraph.runtime import Runtime
    from langgraph.types import Command

WRAP_HOOKS = ("wrap_model_call", "wrap_tool_call")
NODE_HOOKS = ("before_agent", "before_model", "after_model", "after_agent")
ASYNC_HOOKS = (
    "abefore_agent", "abefore_model", "aafter_model", "aafter_agent",
    "awrap_model_call", "awrap_tool_call",
)  # fmt: skip


@dataclass(frozen=True)
class Current:
    """What one agent run brings to a shared compiled agent."""

    middleware: tuple[Any, ...]
    """The run's middleware, in the order of the graph's slots."""
    model: Any = None
    """The run's model when the compiled graph was built with another one, else None."""
    tools: dict[str, Any] | None = None
    """The run's tools by name when the compiled graph holds other objects of the same
    shape (an earlier run's, bound to its own memory and workdir); else None."""


CURRENT: ContextVar[Current] = ContextVar("tether_agent_run")


def overrides(middleware: Any, hook: str) -> bool:
    """Whether `middleware`'s class defines `hook` (as `create_agent` decides it)."""
    return getattr(type(middleware), hook) is not getattr(AgentMiddleware, hook)


class _RunObjects(AgentMiddleware):
    """The outermost slot: requests carry the run's model and tool objects.

    A tool call reaches the run's own tool object (LangChain's way for tools a middleware
    provides: `request.override(tool=...)`), and a model call goes to the run's model,
    bound to the run's tool objects (`create_agent` binds at call time, from the request).
    """

    def wrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]
    ) -> ModelCallResult:
        current = CURRENT.get()
        if current.model is not None:
            request = request.override(model=current.model)
        if current.tools is not None:
            tools = [current.tools.get(getattr(t, "name", None), t) for t in request.tools]
            request = request.override(tools=tools)
        return handler(request)

    def wrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], ToolMessage | Command]
    ) -> ToolMessage | Command:
        current = CURRENT.get()
        if current.tools is not None:
            tool = current.tools.get(request.tool_call["name"])
            if tool is not None:
                request = request.override(tool=tool)
        return handler(request)


class _Slot(AgentMiddleware):
    """Position `index` of the run's middleware, under `name` (node names follow it)."""

    def __init__(self, index: int, name: str, trace_policy: Any = None) -> None:
        super().__init__()
        self.index, self._name = index, name
        if trace_policy is not None:  # what the real middleware lets tracing see
            self.trace_policy = trace_policy

    @property
    def name(self) -> str:
        return self._name

    def own(self) -> Any:
        return CURRENT.get().middleware[self.index]


class _WrapSlot(_Slot):
    def wrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]
    ) -> ModelCallResult:
        own = self.own()
        if not overrides(own, "wrap_model_call"):
            return handler(request)
        return own.wrap_model_call(request, handler)

    def wrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], ToolMessage | Command]
    ) -> ToolMessage | Command:
        own = self.own()
        if not overrides(own, "wrap_tool_call"):
            return handler(request)
        return own.wrap_tool_call(request, handler)


class _BeforeAgentSlot(_Slot):
    def before_agent(self, state: AgentState, runtime: Runtime) -> dict[str, object] | None:
        return self.own().before_agent(state, runtime)


class _BeforeModelSlot(_Slot):
    def before_model(self, state: AgentState, runtime: Runtime) -> dict[str, object] | None:
        return self.own().before_model(state, runtime)


class _AfterModelSlot(_Slot):
    def after_model(self, state: AgentState, runtime: Runtime) -> dict[str, object] | None:
        return self.own().after_model(state, runtime)


class _AfterAgentSlot(_Slot):
    def after_agent(self, state: AgentState, runtime: Runtime) -> dict[str, object] | None:
        return self.own().after_agent(state, runtime)


_NODE_SLOTS: dict[str, type[_Slot]] = {
    "before_agent": _BeforeAgentSlot,
    "before_model": _BeforeModelSlot,
    "after_model": _AfterModelSlot,
    "after_agent": _AfterAgentSlot,
}


def shareable(middleware: Any) -> bool:
    """Whether slots can stand in for `middleware` in a shared graph."""
    base = AgentMiddleware
    if (
        getattr(middleware, "tools", None)  # on the instance or its class
        or getattr(middleware, "state_schema", base.state_schema) is not base.state_schema
        # agents run synchronously: a slot forwards sync hooks only
        or any(overrides(middleware, h) and not overrides(middleware, h[1:]) for h in ASYNC_HOOKS)
    ):
        return False
    hooks = [getattr(type(middleware), h) for h in (*NODE_HOOKS, *WRAP_HOOKS)]
    return not any(hasattr(h, "__can_jump_to__") for h in hooks)


def _hooks(middleware: Any) -> tuple[str, ...]:
    return tuple(h for h in (*NODE_HOOKS, *WRAP_HOOKS) if overrides(middleware, h))


def slots(middleware: Sequence[Any]) -> list[_Slot]:
    """The slots standing in for `middleware` (one per node hook, one for the wrap hooks);
    the first slot of each takes its name, the others `name[hook]`."""
    out: list[_Slot] = []
    for index, m in enumerate(middleware):
        hooks = _hooks(m)
        kinds = [h for h in hooks if h in NODE_HOOKS]
        if any(h in WRAP_HOOKS for h in hooks):
            kinds.append("wrap")
        policy = getattr(m, "trace_policy", None)
        for n, kind in enumerate(kinds):
            name = m.name if n == 0 else f"{m.name}[{kind}]"
            cls = _WrapSlot if kind == "wrap" else _NODE_SLOTS[kind]
            out.append(cls(index, name, policy))
    return out


_AGENTS: dict[tuple, tuple[tuple, Any]] = {}
_AGENTS_LOCK = threading.Lock()
_AGENTS_MAX = 64


def _shape(tool: Any) -> tuple:
    """What a compiled agent takes from a tool object: its class, name, description,
    arguments model (by identity; kept alive by the cache entry), and error handling."""
    return (
        type(tool),
        tool.name,
        tool.description,
        id(tool.args_schema),
        tool.return_direct,
        id(getattr(tool, "handle_tool_error", None)),
        id(getattr(tool, "handle_validation_error", None)),
        getattr(tool, "response_format", None),
    )


def compiled_agent(
    model: Any, tools: tuple, final_tool: type[BaseModel], middleware: tuple
) -> tuple[Any, Current]:
    """`(agent, current)`: the compiled agent for these parts, and what the run must set in
    `CURRENT` while it runs (its middleware, and its model and tools by name where the
    agent was compiled with other objects).

    The objects an agent was built with are kept with it, so an arguments model's
    identity in the key is never reused meanwhile.
    """

    def build(agent_middleware: Sequence[Any]) -> Any:
        return create_agent(
            model, tools=[*tools, final_tool_object(final_tool)], middleware=list(agent_middleware)
        )

    if not all(shareable(m) for m in middleware):
        return build(middleware), Current(middleware)
    key = (
        type(model),
        final_tool,
        tuple(_shape(t) for t in tools),
        tuple((type(m), m.name, _hooks(m)) for m in middleware),
    )
    with _AGENTS_LOCK:
        hit = _AGENTS.get(key)
    if hit is None:
        agent = build([_RunObjects(), *slots(middleware)])
        with _AGENTS_LOCK:
            if len(_AGENTS) >= _AGENTS_MAX:
                _AGENTS.clear()
            _AGENTS[key] = ((model, tools), agent)
        return agent, Current(middleware)
    (built_model, built_tools), agent = hit
    same_tools = all(a is b for a, b in zip(built_tools, tools, strict=True))
    return agent, Current(
        middleware,
        None if built_model is model else model,
        None if same_tools else {t.name: t for t in tools},
    )
