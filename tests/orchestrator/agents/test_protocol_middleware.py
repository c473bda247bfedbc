"""tether's protocol middleware (`orchestrator.agents.protocol_middleware`): one job per class, in
a fixed order after the agent's own middleware, and compiled agents shared through slots."""

from __future__ import annotations

from typing import Any

from langchain.agents.middleware import AgentMiddleware, ToolErrorMiddleware
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from orchestrator.agents import compiled_agent
from orchestrator.agents.final_answer import FinalAnswerMiddleware
from orchestrator.agents.loop import run_agent
from orchestrator.agents.protocol_middleware import (
    CleanToolResultsMiddleware,
    ContextBudgetMiddleware,
    ProviderRetryMiddleware,
    StepLimitMiddleware,
    StopMiddleware,
    UsageMiddleware,
    protocol_middleware,
)
from orchestrator.offline import OfflineChatModel
from orchestrator.types import SubmitFindings


def test_the_protocol_is_one_middleware_per_job_in_a_fixed_order():
    protocol = protocol_middleware(SubmitFindings, max_steps=3, max_context_tokens=4000)
    assert [type(m) for m in protocol.middleware] == [
        FinalAnswerMiddleware,
        StopMiddleware,
        StepLimitMiddleware,
        ContextBudgetMiddleware,
        ProviderRetryMiddleware,
        UsageMiddleware,
        CleanToolResultsMiddleware,
        ToolErrorMiddleware,
    ]
    assert protocol.final is protocol.middleware[0]
    assert protocol.usage is protocol.middleware[5]


def _boom() -> str:
    """Always fails."""
    raise RuntimeError("disk on fire")


def test_a_failing_tool_is_answered_with_an_error_the_model_reads():
    from langchain_core.tools import StructuredTool

    def policy(messages: list, tools: list[dict]) -> AIMessage:
        answers = [m for m in messages if isinstance(m, ToolMessage)]
        if not answers:
            return AIMessage("", tool_calls=[{"name": "boom", "args": {}, "id": "b"}])
        args = {"summary": answers[0].content}
        return AIMessage("", tool_calls=[{"name": "SubmitFindings", "args": args, "id": "f"}])

    tool = StructuredTool.from_function(_boom, name="boom")
    result = run_agent(
        OfflineChatModel(policy=policy),
        tools=[tool],
        final_tool=SubmitFindings,
        messages=[SystemMessage("s"), HumanMessage("go")],
    )
    assert result.final.summary == "Error: RuntimeError: disk on fire"
    assert result.tool_calls == [{"name": "boom", "args": {}}]


class _TwoNodeHooks(AgentMiddleware):
    def before_model(self, state: Any, runtime: Any) -> None:
        return None

    def after_agent(self, state: Any, runtime: Any) -> None:
        return None


def test_runs_of_one_shape_share_a_compiled_agent_with_a_slot_per_node_hook():
    model = OfflineChatModel()
    first = protocol_middleware(SubmitFindings, max_steps=3, max_context_tokens=4000)
    second = protocol_middleware(SubmitFindings, max_steps=3, max_context_tokens=4000)
    agent, current = compiled_agent(model, (), SubmitFindings, (_TwoNodeHooks(), *first.middleware))
    again, later = compiled_agent(model, (), SubmitFindings, (_TwoNodeHooks(), *second.middleware))
    assert again is agent
    assert later.middleware[1] is second.final and current.middleware[1] is first.final
    nodes = set(agent.get_graph().nodes)
    assert {"_TwoNodeHooks.before_model", "_TwoNodeHooks[after_agent].after_agent"} <= nodes
