"""What a run is configured by: settings, defaults, skills, the workflow and its agents.

* `settings`: the one place where each option gets its value (default, skill, workflow,
  environment, flag), with the error naming where a bad value was set.
* `defaults`: the values a run falls back on.
* `skills`: `SKILL.md` files with YAML front matter, shipped or a project's own.
* `workflow`: phases, agents (`AgentSpec`), thresholds and model, from an optional YAML file.
* `_yaml`: bounded YAML parsing for the files a project supplies.

Invariant: nothing here runs a model, a tool or the graph; configuration is data, read
within limits, and every bad value is one `WorkflowError` or `SkillError` line.
May import: `orchestrator.artifacts`, `orchestrator.types`, `orchestrator.errors`, `memory`.
"""

from __future__ import annotations

import importlib

#: Public name -> `module` or `module:attribute` it is loaded from (on first use, so importing
#: one module of the package does not load the others).
_EXPORTS = {
    "LimitError": "orchestrator.config._yaml",
    "load_yaml": "orchestrator.config._yaml:load",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> object:
    source = _EXPORTS.get(name)
    if source is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, _, attribute = source.partition(":")
    value = getattr(importlib.import_module(module), attribute or name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
