"""Checking a checkpoint against the shipped schema (`checkpoint_schema_problem`).

A `fastjsonschema` validator answers first and `jsonschema` words a problem; on every kind
of document the answer must be the one `jsonschema` gives.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys

import jsonschema
import pytest

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
def test_the_answer_is_jsonschemas(name, doc):
    """Whichever validator answers, a document is accepted exactly when `jsonschema`
    accepts it (the compiled one follows draft 7, where a `$ref` hides its siblings such
    as the `minItems` of `phases`)."""
    valid = jsonschema.Draft202012Validator(checkpoint_schema()).is_valid(doc)
    problem = checkpoint_schema_problem(doc)
    assert (problem is None) == valid, name
    if not valid:
        assert problem.startswith("at ")  # worded by jsonschema: where, then what


def test_what_tether_writes_is_valid():
    from orchestrator.templates import render_checkpoint

    assert checkpoint_schema_problem(json.loads(render_checkpoint(VALID))) is None


def test_the_compiled_validator_kept_for_new_processes_answers_the_same(tmp_path):
    # the compiled validator is cached in a private folder of the temp dir for the next
    # process; a cached one, and a damaged cache file, must give the same answers
    script = (
        "import json, sys; from tests.orchestrator.test_checkpoint_schema import CASES; "
        "from orchestrator.templates import checkpoint_schema_problem as p; "
        "print(json.dumps([p(doc) is None for _, doc in CASES]))"
    )
    expected = [
        jsonschema.Draft202012Validator(checkpoint_schema()).is_valid(doc) for _, doc in CASES
    ]
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    answers = []
    for damage in (False, False, True):
        if damage:
            for cached in tmp_path.glob("tether-cache-*/checkpoint-validator-*"):
                cached.write_bytes(b"\x00 not marshal data")
        done = subprocess.run(
            [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
        )
        answers.append(json.loads(done.stdout))
    assert list(tmp_path.glob("tether-cache-*/checkpoint-validator-*"))  # it was kept
    assert answers == [expected] * 3
