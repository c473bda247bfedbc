"""The checkpoint's one typed model and its JSON Schema.

`SavedCheckpoint` (pydantic, strict) is the one validator of a checkpoint file; the shipped
`orchestrator/schemas/checkpoint.schema.json` is generated from it and pinned here, and any
JSON Schema validator (`jsonschema`) gives the same answer as the model on every kind of
document.
"""

from __future__ import annotations

import copy
import json

import jsonschema
import pytest

from orchestrator.artifacts.checkpoint import (
    SCHEMA_PATH,
    checkpoint_schema,
    checkpoint_schema_problem,
)
from orchestrator.artifacts.checkpoint_model import SavedCheckpoint, checkpoint_json_schema

VALID = {
    "checkpoint_id": "cp_exploration_20250104T120000000000Z",
    "task_id": "t1",
    "phase": "exploration",
    "timestamp": "2025-01-04T12:00:00.000000Z",
    "state": {
        "completed_subtasks": ["exploration/a"],
        "pending_subtasks": ["exploration/b"],
        "active_agents": [],
        "blocked_agents": [],
        "findings_count": 1,
    },
    "context_summary": "",
    "next_action": "continue",
    "recovery_instructions": "resume",
    "plan": None,
    "findings": ["findings/researcher-a_1.md"],
    "entries": [],
    "langgraph": {"thread_id": "t1", "checkpoint_id": None},
    "objective": "o",
    "workdir": None,
    "phases": ["exploration"],
    "phase_index": 0,
    "subtasks": [{"id": "a", "title": "A", "scope": ["."]}, {"id": "b"}],
    "completed_findings": {"exploration/a": "findings/researcher-a_1.md"},
    "extra": {"anything": [1, {"x": None}]},
}


def _with(path: str, value):
    doc = copy.deepcopy(VALID)
    *parents, last = path.split(".")
    node = doc
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node[part]
    if value is KeyError:
        del node[last]
    elif isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value
    return doc


CASES = [
    ("valid", VALID),
    ("missing required", _with("next_action", KeyError)),
    ("unknown top-level field", {**VALID, "surprise": 1}),
    ("empty task id", _with("task_id", "")),
    ("task id too long", _with("task_id", "x" * 256)),
    ("bad timestamp", _with("timestamp", "yesterday")),
    ("timestamp with offset", _with("timestamp", "2025-01-04T12:00:00+02:00")),
    ("negative findings count", _with("state.findings_count", -1)),
    ("boolean findings count", _with("state.findings_count", True)),
    ("float findings count", _with("state.findings_count", 1.0)),
    ("float with a fraction", _with("state.findings_count", 1.5)),
    ("non-string in a string list", _with("findings", ["a", 3])),
    ("no phases", _with("phases", [])),
    ("plan may be a string", _with("plan", "research_plans/t1.md")),
    ("plan is a number", _with("plan", 3)),
    ("subtask without id", _with("subtasks", [{"title": "no id"}])),
    ("subtask with empty id", _with("subtasks", [{"id": ""}])),
    ("subtask is not an object", _with("subtasks", ["a"])),
    ("completed findings not strings", _with("completed_findings", {"a": 1})),
    ("extra is a list", _with("extra", [])),
    ("unknown langgraph field", _with("langgraph.other", "x")),
    ("state is null", _with("state", None)),
    ("document is a list", [VALID]),
]


@pytest.mark.parametrize("name,doc", CASES, ids=[c[0] for c in CASES])
def test_the_model_and_its_json_schema_agree(name, doc):
    """A document is accepted by the model exactly when a JSON Schema validator accepts it
    under the generated schema; a refusal names where and what."""
    valid = jsonschema.Draft202012Validator(checkpoint_schema()).is_valid(doc)
    problem = checkpoint_schema_problem(doc)
    assert (problem is None) == valid, (name, problem)
    if not valid:
        assert problem.startswith("at ")


def test_the_shipped_schema_is_the_models():
    """Regenerate with `python -m orchestrator.artifacts.checkpoint_model > orchestrator/schemas/
    checkpoint.schema.json` after changing the model."""
    shipped = json.loads(SCHEMA_PATH.read_text())
    assert shipped == checkpoint_json_schema() == SavedCheckpoint.model_json_schema()
    jsonschema.Draft202012Validator.check_schema(shipped)
    assert shipped["$id"] == "urn:tether:schema:checkpoint:2"
    assert set(shipped["required"]) >= {"checkpoint_id", "task_id", "phase", "timestamp"}


def test_what_tether_writes_is_valid():
    from orchestrator.artifacts.checkpoint import render_checkpoint

    assert checkpoint_schema_problem(json.loads(render_checkpoint(VALID))) is None
