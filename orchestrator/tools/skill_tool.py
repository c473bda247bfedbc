"""`read_skill(name)`: the body of a skill, for an agent whose prompt lists the skill.

An agent sees only the names and descriptions of the skills it may use (the lead every
skill, a subagent those its spec names in `skills`); it reads a body when it needs it, so
the instructions cost tokens only then. The tool refuses a skill the agent was not given.
"""

from __future__ import annotations

from collections.abc import Iterable

from langchain_core.tools import BaseTool, tool

from orchestrator.config.skills import load_skill
from orchestrator.errors import SkillError

MAX_SKILL_CHARS = 20_000


def skill_tool(names: Iterable[str], project_dir: str) -> BaseTool:
    """`read_skill` over the skills `names` (shipped or the project's)."""
    allowed = sorted(set(names))

    @tool
    def read_skill(name: str) -> str:
        """Read the instructions of one of your skills, by its name."""
        if name not in allowed:
            return f"Error: no skill {name!r} here; yours: {', '.join(allowed) or 'none'}"
        try:
            body = load_skill(name, project_dir)
        except SkillError as exc:
            return f"Error: {exc}"
        if len(body) > MAX_SKILL_CHARS:
            body = body[:MAX_SKILL_CHARS] + "\n[... cut: the skill file holds the rest]"
        return body

    return read_skill
