"""JSON checkpoints: writing, validating, choosing the latest valid one, and the report.

Covers `orchestrator.artifacts.checkpoint`: `cp_{phase}_{ts}.json` names, schema validation on
write and on read, `latest_valid_checkpoint` skipping corrupt/truncated/invalid files with
one warning each, task filtering, `RecoveryError`, and `checkpoint report`.
"""

from __future__ import annotations

import json
import os
import re
import time
from types import SimpleNamespace

import jsonschema
import pytest

from memory.errors import UnknownEntryError
from memory.paths import Layout
from memory.resources import shipped_dir
from memory.store import MemoryStore
from orchestrator.artifacts import checkpoint as checkpoint_artifact
from orchestrator.artifacts import checkpoint as checkpoints
from orchestrator.artifacts.checkpoint_model import Checkpoint, CheckpointState
from orchestrator.errors import CheckpointError, RecoveryError, TemplateError

NAME = re.compile(r"^cp_(?P<phase>[A-Za-z0-9._-]+)_(?P<ts>\d{8}T\d{12}Z)(_[0-9a-f]{6})?\.json$")


@pytest.fixture
def layout(memory_dir):
    return Layout(memory_dir).ensure()


def _cp(task="t1", phase="exploration", **kw):
    return Checkpoint(task_id=task, phase=phase, phases=["exploration", "planning", "review"], **kw)


def _write(layout, *args, **kw):
    path = checkpoints.write_checkpoint(layout, _cp(*args, **kw))
    time.sleep(0.002)  # distinct microsecond timestamps, in order
    return path


class TestWrite:
    def test_name_id_and_schema(self, layout):
        path = checkpoints.write_checkpoint(
            layout,
            _cp(
                state=CheckpointState(
                    completed_subtasks=["a"], pending_subtasks=["b"], findings_count=1
                ),
                subtasks=[{"id": "b", "title": "B", "scope": ["src"]}],
                completed_findings={"a": "findings/x_1.md"},
                entries=["mem-1"],
            ),
        )
        match = NAME.match(path.name)
        assert match and match.group("phase") == "exploration"
        obj = json.loads(path.read_text())
        jsonschema.validate(obj, checkpoints.checkpoint_schema())
        assert obj["checkpoint_id"] == path.stem
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", obj["timestamp"])
        assert obj["recovery_instructions"].startswith("Run `orchestrator resume --task t1`.")
        loaded = checkpoints.load_checkpoint(path)
        assert loaded.state.completed_subtasks == ["a"]
        assert loaded.subtasks == [{"id": "b", "title": "B", "scope": ["src"]}]
        assert loaded.model_dump(
            exclude={"checkpoint_id", "timestamp", "recovery_instructions"}
        ) == _cp(
            state=loaded.state,
            subtasks=loaded.subtasks,
            completed_findings={"a": "findings/x_1.md"},
            entries=["mem-1"],
        ).model_dump(exclude={"checkpoint_id", "timestamp", "recovery_instructions"})

    def test_phase_is_slugged_in_the_name_only(self, layout):
        path = checkpoints.write_checkpoint(layout, Checkpoint(task_id="t", phase="code review/2"))
        assert path.name.startswith("cp_code-review-2_")
        assert checkpoints.load_checkpoint(path).phase == "code review/2"

    def test_same_instant_never_collides(self, layout, monkeypatch):
        fixed = checkpoint_artifact.datetime(
            2025, 1, 4, 12, 0, tzinfo=checkpoint_artifact.datetime.now().astimezone().tzinfo
        )

        class Frozen(checkpoint_artifact.datetime):
            @classmethod
            def now(cls, tz=None):
                return fixed

        # the checkpoint file is named by `orchestrator.artifacts.checkpoint`
        monkeypatch.setattr(checkpoint_artifact, "datetime", Frozen)
        paths = [checkpoints.write_checkpoint(layout, _cp()) for _ in range(3)]
        assert len(set(paths)) == 3
        for p in paths:  # each file's id is its own name, suffix included
            assert checkpoints.load_checkpoint(p).checkpoint_id == p.stem

    def test_dict_input_and_invalid_input(self, layout):
        path = checkpoints.write_checkpoint(layout, {"task_id": "t", "phase": "p"})
        assert checkpoints.load_checkpoint(path).task_id == "t"
        with pytest.raises(TemplateError) as exc:
            checkpoints.write_checkpoint(layout, {"task_id": "t", "phase": "p", "bogus": 1})
        assert str(exc.value) == (
            "invalid input for template 'checkpoint.json.j2': field 'bogus': "
            "Extra inputs are not permitted"
        )

    def test_values_that_break_the_schema_are_not_written(self, layout):
        cp = _cp()
        cp.state.findings_count = -1  # pydantic does not re-validate on assignment
        with pytest.raises(TemplateError) as exc:
            checkpoints.write_checkpoint(layout, cp)
        assert str(exc.value).startswith(
            "template 'checkpoint.json.j2' output fails the checkpoint schema at "
            "'state/findings_count': Input should be greater than or equal to 0; "
        )
        assert list(layout.checkpoints.iterdir()) == []

    @pytest.mark.parametrize(
        ("field", "value", "problem"),
        [
            ("subtasks", [{"id": "s1", "scope": [".", {"deep": {1, 2}}]}], "subtasks.0': Value "
             "error, set at ['scope'][1]['deep'] is not a JSON value"),
            ("subtasks", [{"id": "s1", "meta": {3: "x"}}], "subtasks.0': Value error, key 3 at "
             "['meta'] is not a string"),
            ("extra", {"when": object()}, "extra': Value error, object at ['when'] is not a "
             "JSON value"),
            ("extra", {"runs": ({"at": [1, ("x", b"y")]},)}, "extra': Value error, bytes at "
             "['runs'][0]['at'][1][1] is not a JSON value"),
        ],
    )  # fmt: skip
    def test_values_that_are_not_json_name_where_and_write_nothing(
        self, layout, field, value, problem
    ):
        with pytest.raises(TemplateError) as exc:
            checkpoints.write_checkpoint(layout, {"task_id": "t", "phase": "p", field: value})
        prefix = "invalid input for template 'checkpoint.json.j2': field '"
        assert str(exc.value) == prefix + problem
        assert not layout.checkpoints.is_dir() or list(layout.checkpoints.iterdir()) == []

    def test_json_values_are_written_as_given(self, layout):
        sub = {"id": "s1", "scope": ("a", "b"), "n": 2, "ok": True, "x": None, "f": {"g": [1.5]}}
        path = checkpoints.write_checkpoint(
            layout, {"task_id": "t", "phase": "p", "subtasks": [sub], "extra": {"k": [sub]}}
        )
        data = json.loads(path.read_text())
        expected = {**sub, "scope": ["a", "b"]}
        assert data["subtasks"] == [expected] and data["extra"] == {"k": [expected]}

    def test_own_fields_are_written_as_validated_ones_are(self, layout):
        # what tether assembles from its own state skips the model's validation; the file
        # must be the same, and the rendered JSON is still checked against the schema
        fields = {
            "task_id": "t",
            "phase": "p",
            "timestamp": "2026-01-02T03:04:05.000006Z",
            "checkpoint_id": "cp_p_x",
            "state": {"completed_subtasks": ["a"], "findings_count": 1},
            "subtasks": [{"id": "a", "scope": ("x", "ü"), "n": 2**70}],
            "extra": {"tokens": {"lead": 10}, "note": "</script> é"},
        }
        own = checkpoints.write_checkpoint(layout, Checkpoint.own(fields))
        validated = checkpoints.write_checkpoint(layout, fields)
        assert own.read_bytes() == validated.read_bytes()
        data = json.loads(own.read_text(encoding="utf-8"))
        assert data["subtasks"] == [{"id": "a", "scope": ["x", "ü"], "n": 2**70}]
        assert data["state"]["pending_subtasks"] == [] and data["extra"]["note"] == "</script> é"

    @pytest.mark.parametrize(
        ("fields", "problem"),
        [
            ({"extra": {"when": {1, 2}}}, "could not serialise a value"),
            ({"subtasks": [{"title": "no id"}]}, "fails the checkpoint schema at 'subtasks/0'"),
            (
                {"state": {"findings_count": -1}},
                "at 'state/findings_count': Input should be greater than or equal to 0",
            ),
            ({"phse": "typo"}, "unknown field(s) 'phse'"),
        ],
    )
    def test_own_fields_that_are_wrong_are_not_written(self, layout, fields, problem):
        with pytest.raises(TemplateError, match=re.escape(problem)):
            checkpoints.write_checkpoint(
                layout, Checkpoint.own({"task_id": "t", "phase": "p", **fields})
            )
        assert list(layout.checkpoints.iterdir()) == []


class TestLoad:
    @pytest.mark.parametrize(
        ("content", "message"),
        [
            (b"", "checkpoint {p!r} is empty (truncated by a crash?)"),
            (
                b'{"checkpoint_id": "cp_x", "task_id": ',
                "checkpoint {p!r} is not valid JSON (Expecting value: line 1 column 38 (char 37)); "
                "it may be truncated by a crash: use an older one",
            ),
            (b"\xff\x00", "checkpoint {p!r} is not UTF-8 text"),
            (
                b"[1, 2]",
                "checkpoint {p!r} fails the checkpoint schema at '(top level)': "
                "Input should be a valid dictionary",
            ),
            (
                b'{"task_id": "t"}',
                "checkpoint {p!r} fails the checkpoint schema at "
                "'(top level)': 'checkpoint_id' is a required property",
            ),
        ],
    )
    def test_bad_files(self, tmp_path, content, message):
        path = tmp_path / "cp_x_20250101T000000000000Z.json"
        path.write_bytes(content)
        with pytest.raises(CheckpointError) as exc:
            checkpoints.load_checkpoint(path)
        assert str(exc.value) == message.format(p=str(path))

    def test_missing_file(self, tmp_path):
        with pytest.raises(CheckpointError) as exc:
            checkpoints.load_checkpoint(tmp_path / "nope.json")
        assert str(exc.value) == (
            f"checkpoint {str(tmp_path / 'nope.json')!r} not found; "
            "list them with `orchestrator checkpoint list`"
        )

    def test_seed_reference_example_validates(self):
        """The checkpoint example shipped in the external-memory skill is a valid checkpoint."""
        ref = shipped_dir("skills") / "external-memory/references/formats.md"
        block = re.search(r"```json\n(.*?)```", ref.read_text(), re.S).group(1)
        jsonschema.validate(json.loads(block), checkpoints.checkpoint_schema())


class TestLatestValid:
    def test_skips_truncated_newest_with_one_warning(self, layout):
        good = _write(layout, phase="exploration")
        newest = _write(layout, phase="planning")
        text = newest.read_text()
        newest.write_text(text[: len(text) // 2])
        cp, path, warnings = checkpoints.latest_valid_checkpoint(layout)
        assert path == good and cp.phase == "exploration"
        assert len(warnings) == 1
        assert warnings[0].startswith(f"skipped checkpoint {str(newest)!r} is not valid JSON (")

    def test_skips_corrupt_and_schema_invalid(self, layout):
        good = _write(layout)
        invalid = _write(layout)
        obj = json.loads(invalid.read_text())
        del obj["state"]["findings_count"]
        invalid.write_text(json.dumps(obj))
        garbage = _write(layout)
        garbage.write_bytes(b"\x00\xffgarbage")
        cp, path, warnings = checkpoints.latest_valid_checkpoint(layout)
        assert path == good
        assert [w.split(" ", 3)[2] for w in warnings] == [repr(str(garbage)), repr(str(invalid))]
        assert warnings[1] == (
            f"skipped checkpoint {str(invalid)!r} fails the checkpoint schema at 'state': "
            "'findings_count' is a required property"
        )

    def test_newest_first_by_name_timestamp_not_mtime(self, layout):
        older = _write(layout, phase="exploration")
        newer = _write(layout, phase="planning")
        os.utime(older, (time.time() + 1000, time.time() + 1000))  # touched later
        assert checkpoints.list_checkpoints(layout) == [newer, older]
        assert checkpoints.latest_valid_checkpoint(layout)[1] == newer

    def test_filters_by_task(self, layout):
        mine = _write(layout, task="mine")
        _write(layout, task="other")
        cp, path, warnings = checkpoints.latest_valid_checkpoint(layout, "mine")
        assert (path, cp.task_id, warnings) == (mine, "mine", [])
        assert checkpoints.list_checkpoints(layout, "mine") == [mine]

    def test_filters_by_task_among_many_files_in_any_layout(self, layout):
        # a memory holds a dozen checkpoints per task it ran: a task's are picked out by
        # their opening, and a file in another layout or cut short is still judged right
        subtasks = [{"id": f"s{i:02d}", "title": "x" * 60, "scope": ["src"]} for i in range(40)]
        written = [_write(layout, task=t, subtasks=subtasks) for t in ["mine", "other"] * 4]
        assert all(p.stat().st_size > 4096 for p in written)  # longer than their opening
        mine = written[0::2]
        reordered = _write(layout, task="mine", subtasks=subtasks)  # keys sorted, 4 spaces
        reordered.write_text(
            json.dumps(json.loads(reordered.read_text()), sort_keys=True, indent=4)
        )
        invalid = _write(layout, task="other", subtasks=subtasks)  # another task's, invalid
        obj = json.loads(invalid.read_text())
        del obj["state"]["findings_count"]
        invalid.write_text(json.dumps(obj, indent=2))
        cut = _write(layout, task="mine", subtasks=subtasks)  # its opening intact, cut short
        cut.write_text(cut.read_text()[:3000])
        assert checkpoints.list_checkpoints(layout, "mine") == [reordered, *reversed(mine)]
        assert checkpoints.list_checkpoints(layout, "other") == [invalid, *reversed(written[1::2])]
        cp, path, warnings = checkpoints.latest_valid_checkpoint(layout, "mine")
        assert (path, cp.task_id) == (reordered, "mine")
        # the cut file may be this task's: reported; the other task's invalid one is not
        assert [w.split(" ", 3)[2] for w in warnings] == [repr(str(cut))]

    def test_none_valid_raises_recovery_error(self, layout):
        bad = _write(layout)
        bad.write_text("{")
        with pytest.raises(RecoveryError) as exc:
            checkpoints.latest_valid_checkpoint(layout)
        assert str(exc.value) == (
            f"no valid checkpoint in {str(layout.checkpoints)!r} (1 corrupt file(s) skipped); "
            "resume from a snapshot with --from-snapshot or start again with `orchestrator run`"
        )

    def test_unknown_task_raises_recovery_error(self, layout):
        _write(layout, task="mine")
        with pytest.raises(RecoveryError) as exc:
            checkpoints.latest_valid_checkpoint(layout, "ghost")
        assert str(exc.value) == (
            f"no valid checkpoint for task 'ghost' in {str(layout.checkpoints)!r}; "
            "resume from a snapshot with --from-snapshot or start again with `orchestrator run`"
        )

    def test_missing_folder(self, tmp_path):
        layout = Layout(tmp_path / "nowhere")
        assert checkpoints.list_checkpoints(layout) == []
        with pytest.raises(RecoveryError, match="no valid checkpoint in "):
            checkpoints.latest_valid_checkpoint(layout)
        assert not (tmp_path / "nowhere").exists()


class TestReport:
    def _cp(self, **kw):
        return Checkpoint(
            checkpoint_id="cp_planning_20250104T120000000000Z",
            task_id="feature_xyz",
            phase="planning",
            timestamp="2025-01-04T12:00:00.000000Z",
            phases=["exploration", "planning", "review"],
            objective="Add a\nstation screen",
            state=CheckpointState(
                completed_subtasks=["task_1", "task_2"],
                pending_subtasks=["task_3"],
                blocked_agents=["ui"],
                findings_count=2,
            ),
            context_summary="UI done.",
            next_action="Wait for backend.",
            plan="research_plans/feature_xyz.md",
            **kw,
        )

    def test_report_text_without_store(self):
        assert checkpoints.report(self._cp(entries=["mem-a"])) == (
            "[CHECKPOINT] cp_planning_20250104T120000000000Z\n"
            "Task: feature_xyz\n"
            "Timestamp: 2025-01-04T12:00:00.000000Z\n"
            "Phase: planning (2/3: exploration > [planning] > review)\n"
            "Objective: Add a station screen\n"
            "\n[STATE]\n"
            "  completed subtasks: 2 (task_1, task_2)\n"
            "  pending subtasks: 1 (task_3)\n"
            "  active agents: 0\n"
            "  blocked agents: 1 (ui)\n"
            "  findings: 2\n"
            "\n[SUMMARY]\n  UI done.\n"
            "\n[NEXT ACTION]\n  Wait for backend.\n"
            "\n[PLAN]\n  research_plans/feature_xyz.md\n"
            "\n[MEMORY REFERENCES]\n  mem-a\n"
        )

    def test_memory_references_through_get_entry(self):
        entries = {"mem-a": SimpleNamespace(id="mem-a", summary="pytest results", tokens=12000)}

        def get_entry(entry_id):
            if entry_id not in entries:
                raise UnknownEntryError(f"no entry {entry_id!r}")
            return entries[entry_id]

        store = SimpleNamespace(get_entry=get_entry, refs=lambda checkpoint: [])
        text = checkpoints.report(self._cp(entries=["mem-a", "mem-gone"]), store)
        assert text.endswith(
            "[MEMORY REFERENCES]\n"
            "  mem-a: pytest results (12000 tokens)\n"
            "  mem-gone: (not in memory: pruned or never logged)\n"
        )

    def test_report_with_a_real_store(self, memory_dir):
        store = MemoryStore(memory_dir)
        cp = self._cp()
        linked = store.log("build output line\n" * 400, tags=["build"], checkpoint=cp.checkpoint_id)
        listed = store.log("Test results: all 42 tests passed")
        text = checkpoints.report(cp.model_copy(update={"entries": [listed.id]}), store)
        refs = text.split("[MEMORY REFERENCES]\n", 1)[1].splitlines()
        assert (
            refs[0] == f"  {listed.id}: {' '.join(listed.summary.split())} ({listed.tokens} tokens)"
        )
        assert refs[1].startswith(f"  {linked.id}: ")
        assert refs[1].endswith(f" ({linked.tokens} tokens)")
        store.close()

    def test_summary_for_status(self, tmp_path):
        summary = checkpoints.checkpoint_summary(self._cp(), tmp_path / "x.json")
        assert summary == {
            "checkpoint_id": "cp_planning_20250104T120000000000Z",
            "task_id": "feature_xyz",
            "phase": "planning",
            "timestamp": "2025-01-04T12:00:00.000000Z",
            "completed": 2,
            "pending": 1,
            "blocked": 1,
            "findings_count": 2,
            "next_action": "Wait for backend.",
            "path": str(tmp_path / "x.json"),
        }


def test_hand_named_files_sort_by_their_content_timestamp(layout):
    a = checkpoints.write_checkpoint(layout, _cp(phase="exploration"))
    b = checkpoints.write_checkpoint(layout, _cp(phase="planning"))
    obj = json.loads(a.read_text())
    obj["timestamp"] = "2999-01-01T00:00:00Z"
    renamed = layout.checkpoints / "manual-copy.json"
    renamed.write_text(json.dumps(obj))
    a.unlink()
    assert checkpoints.list_checkpoints(layout) == [renamed, b]
    assert checkpoints.latest_valid_checkpoint(layout)[1] == renamed


def test_model_and_schema_describe_the_same_fields():
    schema = checkpoints.checkpoint_schema()
    assert set(Checkpoint.model_fields) == set(schema["properties"])
    optional = {"pending_approvals", "skipped_phases"}  # added with defaults: older files load
    assert set(schema["required"]) == set(schema["properties"]) - optional
    state = schema["$defs"]["SavedState"]
    assert set(CheckpointState.model_fields) == set(state["properties"]) == set(state["required"])
    for name in (
        "checkpoint_id",
        "task_id",
        "phase",
        "timestamp",
        "context_summary",
        "next_action",
        "recovery_instructions",
    ):  # the checkpoint's fields
        assert name in schema["required"]
