"""Where tether's shipped templates and skills are, installed or in a checkout.

A wheel carries them as `orchestrator/_shipped/{templates,skills}`; an editable install or
a plain checkout has them at the repository root (`templates/`, `skills/`). A project
overrides or extends them with its own `templates/` and `skills/` folders (by default in
the current directory).
"""

from __future__ import annotations

from pathlib import Path

_REPO_OR_SITE = Path(__file__).resolve().parent.parent


def shipped_dir(kind: str) -> Path:
    """The shipped `templates` or `skills` folder."""
    if kind not in {"templates", "skills"}:
        raise ValueError(f"unknown resource kind {kind!r}")
    installed = _REPO_OR_SITE / "orchestrator" / "_shipped" / kind
    if installed.is_dir():
        return installed
    return _REPO_OR_SITE / kind
