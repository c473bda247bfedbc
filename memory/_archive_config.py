"""A task's summary settings, persisted in `working/{task}/summary.json` (see `memory.archive`).

The file is optional: a missing or garbled one means the defaults, and a threshold read from
it is clamped to 1..`MAX_THRESHOLD`, so a hand-edited file never stops the archive. Writes go
through `backend.update_document`, so two writers never lose each other's change.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from memory.errors import InvalidInputError

DEFAULT_THRESHOLD = 10
MAX_THRESHOLD = 500
CONFIG_NAME = "summary.json"


@dataclass
class SummaryConfig:
    """Per-task settings, persisted in `working/{task}/summary.json`."""

    enabled: bool = True
    threshold: int = DEFAULT_THRESHOLD


def read_config(backend: Any, doc: str) -> SummaryConfig:
    """The task's settings; a missing or garbled `summary.json` means the defaults."""
    try:
        data = json.loads(backend.read_text(doc) or "")
        threshold = int(data.get("threshold", DEFAULT_THRESHOLD))
        enabled = data.get("enabled", True)
    except (ValueError, TypeError, AttributeError):
        return SummaryConfig()
    return SummaryConfig(
        enabled=enabled is not False, threshold=min(max(threshold, 1), MAX_THRESHOLD)
    )


def write_config(
    backend: Any, doc: str, *, enabled: bool | None, threshold: int | None
) -> SummaryConfig:
    """Change and persist the task's settings; returns the new ones."""
    if threshold is not None and not 1 <= threshold <= MAX_THRESHOLD:
        raise InvalidInputError(
            f"threshold {threshold!r} out of range: give 1 to {MAX_THRESHOLD} user turns"
        )
    result: list[SummaryConfig] = []

    def edit(_old: bytes | None) -> bytes:
        cfg = read_config(backend, doc)
        if enabled is not None:
            cfg.enabled = enabled
        if threshold is not None:
            cfg.threshold = threshold
        result[:] = [cfg]
        data = {"enabled": cfg.enabled, "threshold": cfg.threshold}
        return (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode("utf-8")

    backend.update_document(doc, edit)
    cfg = result[0]
    return cfg
