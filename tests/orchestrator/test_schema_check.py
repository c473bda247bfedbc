"""The compiled schema check (`orchestrator._schema_check`) against `jsonschema`.

The fast check may only say "valid" where `jsonschema` agrees; on the shipped checkpoint
schema it must also accept what tether writes (else every checkpoint pays for both).
"""

from __future__ import annotations

import copy
import json

import jsonschema
import pytest

from orchestrator._schema_check import compile_check
from orchestrator.templates import checkpoint_schema, checkpoint_schema_problem

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
def test_agrees_with_jsonschema_on_the_checkpoint_schema(name, doc):
    schema = checkpoint_schema()
    check = compile_check(schema)
    assert check is not None, "the shipped checkpoint schema should compile"
    valid = jsonschema.Draft202012Validator(schema).is_valid(doc)
    if check(doc):
        assert valid, f"{name}: the fast check accepted what jsonschema rejects"
    # what tether writes must take the fast path: ints are ints, nothing exotic
    if name in ("valid", "timestamp with offset", "plan may be a string"):
        assert check(doc)
    assert (checkpoint_schema_problem(doc) is None) == valid


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "oneOf": [{"required": ["a"]}]},
        {"$ref": "https://example.com/schema.json"},
        {"type": "tuple"},
        {"properties": {"a": {"enum": [1, 2]}}},
    ],
    ids=["oneOf", "remote ref", "unknown type", "nested enum"],
)
def test_a_schema_beyond_the_subset_is_left_to_jsonschema(schema):
    assert compile_check(schema) is None


def test_the_checkpoint_template_output_takes_the_fast_path(tmp_path):
    from orchestrator.templates import render_checkpoint

    text = render_checkpoint(VALID)
    assert compile_check(checkpoint_schema())(json.loads(text))
