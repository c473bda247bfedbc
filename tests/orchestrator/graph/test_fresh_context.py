"""A fresh lead context that would not fit: when the provider counts three times more tokens
than tether's estimate, the context seeded from a token-limit snapshot is over the model's
window; tether plans from the lean context (plan, snapshot path, newest turns) instead of
sending a request the provider refuses, and the task finishes.

Through the real `langchain-openai` client against the scripted server, which counts
`scale` times the estimate and refuses a prompt over its window (`context_length_exceeded`).
"""

from __future__ import annotations

from langchain_openai import ChatOpenAI

from orchestrator.api import Orchestrator
from tests.orchestrator.openai_server import ScriptedOpenAI, policy_responder, prompt_tokens


def test_a_seeded_lead_context_over_the_window_is_planned_lean(
    fixture_repo, tiny_workflow, memory_dir
):
    events: list[dict] = []
    with ScriptedOpenAI(responder=policy_responder, scale=3, window=7000) as server:
        model = ChatOpenAI(
            model="gpt-4o-mini", base_url=server.base_url, api_key="sk-test", max_retries=0,
            profile={"max_input_tokens": 7000},
        )  # fmt: skip
        result = Orchestrator(
            workdir=fixture_repo, workflow=tiny_workflow, model=model, token_threshold=3000,
            on_event=events.append,
        ).run("Survey the shop", task_id="lean")  # fmt: skip
    assert result.status == "done", result.failed
    assert result.snapshots  # the token limit did hand off
    assert 400 not in server.statuses  # no request over the window was ever sent
    assert max(int(prompt_tokens(b) * 3) for b in server.requests) <= 7000
    warnings = [e["message"] for e in events if e["event"] == "warning"]
    assert any("planning from the lean context" in w for w in warnings), warnings
    leads = [b for b in server.requests if any(
        t["function"]["name"] == "PhasePlan" for t in b.get("tools", []))]  # fmt: skip
    # instructions never vanish: every lead request, fresh or not, opens with the system text
    assert all(b["messages"][0]["role"] in ("system", "developer") for b in leads)
    lean = leads[-1]["messages"][0]["content"]
    assert "context_snapshots/snap_" in lean and "Current research plan:" in lean
