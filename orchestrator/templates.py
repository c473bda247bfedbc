"""Former home of the renderers; each now lives with its artifact (`orchestrator.artifacts`).

Kept so `from orchestrator.templates import ...` goes on working: rendering helpers are in
`orchestrator.artifacts._render`, the inputs and `render_*` functions in the artifact's own
module (`plan`, `findings`, `snapshot`, `checkpoint`).
"""

from __future__ import annotations

from orchestrator.artifacts._render import (
    FileNoteInput,
    Pathish,
    md_block,
    md_code,
    md_inline,
    render_template,
    validate_input,
)
from orchestrator.artifacts._text import loads_strict
from orchestrator.artifacts.checkpoint import (
    CHECKPOINT_TEMPLATE,
    SCHEMA_PATH,
    checkpoint_schema,
    checkpoint_schema_problem,
    render_checkpoint,
)
from orchestrator.artifacts.findings import (
    FINDINGS_TEMPLATE,
    MERGED_TEMPLATE,
    FindingsInput,
    MergedFindingInput,
    MergedInput,
    finding_views,
    render_findings,
    render_merged,
)
from orchestrator.artifacts.plan import PLAN_TEMPLATE, PlanInput, QuestionInput, render_plan
from orchestrator.artifacts.snapshot import SNAPSHOT_TEMPLATE, SnapshotInput, render_snapshot
from orchestrator.types import JsonObject, _json_problem

__all__ = [
    "CHECKPOINT_TEMPLATE",
    "FINDINGS_TEMPLATE",
    "MERGED_TEMPLATE",
    "PLAN_TEMPLATE",
    "SCHEMA_PATH",
    "SNAPSHOT_TEMPLATE",
    "FileNoteInput",
    "FindingsInput",
    "JsonObject",
    "MergedFindingInput",
    "MergedInput",
    "Pathish",
    "PlanInput",
    "QuestionInput",
    "SnapshotInput",
    "_json_problem",
    "checkpoint_schema",
    "checkpoint_schema_problem",
    "finding_views",
    "loads_strict",
    "md_block",
    "md_code",
    "md_inline",
    "render_checkpoint",
    "render_findings",
    "render_merged",
    "render_plan",
    "render_snapshot",
    "render_template",
    "validate_input",
]
