"""The one typed model of a finding (`orchestrator.types`) and its views.

The final-answer tool, the template inputs of the findings and merged files, the merged
record's fields and the texts the graph state leaves out are all derived from `Finding`;
a field added to `Finding` (here in a subprocess, by editing the module's source) shows
up in each of them, in the files' metadata, in a merged batch's line and in a snapshot's
digest (an `Inline` field) with no other change. The JSON checkpoint holds no
finding entries (only the paths of findings files: `findings`, `completed_findings`), so
its schema does not change with `Finding`; its subtask entries are a view of `Subtask`, and
a field added to `Subtask` reaches the lead's tool and the checkpoint schema.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from orchestrator import types as types_module
from orchestrator.artifacts.checkpoint_model import checkpoint_json_schema
from orchestrator.artifacts.findings import FindingsInput, MergedFindingInput
from orchestrator.artifacts.plan import PlanInput
from orchestrator.state import LEAD_FIELDS, OrchestratorState
from orchestrator.types import (
    MERGED_FIELDS,
    RECORDED,
    TEXT_FIELDS,
    Finding,
    PhasePlan,
    Plan,
    SubmitFindings,
    Subtask,
)

IDENTITY = {"agent", "task", "subtask_id", "task_id", "phase", "timestamp"}


class TestViews:
    def test_the_tool_is_the_finding_but_what_tether_records(self):
        assert list(SubmitFindings.model_fields) == [
            k for k in Finding.model_fields if k not in RECORDED
        ]
        tool = SubmitFindings.model_json_schema()
        model = Finding.model_json_schema()
        for name, schema in tool["properties"].items():
            assert schema == model["properties"][name]
        assert tool["title"] == "SubmitFindings" and tool["required"] == ["summary"]

    def test_template_inputs_and_records_have_every_finding_field(self):
        fields = set(Finding.model_fields)
        assert set(FindingsInput.model_fields) == fields | IDENTITY
        assert set(MergedFindingInput.model_fields) == fields | IDENTITY | {"path"}
        assert set(MERGED_FIELDS) == fields | {"agent", "path", "phase"}
        assert set(TEXT_FIELDS) == fields - {"status"}

    def test_phase_plan_subtasks_are_the_subtask_model(self):
        schema = PhasePlan.model_json_schema()
        assert schema["$defs"]["Subtask"] == Subtask.model_json_schema()

    def test_the_lead_plan_tool_the_plan_file_and_the_state_share_plan(self):
        fields = set(Plan.model_fields)
        assert issubclass(PhasePlan, Plan)
        assert fields <= set(PlanInput.model_fields)
        assert fields <= set(LEAD_FIELDS)  # a checkpoint's `extra` carries them
        assert fields <= set(OrchestratorState.__annotations__)

    def test_checkpoint_subtask_entries_are_subtasks(self):
        entry = checkpoint_json_schema()["$defs"]["SubtaskEntry"]
        assert list(entry["properties"]) == [*Subtask.model_fields, "phase", "key"]
        assert entry["required"] == ["id"] and entry["additionalProperties"] is True
        for name, schema in Subtask.model_json_schema()["properties"].items():
            assert entry["properties"][name]["type"] == schema["type"]


ANCHOR = "    recommendations: list[str] = Field(default_factory=list)\n"
ADDED = (
    "    confidence: Annotated[str | None, Inline] = Field(default=None, description='how sure')\n"
)

PROBE = """
import json, sys, tempfile, types
path = {path!r}
src = open(path).read()
assert src.count({anchor!r}) == 1
mod = types.ModuleType("orchestrator.types")
mod.__file__ = path
sys.modules["orchestrator.types"] = mod
exec(compile(src.replace({anchor!r}, {anchor!r} + {added!r}), path, "exec"), mod.__dict__)

from orchestrator.types import SubmitFindings
from orchestrator.artifacts.findings import FindingsInput, MergedFindingInput
from orchestrator.artifacts.plan import PlanInput
from orchestrator.types import MERGED_FIELDS
from orchestrator.artifacts.finding import FindingRecord
from orchestrator.artifacts.checkpoint_model import checkpoint_json_schema
from orchestrator.types import TEXT_FIELDS
from orchestrator.artifacts import read_findings, read_merged, write_findings, write_merged
from orchestrator.artifacts.snapshot_content import what_was_found

answer = SubmitFindings(summary="s", confidence="high").model_dump()
memory = tempfile.mkdtemp()
written = write_findings(memory, "a", task="t", **answer)
record = FindingRecord.expand("p/a", {{"path": "x", "agent": "a"}}, {{"findings": answer}},
                              lambda p: None)
merged = write_merged(memory, "t", "p", [record.merged_input("t")])
print(json.dumps({{
    "tool": "confidence" in SubmitFindings.model_json_schema()["properties"],
    "inputs": "confidence" in FindingsInput.model_fields
              and "confidence" in MergedFindingInput.model_fields,
    "merged_fields": "confidence" in MERGED_FIELDS,
    "texts": "confidence" in TEXT_FIELDS,
    "record": record.confidence,
    "file": read_findings(written).get("confidence"),
    "merged": read_merged(merged)["findings"][0].get("confidence"),
    "merged_line": "(completed, high)" in read_merged(merged)["text"],
    "digest": "- p/a (completed, high)" in what_was_found([record]),
}}))
"""


def test_a_field_added_to_finding_reaches_every_view():
    code = PROBE.format(path=types_module.__file__, anchor=ANCHOR, added=ADDED)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "tool": True,
        "inputs": True,
        "merged_fields": True,
        "texts": True,
        "record": "high",
        "file": "high",
        "merged": "high",
        "merged_line": True,
        "digest": True,
    }
    assert Path(types_module.__file__).read_text().count(ANCHOR) == 1


def test_artifacts_package_exports_resolve():
    """`orchestrator.artifacts` keeps the names its single module had (loaded lazily)."""
    import orchestrator.artifacts as artifacts

    assert artifacts.__all__ == sorted(artifacts.__all__)
    for name in artifacts.__all__:
        assert getattr(artifacts, name) is not None


SUBTASK_ANCHOR = "    scope: list[str] = Field(\n"
SUBTASK_PROBE = """
import json, sys, types
path = {path!r}
src = open(path).read()
assert src.count({anchor!r}) == 1
mod = types.ModuleType("orchestrator.types")
mod.__file__ = path
sys.modules["orchestrator.types"] = mod
added = "    priority: int = Field(default=0, description='higher first')\\n"
exec(compile(src.replace({anchor!r}, added + {anchor!r}), path, "exec"), mod.__dict__)

from orchestrator.artifacts.checkpoint_model import checkpoint_json_schema
from orchestrator.types import PhasePlan
print(json.dumps([
    "priority" in PhasePlan.model_json_schema()["$defs"]["Subtask"]["properties"],
    "priority" in checkpoint_json_schema()["$defs"]["SubtaskEntry"]["properties"],
]))
"""


def test_a_field_added_to_subtask_reaches_the_tool_and_the_checkpoint_schema():
    code = SUBTASK_PROBE.format(path=types_module.__file__, anchor=SUBTASK_ANCHOR)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [True, True]
