"""One `Orchestrator` keeps the agents' chat models per workflow: a workflow never gets the
models of another (Python reuses the id of a freed object, so an id is no key)."""

from __future__ import annotations

import orchestrator.api as api
from orchestrator.api import Orchestrator
from orchestrator.config.workflow import AgentSpec, Workflow


def test_a_workflow_never_gets_the_models_of_another_with_the_same_id(
    fixture_repo, memory_dir, monkeypatch
):
    orch = Orchestrator(workdir=fixture_repo)
    own = Workflow(agents={"researcher": AgentSpec(model="offline")})
    assert set(orch._agent_models(own)) == {"researcher"}
    # the first workflow freed and its id given to the next one, as CPython does
    monkeypatch.setattr(api, "id", lambda obj: 1, raising=False)
    other = Workflow(agents={"researcher": AgentSpec()})
    assert orch._agent_models(other) == {}
    assert set(orch._agent_models(own)) == {"researcher"}
