"""The subagent node (`orchestrator.graph.nodes.subagent`) and what sits beside it: a
finished subagent's finding in the artifact registry and in its file, a replay that never
runs an agent or writes a file twice, what it is told, and the files its tools wrote."""

from __future__ import annotations

import subprocess
import sys

import pytest
from langchain_core.messages import AIMessage, ToolMessage

from memory.paths import Layout
from orchestrator.api import Orchestrator
from orchestrator.artifacts import read_findings
from orchestrator.artifacts.documents import Docs
from orchestrator.artifacts.finding import EARLIER_SUMMARY_CHARS, FindingRecord
from orchestrator.artifacts.findings import agent_file_name, findings_name, list_findings
from orchestrator.artifacts.registry import Keys, registry_records, registry_status
from orchestrator.graph.subagent_prompt import subagent_prompt
from orchestrator.graph.written import files_written

CMD = [sys.executable, "-m", "orchestrator.cli"]


@pytest.fixture
def one_phase(tmp_path):
    path = tmp_path / "one.yaml"
    path.write_text("phases: [exploration]\n")
    return path


def _findings_records(memory_dir, task: str) -> dict[str, dict]:
    """`subtask key -> registry record` of every subagent's finding of `task`."""
    records = registry_records(Docs.of(Layout(memory_dir)), task)
    return {
        key: rec
        for rkey, rec in records.items()
        if (key := Keys.subtask(Keys.FINDINGS, rkey)) is not None
    }


def _files_by_subtask(memory_dir, task: str) -> dict[str, list[str]]:
    """`subtask key -> the findings files of `task` written for it`."""
    out: dict[str, list[str]] = {}
    for path in list_findings(Layout(memory_dir), merged=False):
        meta = read_findings(path)
        if meta.get("task_id") == task:
            out.setdefault(meta["subtask_id"], []).append(path.name)
    return out


def test_a_finished_subagent_leaves_its_finding_in_the_registry_and_its_file(
    fixture_repo, one_phase, memory_dir
):
    result = Orchestrator(workdir=fixture_repo, workflow=one_phase).run("Survey the shop")
    assert result.status == "done" and result.findings
    records = _findings_records(memory_dir, result.task_id)
    assert set(records) == set(_files_by_subtask(memory_dir, result.task_id))
    docs = Docs.of(Layout(memory_dir))
    for key, rec in records.items():
        # the file is named from the recorded time, so the registry needs no second line
        name = findings_name(agent_file_name(rec["subtask"]), rec["ts"])
        assert name in result.findings and "path" not in rec
        assert registry_status(docs, result.task_id, Keys.findings(key)) == "started"
        back = read_findings(memory_dir / name)
        assert back["summary"] == rec["findings"]["summary"]
        assert back["key_discoveries"] == rec["findings"]["key_discoveries"]
        assert rec["runs"] == 1


@pytest.mark.parametrize("point", ["subagent_after_findings", "subagent_before_findings"])
def test_a_replayed_subagent_neither_runs_again_nor_writes_a_second_file(
    fixture_repo, one_phase, memory_dir, cli_env, point
):
    """Killed after its finding was recorded (with or without its file), a subagent is
    not run again on resume, and its subtask ends with exactly one findings file."""
    run = [*CMD, "run", "Survey the shop", "--task", "t", "--workdir", str(fixture_repo),
           "--workflow", str(one_phase)]  # fmt: skip
    killed = subprocess.run(run, env={**cli_env, "TETHER_FAULT": f"{point}:1"}, capture_output=True)
    assert killed.returncode != 0
    before = _findings_records(memory_dir, "t")
    assert len(before) >= 1
    resumed = subprocess.run([*CMD, "resume", "--task", "t"], env=cli_env, capture_output=True)
    assert resumed.returncode == 0, resumed.stderr.decode()
    after = _findings_records(memory_dir, "t")
    files = _files_by_subtask(memory_dir, "t")
    assert set(files) == set(after) and all(len(names) == 1 for names in files.values())
    assert all(rec["runs"] == 1 for rec in after.values())
    for key, rec in before.items():  # its finding is the one recorded before the kill
        (name,) = files[key]
        assert (
            read_findings(memory_dir / "findings" / name)["summary"] == (rec["findings"]["summary"])
        )


def _payload(scope: list[str]) -> dict:
    sub = {"id": "s", "title": "T", "description": "D", "agent": "researcher", "scope": scope}
    return {"task_id": "t", "objective": "O", "workdir": ".", "phase": "p", "key": "p/s",
            "subtask": {**sub, "phase": "p"}, "earlier": {}}  # fmt: skip


def test_a_subagent_is_told_earlier_findings_each_by_its_own_bounded_line():
    long = "word " * 200
    earlier = [
        FindingRecord.of({"key": "a/x", "summary": long, "path": "findings/x.md",
                          "files": [{"path": "src/a.py", "description": "read"}]}),
    ]  # fmt: skip
    system, human = subagent_prompt(_payload(["src"]), "", 5, "", earlier)
    assert "SubmitFindings" in system.content
    line = next(x for x in human.content.splitlines() if x.startswith("- word"))
    assert line == earlier[0].for_subagent()
    assert line.endswith("(findings/x.md; files: src/a.py)")
    assert len(line.split(" (findings/")[0]) <= len("- ") + EARLIER_SUMMARY_CHARS
    assert "Max steps: 4" in human.content


def test_files_written_come_from_the_tools_outcomes_not_their_words():
    def call(ident: str, name: str = "write_file", **args) -> AIMessage:
        return AIMessage("", tool_calls=[{"name": name, "args": args, "id": ident}])

    created = {"path": "new.txt", "change": "created", "previous": ""}
    same = {"path": "same.txt", "change": "unchanged", "previous": ""}
    transcript = [
        call("c1"),
        ToolMessage("Done.", tool_call_id="c1", artifact=created),
        call("c2"),  # says it created a file, but its outcome says nothing was written
        ToolMessage("Created liar.txt (3 bytes).", tool_call_id="c2"),
        call("c3"),
        ToolMessage("Unchanged same.txt", tool_call_id="c3", artifact=same),
        call("c4", "memory_write", path="notes/a.md"),
        ToolMessage("Wrote notes/a.md\nmore", tool_call_id="c4"),
        call("c5", "memory_write", path="notes/b.md"),
        ToolMessage("Error: refused", tool_call_id="c5"),
    ]
    assert [(f.path, f.description) for f in files_written(transcript)] == [
        ("new.txt", "created"),
        ("notes/a.md", "memory_write: Wrote notes/a.md"),
    ]
