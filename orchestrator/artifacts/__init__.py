"""The files the orchestrator leaves in the memory directory, one module per artifact.

* `plan`: `research_plans/{task_id}.md`, one per task, rewritten in place as work progresses.
* `findings`: `findings/{agent}_{ts}.md` per finished subagent, `findings/merged_{ts}.md`
  per merged batch.
* `snapshot`: `context_snapshots/snap_{ts}.md`, one per handoff.
* `checkpoint`: `checkpoints/cp_{phase}_{ts}.json`, the recovery points.

Each module owns its artifact's name, template input, rendering, writing, reading back and
listing, so a change to one artifact stays in its module; `render` (validated inputs,
markdown-safe values, template rendering) and `text` (the metadata line, sections) are
what they share. `ts` is UTC `YYYYMMDDTHHMMSSffffffZ` (`names.timestamp`), so names sort
by time. Every file is a document of the memory's backend (`documents.Docs`): new ones
are created with `Docs.create_unique`, so names never collide and an existing file is
never overwritten; every write is atomic. The writers take the memory as a `Docs`, a
`MemoryStore`, a backend or a `Layout`, and return `Docs.path` of what they wrote.

Each markdown file ends with an HTML comment carrying its values as JSON, so the readers
give back exactly what was written while the rest of the file stays plain, hand-editable
markdown.

The names below are importable from the package (loaded on first use, so importing one
artifact module does not load the others).
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "ArtifactError": "orchestrator.errors",
    "SnapshotError": "orchestrator.errors",
    "findings_text": "orchestrator.artifacts.findings",
    "iso_timestamp": "orchestrator.artifacts.names",
    "keep_hand_edits": "orchestrator.artifacts.plan",
    "list_findings": "orchestrator.artifacts.findings",
    "list_snapshots": "orchestrator.artifacts.snapshot",
    "name_timestamp": "orchestrator.artifacts.names",
    "new_suffix": "orchestrator.artifacts.names",
    "read_findings": "orchestrator.artifacts.findings",
    "read_merged": "orchestrator.artifacts.findings",
    "read_plan": "orchestrator.artifacts.plan",
    "read_snapshot": "orchestrator.artifacts.snapshot",
    "sections": "orchestrator.artifacts.text",
    "slug": "orchestrator.artifacts.names",
    "timestamp": "orchestrator.artifacts.names",
    "write_findings": "orchestrator.artifacts.findings",
    "write_merged": "orchestrator.artifacts.findings",
    "write_plan": "orchestrator.artifacts.plan",
    "write_snapshot": "orchestrator.artifacts.snapshot",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> object:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
