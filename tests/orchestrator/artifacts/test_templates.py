"""Rendering artifacts: validated inputs, markdown that stays markdown, JSON that validates.

Covers `orchestrator.artifacts` through the public writers (`orchestrator.artifacts`,
`orchestrator.artifacts.checkpoint`): hostile strings round-trip into valid JSON and readable
markdown, project `templates/` override shipped ones, and every failure is a one-line
`TemplateError`.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys

import jsonschema
import pytest

from memory.paths import Layout
from memory.resources import shipped_dir
from orchestrator import artifacts
from orchestrator.artifacts import checkpoint as checkpoints
from orchestrator.artifacts import render as _render
from orchestrator.artifacts import text as _text
from orchestrator.artifacts.checkpoint_model import Checkpoint, CheckpointState
from orchestrator.artifacts.findings import render_findings
from orchestrator.errors import TemplateError

NASTY = [
    "say \"hi\" and 'bye'",
    "back\\slash \\n not a newline \\u0041",
    "line one\nline two\n\nafter a blank line",
    "unicode: é ü 漢字 🚀 \u2028 \u0000 nul",
    "{{ objective }} and {% if true %}x{% endif %} and {# c #}",
    "</script><script>alert(1)</script> & <b>",
    "--> closing a comment <!-- opening one",
    "## Fake heading\n# another\n---\n===",
    "```python\nunclosed fence",
]


@pytest.fixture
def layout(memory_dir):
    return Layout(memory_dir).ensure()


def _schema():
    return json.loads(checkpoints.SCHEMA_PATH.read_text())


class TestCheckpointJson:
    @pytest.mark.parametrize("text", NASTY)
    def test_hostile_strings_round_trip_into_valid_json(self, layout, text):
        cp = Checkpoint(
            task_id="t1",
            phase="exploration",
            objective=text,
            context_summary=text,
            next_action=text,
            state=CheckpointState(completed_subtasks=[text], findings_count=1),
            subtasks=[{"id": "s1", "title": text, "scope": [text]}],
            completed_findings={text: text},
            extra={"note": text, "nested": [{"k": text}]},
        )
        path = checkpoints.write_checkpoint(layout, cp)
        obj = json.loads(path.read_text(encoding="utf-8"))
        jsonschema.validate(obj, _schema())
        assert obj["objective"] == text
        assert obj["state"]["completed_subtasks"] == [text]
        assert obj["subtasks"][0]["title"] == text
        assert obj["completed_findings"] == {text: text}
        assert obj["extra"]["nested"][0]["k"] == text
        assert "</script>" not in path.read_text(encoding="utf-8")  # tojson escapes < and >

    def test_override_without_tojson_is_rejected(self, layout, tmp_path):
        (tmp_path / "templates").mkdir()
        shipped = (shipped_dir("templates") / "checkpoint.json.j2").read_text()
        broken = shipped.replace("{{ objective | tojson }}", '"{{ objective }}"')
        (tmp_path / "templates" / "checkpoint.json.j2").write_text(broken)
        cp = Checkpoint(task_id="t1", phase="p", objective='has "quotes"')
        with pytest.raises(TemplateError) as exc:
            checkpoints.write_checkpoint(layout, cp, project_dir=tmp_path)
        assert str(exc.value).startswith(
            "template 'checkpoint.json.j2' produced invalid JSON (Expecting ',' delimiter: "
        )
        assert str(exc.value).endswith("; pass every value through `tojson`")
        assert list(layout.checkpoints.glob("*.json")) == []

    def test_override_dropping_a_field_fails_the_schema(self, layout, tmp_path):
        (tmp_path / "templates").mkdir()
        shipped = (shipped_dir("templates") / "checkpoint.json.j2").read_text()
        broken = re.sub(r'\n  "next_action": .*\n', "\n", shipped)
        (tmp_path / "templates" / "checkpoint.json.j2").write_text(broken)
        with pytest.raises(TemplateError) as exc:
            checkpoints.write_checkpoint(
                layout, Checkpoint(task_id="t1", phase="p"), project_dir=tmp_path
            )
        assert str(exc.value).startswith(
            "template 'checkpoint.json.j2' output fails the checkpoint schema at '(top level)': "
            "'next_action' is a required property; fix the template or compare it with "
        )
        assert list(layout.checkpoints.glob("*.json")) == []

    def test_non_finite_numbers_are_refused(self):
        with pytest.raises(ValueError, match="NaN is not valid JSON"):
            _text.loads_strict('{"a": NaN}')


class TestMarkdown:
    @pytest.mark.parametrize("text", NASTY)
    def test_findings_values_round_trip_and_stay_text(self, layout, text):
        path = artifacts.write_findings(
            layout,
            "researcher",
            task=text,
            summary=text,
            key_discoveries=[text, "plain"],
            files=[(text, text)],
            open_questions=[text],
            recommendations=[text],
        )
        back = artifacts.read_findings(path)
        assert back["task"] == text and back["summary"] == text
        assert back["key_discoveries"] == [text, "plain"]
        assert back["files"] == [{"path": text, "description": text}]
        body = path.read_text(encoding="utf-8")
        # the plan's sections are all there, once, and no value added a section
        assert re.findall(r"^## .*$", body, re.M) == [
            "## Summary",
            "## Key Discoveries",
            "## Files Examined",
            "## Open Questions",
            "## Recommendations",
        ]
        assert re.findall(r"^# .*$", body, re.M)[0] == "# Findings: researcher"
        visible = body.split("<!-- tether:")[0]
        fences = re.findall(r"^\s*```", visible, re.M)
        assert len(fences) % 2 == 0  # every fence a value opened is closed

    def test_jinja_syntax_in_values_is_not_evaluated(self, layout):
        path = artifacts.write_findings(
            layout, "a", task="t", summary="{{ 7 * 6 }} {% for x in [1] %}loop{% endfor %}"
        )
        text = path.read_text(encoding="utf-8")
        assert "\n## Summary\n{{ 7 * 6 }} {% for x in [1] %}loop{% endfor %}\n\n" in text

    def test_multiline_list_items_stay_inside_their_item(self, layout):
        path = artifacts.write_findings(
            layout,
            "a",
            task="t",
            summary="s",
            key_discoveries=["first line\nsecond line\n\nnew paragraph", "next item"],
            open_questions=["q1\n- not a new item"],
        )
        text = path.read_text(encoding="utf-8")
        assert "1. first line\n    second line\n\n    new paragraph\n2. next item\n" in text
        assert "- q1\n  - not a new item\n" in text

    def test_block_values_cannot_add_headings(self, layout):
        path = artifacts.write_findings(layout, "a", task="t", summary="x\n## Injected\n---")
        text = path.read_text(encoding="utf-8")
        assert "## Summary\nx\n\\## Injected\n\\---\n" in text

    def test_inline_values_are_folded_to_one_line(self, layout):
        path = artifacts.write_findings(layout, "a\nb", task="line1\n# line2", summary="s")
        text = path.read_text(encoding="utf-8")
        assert text.startswith("# Findings: a b\n**Task**: line1 # line2\n**Timestamp**: ")

    def test_code_spans_survive_backticks(self):
        assert _render.md_code("a`b.py") == "``a`b.py``"
        assert _render.md_code("`x`") == "`` `x` ``"
        assert _render.md_code("plain.py") == "`plain.py`"


class TestOverridesAndErrors:
    def test_project_template_overrides_shipped(self, layout, tmp_path):
        (tmp_path / "templates").mkdir()
        (tmp_path / "templates" / "findings.md.j2").write_text(
            "CUSTOM {{ agent }}: {{ summary }}\n<!-- tether:findings {{ meta | tojson }} -->\n"
        )
        path = artifacts.write_findings(layout, "a", task="t", summary="s", project_dir=tmp_path)
        assert path.read_text().startswith("CUSTOM a: s\n")
        assert artifacts.read_findings(path)["summary"] == "s"

    def test_an_edited_override_is_used_by_the_next_process(self, tmp_path):
        # compiled templates are cached between processes; an edit must still show at once
        # (same size and same second: only the source itself tells the versions apart)
        (tmp_path / "templates").mkdir()
        override = tmp_path / "templates" / "findings.md.j2"
        script = (
            "import sys; from pathlib import Path; from orchestrator import artifacts; "
            "p = artifacts.write_findings(sys.argv[1], 'a', task='t', summary='s', "
            "project_dir=sys.argv[2]); print(Path(p).read_text().splitlines()[0])"
        )
        seen = []
        for version in ("ONE", "TWO", "ONE"):
            override.write_text(
                f"{version} {{{{ agent }}}}\n<!-- tether:findings {{{{ meta | tojson }}}} -->\n"
            )
            os.utime(override, (1_700_000_000, 1_700_000_000))
            done = subprocess.run(
                [sys.executable, "-c", script, str(tmp_path / "memory"), str(tmp_path)],
                capture_output=True, text=True, check=True,
            )  # fmt: skip
            seen.append(done.stdout.strip())
        assert seen == ["ONE a", "TWO a", "ONE a"]

    def test_override_may_indent_its_json(self, layout, tmp_path):
        # `tojson(indent=N)` goes through the standard encoder (orjson has no indent width)
        shipped = (shipped_dir("templates") / "checkpoint.json.j2").read_text()
        (tmp_path / "templates").mkdir()
        (tmp_path / "templates" / "checkpoint.json.j2").write_text(
            shipped.replace("{{ subtasks | tojson }}", "{{ subtasks | tojson(indent=2) }}")
        )
        subtasks = [{"id": "a", "title": "A"}]
        cp = {"task_id": "t", "phase": "p", "subtasks": subtasks, "extra": {"ratio": math.nan}}
        path = checkpoints.write_checkpoint(layout, cp, project_dir=tmp_path)
        text = path.read_text()
        assert '"subtasks": [\n  {\n    "id": "a",\n    "title": "A"\n  }\n]' in text
        # NaN is no JSON value: `tojson` writes null rather than a file no parser reads
        assert json.loads(text)["extra"] == {"ratio": None}

    def test_undefined_variable_in_override_is_an_error(self, layout, tmp_path):
        (tmp_path / "templates").mkdir()
        (tmp_path / "templates" / "snapshot.md.j2").write_text("{{ no_such_value }}\n")
        with pytest.raises(TemplateError) as exc:
            artifacts.write_snapshot(layout, task_id="t", phase="p", project_dir=tmp_path)
        assert str(exc.value) == "template 'snapshot.md.j2': 'no_such_value' is undefined"
        assert list(layout.context_snapshots.iterdir()) == []

    def test_unsafe_override_is_refused(self, layout, tmp_path):
        (tmp_path / "templates").mkdir()
        (tmp_path / "templates" / "findings.md.j2").write_text("{{ agent.__class__.__mro__ }}\n")
        with pytest.raises(TemplateError, match="tried an unsafe operation"):
            artifacts.write_findings(layout, "a", task="t", summary="s", project_dir=tmp_path)

    @pytest.mark.parametrize(
        ("data", "message"),
        [
            (
                {"agent": "a", "task": "t", "timestamp": "x"},
                "invalid input for template 'findings.md.j2': field 'summary': Field required",
            ),
            (
                {"agent": "a", "task": "t", "summary": "s", "timestamp": "x", "sumary": "typo"},
                "invalid input for template 'findings.md.j2': field 'sumary': "
                "Extra inputs are not permitted",
            ),
            (
                {"agent": "a", "task": "t", "summary": 3, "timestamp": "x"},
                "invalid input for template 'findings.md.j2': field 'summary': "
                "Input should be a valid string",
            ),
            (
                {"agent": "a", "task": "t", "summary": "s", "timestamp": "x", "files": [("p",)]},
                "invalid input for template 'findings.md.j2': field 'files.0': "
                "Input should be a valid dictionary or instance of FileNoteInput",
            ),
        ],
    )
    def test_bad_input_is_one_line(self, data, message):
        with pytest.raises(TemplateError) as exc:
            render_findings(data)
        assert str(exc.value) == message

    def test_unknown_template(self):
        with pytest.raises(TemplateError) as exc:
            _render.render_template("nope.md.j2")
        assert str(exc.value) == (
            "template 'nope.md.j2' not found in the project's templates/ or tether's"
        )


class TestFuzz:
    """Seeded random strings built from the characters that break templates."""

    POOL = list("ab #-=*_`~<>/\\\"'{}%!|\n\r\t\x00\x7f") + [
        "é",
        "漢",
        "🚀",
        "\u2028",
        "{{",
        "{%",
        "-->",
    ]

    def _strings(self, n, seed):
        import random

        rng = random.Random(seed)
        return ["".join(rng.choice(self.POOL) for _ in range(rng.randint(0, 40))) for _ in range(n)]

    def test_random_values_round_trip_everywhere(self, layout):
        values = self._strings(60, seed=1234)
        for i in range(0, len(values), 3):
            a, b, c = values[i : i + 3]
            cp_path = checkpoints.write_checkpoint(
                layout,
                Checkpoint(
                    task_id="t", phase="p", objective=a, context_summary=b, extra={c: [a, b]}
                ),
            )
            obj = json.loads(cp_path.read_text(encoding="utf-8"))
            assert (obj["objective"], obj["context_summary"], obj["extra"]) == (a, b, {c: [a, b]})
            f_path = artifacts.write_findings(
                layout, "x", task=a, summary=b, key_discoveries=[c, a], files=[(b, c)]
            )
            back = artifacts.read_findings(f_path)
            assert (back["task"], back["summary"], back["key_discoveries"]) == (a, b, [c, a])
            headings = re.findall(r"^#{1,6} .*$", f_path.read_text(encoding="utf-8"), re.M)
            assert headings[1:] == [
                "## Summary",
                "## Key Discoveries",
                "## Files Examined",
                "## Open Questions",
                "## Recommendations",
            ]
