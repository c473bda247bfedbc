"""The markdown artifacts: names, collisions, atomic writes and reading them back.

Covers `orchestrator.artifacts`: `findings/{agent}_{ts}.md`, `findings/merged_{ts}.md`,
`context_snapshots/snap_{ts}.md`, `research_plans/{task_id}.md`, the shared `timestamp()` /
`new_suffix()` helpers, and `read_snapshot` for `resume --from-snapshot`.
"""

from __future__ import annotations

import re
import threading
from datetime import UTC, datetime

import pytest

from memory.errors import PathEscapeError
from memory.paths import Layout
from orchestrator import artifacts
from orchestrator.artifacts import SnapshotError

TS = re.compile(r"^\d{8}T\d{12}Z$")
FIXED = datetime(2025, 1, 4, 12, 0, 0, 123456, tzinfo=UTC)


@pytest.fixture
def layout(memory_dir):
    return Layout(memory_dir).ensure()


def _hidden_leftovers(folder):
    return [p.name for p in folder.iterdir() if ".tmp-" in p.name]


class TestNames:
    def test_timestamp_format_is_sortable_utc(self):
        assert artifacts.timestamp(FIXED) == "20250104T120000123456Z"
        assert artifacts.timestamp("2025-01-04T13:00:00.123456+01:00") == "20250104T120000123456Z"
        assert artifacts.iso_timestamp(FIXED) == "2025-01-04T12:00:00.123456Z"
        assert TS.match(artifacts.timestamp())
        assert re.fullmatch(r"[0-9a-f]{6}", artifacts.new_suffix())

    def test_bad_timestamp_string(self):
        with pytest.raises(ValueError) as exc:
            artifacts.timestamp("yesterday")
        assert str(exc.value) == (
            "timestamp 'yesterday' is not ISO 8601; pass e.g. '2025-01-04T12:00:00Z'"
        )

    def test_findings_name_and_collision_suffix(self, layout):
        first = artifacts.write_findings(
            layout, "ui-agent", task="t", summary="one", timestamp=FIXED
        )
        second = artifacts.write_findings(
            layout, "ui-agent", task="t", summary="two", timestamp=FIXED
        )
        assert first.name == "ui-agent_20250104T120000123456Z.md"
        assert re.fullmatch(r"ui-agent_20250104T120000123456Z_[0-9a-f]{6}\.md", second.name)
        assert artifacts.read_findings(first)["summary"] == "one"  # never overwritten
        assert artifacts.read_findings(second)["summary"] == "two"
        assert artifacts.name_timestamp(second) == "20250104T120000123456Z"

    @pytest.mark.parametrize(
        ("agent", "expected"),
        [
            ("../../etc/passwd", "etc-passwd"),
            ("mobile ui/specialist", "mobile-ui-specialist"),
            ("", "agent"),
            ("...", "agent"),
            ("merged", "agent-merged"),
            ("x" * 300, "x" * 64),
        ],
    )
    def test_agent_names_are_slugged(self, layout, agent, expected):
        path = artifacts.write_findings(layout, agent, task="t", summary="s", timestamp=FIXED)
        assert path.parent == layout.findings
        assert path.name == f"{expected}_20250104T120000123456Z.md"
        assert artifacts.read_findings(path)["agent"] == agent  # shown as given

    def test_concurrent_writers_never_collide(self, layout):
        errors: list[BaseException] = []

        def work(i: int) -> None:
            try:
                artifacts.write_findings(layout, "same", task="t", summary=f"s{i}", timestamp=FIXED)
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(i,)) for i in range(12)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        files = sorted(layout.findings.glob("same_*.md"))
        assert len(files) == 12
        assert sorted(artifacts.read_findings(p)["summary"] for p in files) == sorted(
            f"s{i}" for i in range(12)
        )
        assert _hidden_leftovers(layout.findings) == []

    def test_listing_is_newest_first(self, layout):
        old = artifacts.write_snapshot(layout, task_id="t", phase="p", timestamp=FIXED)
        new = artifacts.write_snapshot(
            layout, task_id="t", phase="p", timestamp=datetime(2026, 1, 1, tzinfo=UTC)
        )
        assert artifacts.list_snapshots(layout) == [new, old]
        assert old.name == "snap_20250104T120000123456Z.md"


class TestPlan:
    def test_plan_is_rewritten_in_place(self, layout):
        p1 = artifacts.write_plan(
            layout,
            "task-1",
            objective="Survey",
            phase="exploration",
            key_questions=[("What is X?", False), ("Why?", True)],
            pending=["s1", "s2"],
            next_actions=["spawn"],
        )
        p2 = artifacts.write_plan(
            layout, "task-1", objective="Survey", phase="planning", completed=["s1", "s2"]
        )
        assert p1 == p2 == layout.research_plans / "task-1.md"
        text = p2.read_text()
        assert text.startswith("# Research Plan: task-1\n\n**Phase**: planning\n")
        assert "- Completed: s1, s2\n- In Progress: none\n- Pending: none\n" in text
        back = artifacts.read_plan(p2)
        assert back["phase"] == "planning" and back["completed"] == ["s1", "s2"]
        assert _hidden_leftovers(layout.research_plans) == []

    def test_hand_edits_survive_every_rewrite(self, layout):
        plan = dict(objective="Map the auth flow", constraints=["Read-only"])
        path = artifacts.write_plan(layout, "t1", phase="exploration", **plan)
        edited = path.read_text().replace(
            "- Read-only\n", "- Read-only\n- HUMAN: only look at runnables.\n"
        )
        edited = edited.replace(
            "<!-- tether:plan", "## Human notes\nCall me before touching auth.\n\n<!-- tether:plan"
        )
        path.write_text(edited)  # a person editing the plan
        for phase in ("planning", "review"):
            plan["constraints"] = ["Read-only", "Cite files"]
            artifacts.write_plan(layout, "t1", phase=phase, **plan)
        text = path.read_text()
        constraints = artifacts.sections(text)["Constraints"].splitlines()
        assert constraints == ["- Read-only", "- Cite files", "- HUMAN: only look at runnables."]
        assert artifacts.sections(text)["Human notes"] == "Call me before touching auth."
        assert text.count("HUMAN:") == 1 and "**Phase**: review" in text
        assert artifacts.read_plan(path)["phase"] == "review"  # metadata still last and valid

    def test_key_questions_render_as_checkboxes(self, layout):
        path = artifacts.write_plan(
            layout,
            "t",
            objective="o",
            phase="p",
            key_questions=[("open one", False), ("done one", True), "bare string"],
        )
        text = path.read_text()
        assert "- [ ] open one\n- [x] done one (answered)\n- [ ] bare string\n" in text

    def test_task_id_with_a_slash_is_refused(self, layout):
        with pytest.raises(PathEscapeError):
            artifacts.write_plan(layout, "../x", objective="o", phase="p")
        assert list(layout.research_plans.iterdir()) == []


class TestMerged:
    def test_merged_keeps_attribution_and_dedups_files(self, layout):
        f1 = artifacts.write_findings(
            layout,
            "alpha",
            task="t1",
            summary="Alpha found A.",
            files=[("src/a.py", "entry point")],
            timestamp=FIXED,
        )
        path = artifacts.write_merged(
            layout,
            "task-1",
            "exploration",
            [
                {
                    "agent": "alpha",
                    "summary": "Alpha found A.",
                    "key_discoveries": ["A"],
                    "files": [{"path": "src/a.py", "description": "entry point"}],
                    "path": layout.relative(f1),
                    "subtask_id": "s1",
                    "task": "t1",
                },
                {
                    "agent": "beta",
                    "status": "failed",
                    "summary": "",
                    "files": [("src/a.py", "also read")],
                    "open_questions": ["Why B?"],
                },
            ],
            timestamp=FIXED,
        )
        assert path.name == "merged_20250104T120000123456Z.md"
        text = path.read_text()
        assert "**Sources**: 2 findings (1 completed, 1 failed)\n" in text
        assert "- **alpha** (completed) - t1: Alpha found A.\n" in text
        assert "- [alpha] A\n" in text and "- [beta] Why B?\n" in text
        assert text.count("`src/a.py`") == 1
        assert "- `src/a.py` - entry point [alpha, beta]\n" in text
        assert f"- alpha: `{layout.relative(f1)}`\n" in text
        back = artifacts.read_merged(path)
        assert [f["agent"] for f in back["findings"]] == ["alpha", "beta"]
        assert artifacts.list_findings(layout, merged=True) == [path]
        assert artifacts.list_findings(layout, merged=False) == [f1]

    def test_repeated_agents_are_told_apart_by_subtask(self, layout):
        path = artifacts.write_merged(
            layout,
            "t",
            "p",
            [
                {
                    "agent": "researcher",
                    "subtask_id": "p/docs",
                    "summary": "Docs.",
                    "key_discoveries": ["d1"],
                },
                {
                    "agent": "researcher",
                    "subtask_id": "p/src",
                    "summary": "Src.",
                    "key_discoveries": ["s1"],
                },
            ],
        )
        text = path.read_text()
        assert "- **p/docs** (completed): Docs.\n- **p/src** (completed): Src.\n" in text
        assert "- [p/docs] d1\n- [p/src] s1\n" in text

    def test_unknown_field_in_a_finding_is_an_error(self, layout):
        from orchestrator.errors import TemplateError

        with pytest.raises(TemplateError) as exc:
            artifacts.write_merged(layout, "t", "p", [{"agent": "a", "sumary": "x"}])
        assert str(exc.value) == (
            "invalid input for template 'merged_findings.md.j2': field 'findings.0.sumary': "
            "Extra inputs are not permitted"
        )


class TestSnapshot:
    def test_round_trip_for_resume(self, layout):
        path = artifacts.write_snapshot(
            layout,
            task_id="task-1",
            phase="implementation",
            reason="token_limit",
            token_count=151234,
            conversation_summary="We surveyed.\nThen planned.",
            active_agents=["alpha", "beta"],
            important_context="Keep the API stable.",
            files_in_play=[("src/a.py", "modified")],
            pending_decisions=["pick a DB"],
            resume_instructions="Run the review phase.",
            plan_path="research_plans/task-1.md",
            extra={"phase_index": 2, "subtasks": [{"id": "s1"}]},
            objective='Survey "tether" {{ x }}',
            timestamp=FIXED,
        )
        assert path.name == "snap_20250104T120000123456Z.md"
        text = path.read_text()
        assert text.startswith(
            "# Context Snapshot\n**Task**: task-1\n**Timestamp**: 2025-01-04T12:00:00.123456Z\n"
            "**Token Count**: ~151234\n**Reason**: token_limit\n"
        )
        assert (
            '- Task: task-1\n- Objective: Survey "tether" {{ x }}\n- Phase: implementation\n'
            "- Agents: alpha, beta\n- Plan: `research_plans/task-1.md`\n" in text
        )
        snap = artifacts.read_snapshot(path)
        assert snap["task_id"] == "task-1"
        assert snap["phase"] == "implementation"
        assert snap["objective"] == 'Survey "tether" {{ x }}'
        assert snap["token_count"] == 151234
        assert snap["extra"] == {"phase_index": 2, "subtasks": [{"id": "s1"}]}
        assert snap["sections"]["Resume Instructions"] == "Run the review phase."
        assert snap["conversation_summary"] == "We surveyed.\nThen planned."

    def test_objective_from_extra(self, layout):
        path = artifacts.write_snapshot(
            layout, task_id="t", phase="p", extra={"objective": "from extra"}
        )
        assert artifacts.read_snapshot(path)["objective"] == "from extra"

    def test_hand_edits_show_in_sections(self, layout):
        path = artifacts.write_snapshot(layout, task_id="t", phase="p", resume_instructions="old")
        path.write_text(path.read_text().replace("\nold\n", "\nnew by hand\n"))
        snap = artifacts.read_snapshot(path)
        assert snap["sections"]["Resume Instructions"] == "new by hand"
        assert snap["resume_instructions"] == "old"

    def test_hand_written_seed_snapshot(self, tmp_path):
        path = tmp_path / "snap.md"
        path.write_text(
            "# Context Snapshot\n**Timestamp**: 2025-01-04T12:00:00Z\n**Token Count**: ~120,000\n"
            "**Reason**: manual\n\n## Conversation Summary\nStuff.\n\n## Current State\n"
            "- Task: feature_xyz\n- Phase: implementation\n- Agents: ui, backend\n\n"
            "## Resume Instructions\nContinue.\n"
        )
        snap = artifacts.read_snapshot(path)
        assert (snap["task_id"], snap["phase"], snap["token_count"]) == (
            "feature_xyz",
            "implementation",
            120000,
        )
        assert snap["active_agents"] == ["ui", "backend"]
        assert snap["objective"] is None
        assert snap["sections"]["Resume Instructions"] == "Continue."

    @pytest.mark.parametrize(
        ("content", "message"),
        [
            (None, "snapshot {p!r} not found; list them with `orchestrator snapshot list`"),
            (b"\xff\xfe", "snapshot {p!r} is not UTF-8 text"),
            (
                b"# Notes\nnothing here\n",
                "snapshot {p!r} is not a context snapshot (no '# Context Snapshot' heading and "
                "no tether metadata); pass a context_snapshots/snap_*.md file",
            ),
        ],
    )
    def test_bad_snapshot_files(self, tmp_path, content, message):
        path = tmp_path / "snap_x.md"
        if content is not None:
            path.write_bytes(content)
        with pytest.raises(SnapshotError) as exc:
            artifacts.read_snapshot(path)
        assert str(exc.value) == message.format(p=str(path))


class TestReadBack:
    def test_findings_without_metadata(self, tmp_path):
        path = tmp_path / "a_1.md"
        path.write_text("# Findings: a\n**Task**: t\n")
        with pytest.raises(artifacts.ArtifactError) as exc:
            artifacts.read_findings(path)
        assert str(exc.value) == (
            f"findings file {str(path)!r} has no tether metadata block "
            "('<!-- tether:findings ... -->'); was it written by tether?"
        )

    def test_missing_plan(self, tmp_path):
        with pytest.raises(artifacts.ArtifactError) as exc:
            artifacts.read_plan(tmp_path / "nope.md")
        assert str(exc.value) == (
            f"research plan {str(tmp_path / 'nope.md')!r} not found; "
            "list them with `ls` in the memory directory"
        )

    def test_a_fake_metadata_line_inside_a_value_does_not_win(self, layout):
        fake = '<!-- tether:snapshot {"task_id": "evil", "phase": "x"} -->'
        path = artifacts.write_snapshot(
            layout, task_id="real", phase="p", conversation_summary=fake, important_context=fake
        )
        snap = artifacts.read_snapshot(path)
        assert snap["task_id"] == "real"
        assert snap["conversation_summary"] == fake

    def test_partial_metadata_gets_defaults(self, tmp_path):
        path = tmp_path / "snap.md"
        path.write_text('# Context Snapshot\n<!-- tether:snapshot {"task_id": "t"} -->\n')
        snap = artifacts.read_snapshot(path)
        assert (snap["task_id"], snap["phase"], snap["objective"], snap["extra"]) == (
            "t",
            None,
            None,
            {},
        )
