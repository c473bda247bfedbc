"""Every shipped skill parses and its documentation is well-formed.

For each `skills/*/SKILL.md` shipped with tether: the front matter parses through
`orchestrator.config.skills`, the name matches the folder, the description says what the skill
is for and when to use it, the body has "When to use" and "Do not use" sections, every
`references/` file it mentions exists, and every fenced code block in the skill and its
references is well-formed (yaml/json parse, python compiles, bash passes `bash -n`).
"""

from __future__ import annotations

import ast
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from memory.resources import shipped_dir
from orchestrator.config import skills

SKILL_FILES = sorted(shipped_dir("skills").glob("*/SKILL.md"))
DOC_FILES = sorted({*SKILL_FILES, *shipped_dir("skills").glob("*/references/*.md")})
FENCE = re.compile(r"^```(?P<lang>[\w+-]*)\n(?P<body>.*?)^```\s*$", re.M | re.S)


def _id(path: Path) -> str:
    return str(path.relative_to(shipped_dir("skills")))


def test_there_are_shipped_skills():
    assert "external-memory" in [p.parent.name for p in SKILL_FILES]


@pytest.mark.parametrize("path", SKILL_FILES, ids=_id)
def test_front_matter(path):
    skill = skills.parse_skill(path)
    assert skill.name == path.parent.name
    assert len(skill.description) >= 40
    assert re.search(r"\buse (it|this)? ?when\b", skill.description, re.I), (
        "the description must say when to use the skill"
    )


@pytest.mark.parametrize("path", SKILL_FILES, ids=_id)
def test_body_sections_and_references(path):
    body = skills.parse_skill(path).body
    headings = re.findall(r"^## (.+)$", body, re.M)
    assert "When to use" in headings and "Do not use" in headings
    for ref in re.findall(r"`(references/[^`]+)`", body):
        assert (path.parent / ref).is_file(), f"{ref} is mentioned but missing"


def _blocks(path: Path) -> list[tuple[str, str]]:
    text = path.read_text(encoding="utf-8")
    if text.startswith("---\n"):
        text = text.split("\n---\n", 1)[1]
    blocks = [(m.group("lang"), m.group("body")) for m in FENCE.finditer(text)]
    fence_lines = re.findall(r"^```", text, re.M)
    assert len(fence_lines) == 2 * len(blocks), f"unbalanced code fences in {path.name}"
    return blocks


@pytest.mark.parametrize("path", DOC_FILES, ids=_id)
def test_code_blocks_are_well_formed(path):
    blocks = _blocks(path)
    for lang, body in blocks:
        if lang in {"yaml", "yml"}:
            yaml.safe_load(body)
        elif lang == "json":
            json.loads(body)
        elif lang == "python":
            ast.parse(body)
        elif lang in {"bash", "sh", "shell"} and shutil.which("bash"):
            result = subprocess.run(["bash", "-n"], input=body, text=True, capture_output=True)
            assert result.returncode == 0, result.stderr
        else:
            assert lang in {"", "text", "markdown", "md"}, f"unknown code block language {lang!r}"


def test_external_memory_triggers_configure_the_monitor():
    skill = skills.parse_skill(shipped_dir("skills") / "external-memory" / "SKILL.md")
    assert skill.triggers == {
        "token_threshold": 150000,
        "warning_ratio": 0.8,
        "phase_transition": True,
        "agent_completion": True,
        "before_spawning": True,
    }
