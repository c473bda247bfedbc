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
