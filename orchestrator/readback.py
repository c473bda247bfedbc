"""Former home of the readers; each now lives with its artifact (`orchestrator.artifacts`).

Kept so `from orchestrator.readback import ...` goes on working: the metadata line and
sections are `orchestrator.artifacts._text`'s, the readers and listings their artifact
module's (`plan`, `findings`, `snapshot`, `checkpoint`).
"""

from __future__ import annotations

from orchestrator.artifacts._text import body_text, loads_strict, parse_meta, sections, strip_meta
from orchestrator.artifacts.checkpoint import checkpoint_infos, list_checkpoints, task_of
from orchestrator.artifacts.findings import findings_meta, list_findings, read_findings, read_merged
from orchestrator.artifacts.plan import read_plan
from orchestrator.artifacts.snapshot import SNAPSHOT_KEYS, list_snapshots, read_snapshot

__all__ = [
    "SNAPSHOT_KEYS",
    "body_text",
    "checkpoint_infos",
    "findings_meta",
    "list_checkpoints",
    "list_findings",
    "list_snapshots",
    "loads_strict",
    "parse_meta",
    "read_findings",
    "read_merged",
    "read_plan",
    "read_snapshot",
    "sections",
    "strip_meta",
    "task_of",
]
