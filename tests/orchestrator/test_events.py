"""Progress events (`orchestrator.events`): every event a run emits matches its kind's
model, every kind emitted in the code has a model (and no model is unused), and a wrong
event raises at the emitter while a right one reaches callbacks unchanged."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from orchestrator import Orchestrator
from orchestrator.errors import EventError
from orchestrator.events import EVENTS, Event, build_event

SOURCE = Path(__file__).parents[2] / "orchestrator"
#: A call that emits: `emit(`, `_emit(` or `build_event(` with a literal kind, and the
#: approval verbs' `"approved" if approve else "rejected"`.
EMIT_CALL = re.compile(
    r"\b(?:emit|_emit|build_event)\(\s*\"(\w+)\"(?:\s+if\s+\w+\s+else\s+\"(\w+)\")?"
)


def check(events: list[Event]) -> set[str]:
    """Each event against its model (as a user's callback receives it); the kinds seen."""
    for event in events:
        fields = {k: v for k, v in event.items() if k != "event"}
        EVENTS[event["event"]].model_validate(fields)
    return {e["event"] for e in events}


def test_every_event_of_an_offline_run_matches_its_model(fixture_repo, tiny_workflow):
    events: list[Event] = []
    result = Orchestrator(workdir=fixture_repo, workflow=tiny_workflow, on_event=events.append).run(
        "Map the shop package"
    )
    assert result.status == "done"
    kinds = check(events)
    core = {"model", "start", "phase", "plan", "agent", "tokens", "merged", "checkpoint"}
    assert core | {"snapshot", "done", "finish"} <= kinds, sorted(kinds)


def test_every_event_of_an_approval_run_matches_its_model(fixture_repo, tmp_path):
    workflow = tmp_path / "gate.yaml"
    workflow.write_text("name: gate\nphases: [exploration]\napprove_plan: true\n")
    events: list[Event] = []
    orch = Orchestrator(workdir=fixture_repo, workflow=workflow, on_event=events.append)
    assert orch.run("Map the shop package", task_id="gate").status == "waiting"
    assert orch.approve("gate", approve=False, message="Fewer subtasks").status == "waiting"
    assert orch.approve("gate").status == "done"
    kinds = check(events)
    assert {"waiting_approval", "approved", "rejected", "resume", "finish"} <= kinds
    assert any(e["event"] == "approved" and "id" in e for e in events)  # the API's answer
    assert any(e["event"] == "approved" and e.get("agent") == "lead" for e in events)


def emitted_kinds() -> set[str]:
    found = set()
    for path in SOURCE.rglob("*.py"):
        for match in EMIT_CALL.finditer(path.read_text(encoding="utf-8")):
            found.update(kind for kind in match.groups() if kind)
    return found


def test_the_kinds_emitted_in_the_code_are_the_kinds_with_a_model():
    assert emitted_kinds() == set(EVENTS)


def test_a_right_event_is_delivered_as_given():
    subtasks = [{"key": "s1", "agent": "explorer", "title": "Look"}]
    event = build_event("plan", phase="exploration", path="/m/plan.md", subtasks=subtasks)
    assert event == {"event": "plan", "phase": "exploration", "path": "/m/plan.md",
                     "subtasks": subtasks}  # fmt: skip
    assert event["subtasks"] is subtasks  # checked, not converted
    assert list(build_event("warning", message="x")) == ["event", "message"]  # absent stays


@pytest.mark.parametrize(
    "kind,fields,error",
    [
        ("progress", {"message": "x"}, "unknown event kind 'progress'; define a model"),
        ("phase", {"phase": "exploration", "index": 1}, "'total': Field required"),
        ("warning", {"message": "x", "colour": "red"}, "'colour': Extra inputs are not"),
        ("phase", {"phase": "exploration", "index": "1", "total": 2}, "'index': Input should"),
        ("agent", {"key": "s1", "agent": "a", "state": "lost"}, "'state': Input should be"),
        ("plan", {"phase": "p", "path": "x", "subtasks": [{"key": "s1"}]}, "'subtasks.0.agent'"),
        ("approved", {"message": "ok"}, "either `id` (a request) or `agent` and `phase`"),
        ("rejected", {"id": "r1", "agent": "lead", "phase": "p", "message": "no"}, "either"),
    ],
)
def test_a_wrong_event_raises(kind, fields, error):
    with pytest.raises(EventError, match=re.escape(error)):
        build_event(kind, **fields)
