"""Untrusted YAML (a project's `SKILL.md` front matter, a workflow file) is parsed within limits.

Covers the bounded loader (`orchestrator.config.load_yaml`) and its two callers: an alias
bomb, a nesting bomb, a recursive alias and an oversized text are each one `Error:` line
naming the file, the limit and the line, never the expanded value; ordinary YAML (aliases
included) loads as before. The bombs run through the console script in a child process
whose address space is capped, so a parser without limits fails the test quickly instead of
exhausting the machine.
"""

from __future__ import annotations

import resource
import subprocess
import sys

import pytest
import yaml

from orchestrator.config import LimitError, load_yaml
from orchestrator.config.skills import parse_skill
from orchestrator.config.workflow import load_workflow
from orchestrator.errors import SkillError, WorkflowError

#: 9 levels of 9 aliases: 9**9 (387 million) strings once expanded, from 400 bytes of text.
ALIAS_BOMB = "".join(
    f"{a}: &{a} [{', '.join([f'*{p}'] * 9) if p else ', '.join(['lol'] * 9)}]\n"
    for p, a in zip(["", *"abcdefgh"], "abcdefghi", strict=True)
)
NEST_BOMB = "[" * 5000 + "]" * 5000
ADDRESS_SPACE = 1 << 30  # the child process may map 1 GiB at most


def _capped() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))


def _orchestrator(args, cwd, env):
    boot = "import sys; sys.argv[0] = 'orchestrator'; from orchestrator.cli.app import main; main()"
    return subprocess.run(
        [sys.executable, "-c", boot, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=_capped,
    )


def _skill(project, front):
    folder = project / "skills" / "bomb"
    folder.mkdir(parents=True)
    path = folder / "SKILL.md"
    path.write_text(f"---\n{front}---\n\n# Body\n", encoding="utf-8")
    return path


BOMBS = [
    ("alias", ALIAS_BOMB + "name: *i\ndescription: d\n", "aliases expand past 10,000 nodes"),
    ("nesting", f"name: x\ndescription: {NEST_BOMB}\n", "nested deeper than 64 levels"),
]


@pytest.mark.parametrize(("kind", "front", "problem"), BOMBS)
def test_a_bomb_in_a_project_skill_is_one_error_line(kind, front, problem, tmp_path, cli_env):
    path = _skill(tmp_path, front)
    done = _orchestrator(["run", "Survey", "--workdir", "."], tmp_path, cli_env)
    assert done.returncode == 1, done.stderr[-2000:]
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr[-2000:]
    assert lines[0].startswith(
        f"Error: skill file {str(path)!r}: invalid YAML front matter: {problem} at line "
    )
    assert "lol" not in lines[0] and len(lines[0]) < 400
    assert not (tmp_path / "memory").exists()


@pytest.mark.parametrize(("kind", "text", "problem"), [
    ("alias", ALIAS_BOMB + "phases: *i\n", "aliases expand past 10,000 nodes"),
    ("nesting", f"phases: {NEST_BOMB}\n", "nested deeper than 64 levels"),
])  # fmt: skip
def test_a_bomb_in_a_workflow_file_is_one_error_line(kind, text, problem, tmp_path, cli_env):
    (tmp_path / "wf.yaml").write_text(text, encoding="utf-8")
    done = _orchestrator(["run", "Survey", "--workflow", "wf.yaml"], tmp_path, cli_env)
    assert done.returncode == 1, done.stderr[-2000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr[-2000:]
    assert lines[0].startswith(f"Error: workflow file 'wf.yaml': malformed YAML: {problem} at line")
    assert "lol" not in lines[0] and len(lines[0]) < 400
    assert not (tmp_path / "memory").exists()


class TestLimits:
    def test_ordinary_aliases_still_load(self, tmp_path):
        path = tmp_path / "wf.yaml"
        path.write_text(
            "phases: [explore, review]\n"
            "agents:\n"
            "  a: {description: A reads., tools: &tools [read_file, grep_files]}\n"
            "  b: {description: B reads., tools: *tools}\n",
            encoding="utf-8",
        )
        wf = load_workflow(path, tmp_path)
        assert wf.agents["a"].tools == wf.agents["b"].tools == ["read_file", "grep_files"]

    def test_a_recursive_alias_is_refused(self):
        with pytest.raises(LimitError) as caught:
            load_yaml("a: &a [1, *a]\n")
        assert caught.value.problem == "an alias refers to a node that contains it"

    def test_limits_are_exact(self):
        assert load_yaml("[" * 64 + "]" * 64) is not None
        with pytest.raises(LimitError, match="nested deeper than 64 levels"):
            load_yaml("[" * 65 + "]" * 65)

        def wide(n):  # 1 + (1 + 10) + (1 + 1 + 10 * n) nodes once expanded
            return "a: &a [" + ", ".join("x" * 9) + "]\nb: [" + ", ".join(["*a"] * n) + "]\n"

        assert len(load_yaml(wide(998))["b"]) == 998  # 9,994 nodes
        with pytest.raises(LimitError, match="aliases expand past 10,000 nodes"):
            load_yaml(wide(999))  # 10,004

    def test_long_scalars_repeated_by_aliases_count_as_characters(self):
        text = f"a: &a {'x' * 20_000}\nb: [{', '.join(['*a'] * 60)}]\n"
        with pytest.raises(LimitError, match="characters"):
            load_yaml(text)

    def test_an_oversized_text_is_refused_before_parsing(self, tmp_path):
        path = _skill(tmp_path, "name: big\ndescription: " + "y" * (1 << 20) + "\n")
        with pytest.raises(SkillError) as caught:
            parse_skill(path, "project")
        assert "characters; at most 1,048,576" in str(caught.value)

    def test_errors_show_a_short_form_of_a_big_value(self, tmp_path):
        path = _skill(tmp_path, "name: [" + ", ".join(["word"] * 2000) + "]\ndescription: d\n")
        with pytest.raises(SkillError) as caught:
            parse_skill(path, "project")
        assert str(caught.value) == (
            f"skill file {str(path)!r}: 'name' must be a non-empty string, "
            "got ['word', 'word', 'word', 'word', ...]"
        )

    def test_duplicate_keys_in_a_workflow_are_still_refused(self, tmp_path):
        path = tmp_path / "wf.yaml"
        path.write_text("phases: [a]\nphases: [b]\n", encoding="utf-8")
        with pytest.raises(WorkflowError, match="duplicate key 'phases'"):
            load_workflow(path, tmp_path)

    def test_a_limit_error_is_a_yaml_error(self):
        assert issubclass(LimitError, yaml.YAMLError)
