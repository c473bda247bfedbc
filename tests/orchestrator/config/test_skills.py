"""Skills: discovery (shipped + project), front-matter validation and the monitor triggers.

Covers `orchestrator.config.skills`: `discover_skills`, `skills_index`, `load_skill`,
`external_memory_triggers`, and the one-line `SkillError` for each kind of bad front matter.
"""

from __future__ import annotations

import pytest

from orchestrator.config import skills
from orchestrator.errors import SkillError


def _skill(project, name, text):
    folder = project / "skills" / name
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "SKILL.md"
    path.write_text(text, encoding="utf-8")
    return path


GOOD = "---\nname: {name}\ndescription: Does {name} things. Use it when testing.\n---\n\n# Body\n"


class TestDiscovery:
    def test_shipped_external_memory(self, tmp_path):
        found = skills.discover_skills(tmp_path)
        names = [s.name for s in found]
        assert "external-memory" in names
        skill = found[names.index("external-memory")]
        assert skill.source == "shipped"
        assert skill.path.name == "SKILL.md"
        assert "## When to use" in skill.body and "## Do not use" in skill.body
        assert not skill.body.startswith("---")

    def test_project_skills_are_added_and_win_on_name_clash(self, tmp_path):
        _skill(tmp_path, "zeta", GOOD.format(name="zeta"))
        _skill(tmp_path, "em", GOOD.format(name="external-memory"))
        found = {s.name: s for s in skills.discover_skills(tmp_path)}
        assert found["zeta"].source == "project"
        assert found["external-memory"].source == "project"
        assert found["external-memory"].description == (
            "Does external-memory things. Use it when testing."
        )
        assert [s.name for s in skills.discover_skills(tmp_path)] == sorted(found)

    def test_index_and_lazy_body(self, tmp_path):
        path = _skill(tmp_path, "alpha", GOOD.format(name="alpha"))
        found = [s for s in skills.discover_skills(tmp_path) if s.name == "alpha"]
        assert skills.skills_index(found) == "- alpha: Does alpha things. Use it when testing."
        path.write_text(GOOD.format(name="alpha").replace("# Body", "# Edited body"))
        assert found[0].body == "# Edited body\n"  # read on first use, not at discovery
        assert skills.load_skill("alpha", tmp_path) == "# Edited body\n"

    def test_unknown_skill(self, tmp_path):
        with pytest.raises(SkillError) as exc:
            skills.load_skill("nope", tmp_path)
        assert str(exc.value) == "unknown skill 'nope'; available: external-memory"

    def test_duplicate_project_names(self, tmp_path):
        _skill(tmp_path, "a", GOOD.format(name="same"))
        second = _skill(tmp_path, "b", GOOD.format(name="same"))
        with pytest.raises(SkillError) as exc:
            skills.discover_skills(tmp_path)
        first = tmp_path / "skills" / "a" / "SKILL.md"
        assert str(exc.value) == (
            f"skill file {str(second)!r}: name 'same' is also used by {str(first)!r}; "
            "give each skill its own name"
        )


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (
            "# no front matter\n",
            "has no YAML front matter; start it with a '---' line, 'name:' and 'description:', "
            "then another '---' line",
        ),
        (
            "---\nname: x\ndescription: y\n",
            ": front matter is not closed; add a '---' line after it",
        ),
        (
            "---\nname: [unclosed\ndescription: y\n---\n",
            ": invalid YAML front matter: expected ',' or ']', but got ':' at line 3",
        ),
        (
            "---\n- a\n- b\n---\n",
            ": front matter must be a mapping with 'name' and 'description', got list",
        ),
        ("---\ndescription: y\n---\n", ": front matter has no 'name'; add one"),
        ("---\nname: x\n---\n", ": front matter has no 'description'; add one"),
        ("---\nname: 42\ndescription: y\n---\n", ": 'name' must be a non-empty string, got 42"),
        (
            "---\nname: x\ndescription: ''\n---\n",
            ": 'description' must be a non-empty string, got ''",
        ),
        (
            "---\nname: Bad Name\ndescription: y\n---\n",
            ": name 'Bad Name' must be lowercase letters, digits and '-' (at most 64 characters)",
        ),
        (
            "---\nname: x\ndescription: y\ntriggers: 5\n---\n",
            ": 'triggers' must be a mapping, got int",
        ),
        (
            "---\nname: x\ndescription: y\ntriggers: [[1, 2]]\n---\n",
            ": trigger [1, 2] must be 'name: value'",
        ),
    ],
)
def test_invalid_front_matter_is_one_line_naming_the_file(tmp_path, text, problem):
    path = _skill(tmp_path, "broken", text)
    with pytest.raises(SkillError) as exc:
        skills.discover_skills(tmp_path)
    assert str(exc.value).startswith(f"skill file {str(path)!r}")
    assert str(exc.value) == f"skill file {str(path)!r}{' ' if problem[0] != ':' else ''}" + problem
    assert "\n" not in str(exc.value)


def test_an_edited_skill_is_read_again_and_parsed_values_are_not_shared(tmp_path):
    path = _skill(tmp_path, "notes", "---\nname: notes\ndescription: First.\n---\nBody\n")
    first = {s.name: s for s in skills.discover_skills(tmp_path)}["notes"]
    path.write_text("---\nname: notes\ndescription: Second.\n---\nBody\n")
    second = {s.name: s for s in skills.discover_skills(tmp_path)}["notes"]
    assert (first.description, second.description) == ("First.", "Second.")
    path.write_text("---\nname: notes\ndescription: First.\n---\nBody\n")
    again = {s.name: s for s in skills.discover_skills(tmp_path)}["notes"]
    assert again.description == "First." and again is not first


def test_not_utf8(tmp_path):
    path = _skill(tmp_path, "bin", "x")
    path.write_bytes(b"---\nname: \xff\n---\n")
    with pytest.raises(SkillError) as exc:
        skills.discover_skills(tmp_path)
    assert str(exc.value) == f"skill file {str(path)!r} is not UTF-8 text"


class TestTriggers:
    def test_shipped_defaults_match_seed_002(self, tmp_path):
        t = skills.external_memory_triggers(tmp_path)
        assert t == skills.Triggers(
            token_threshold=150_000,
            warning_ratio=0.8,
            phase_transition=True,
            agent_completion=True,
            before_spawning=True,
        )
        assert t.warning_tokens == 120_000

    def test_project_override_and_seed_list_form(self, tmp_path):
        _skill(
            tmp_path,
            "external-memory",
            "---\nname: external-memory\ndescription: mine\ntriggers:\n"
            "  - token_threshold: 5000\n  - warning_zone: 4000\n"
            "  - phase_transition: false\n---\n",
        )
        t = skills.external_memory_triggers(tmp_path)
        assert (t.token_threshold, t.warning_ratio, t.phase_transition, t.before_spawning) == (
            5000,
            0.8,
            False,
            True,
        )
        assert t.warning_tokens == 4000

    @pytest.mark.parametrize(
        ("triggers", "problem"),
        [
            ("token_threshold: 0", "token_threshold must be a positive integer, got 0"),
            ("token_threshold: '1000'", "token_threshold must be a positive integer, got '1000'"),
            ("token_threshold: true", "token_threshold must be a positive integer, got True"),
            ("warning_ratio: 1.5", "warning_ratio must be a number in (0, 1], got 1.5"),
            (
                "warning_zone: 200000",
                "warning_zone must be a token count between 1 and token_threshold (150000), "
                "got 200000",
            ),
            (
                "phase_transition: 'yes'",
                "trigger 'phase_transition' must be true or false, got 'yes'",
            ),
            (
                "token_treshold: 10",
                "unknown trigger 'token_treshold'; known: token_threshold, warning_ratio, "
                "warning_zone, phase_transition, agent_completion, before_spawning",
            ),
        ],
    )
    def test_invalid_triggers(self, tmp_path, triggers, problem):
        path = _skill(
            tmp_path,
            "external-memory",
            f"---\nname: external-memory\ndescription: d\ntriggers:\n  {triggers}\n---\n",
        )
        with pytest.raises(SkillError) as exc:
            skills.external_memory_triggers(tmp_path)
        assert str(exc.value) == f"skill file {str(path)!r}: {problem}"


def test_the_checkout_as_project_dir_is_not_a_duplicate():
    from memory.resources import shipped_dir

    found = skills.discover_skills(shipped_dir("skills").parent)
    assert [s.source for s in found if s.name == "external-memory"] == ["shipped"]
