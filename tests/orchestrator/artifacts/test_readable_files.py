"""What a person reads in the memory's files (issue 43 items 10, 11, 14, 15, 16): the
decisions people made on approval requests (overview.md's Key Decisions, the snapshot's
Decisions Made and Pending Decisions), a plan waiting for approval, the task of a
findings file, every phase in a snapshot's "What Was Found", the key questions of a done
task's plan, and the snapshot's own path in its resume command.

Runs on the offline model, or through the real `langchain-openai` client against the
scripted server (`openai_server.py`) where an agent must call `write_file`; the files on
disk are what is checked.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from langchain_openai import ChatOpenAI

from orchestrator import artifacts
from orchestrator.api import Orchestrator
from orchestrator.approvals import note_decisions
from orchestrator.artifacts.documents import Docs
from orchestrator.artifacts.plan import addressed_by, read_plan, write_plan
from orchestrator.artifacts.registry import registry_note
from orchestrator.artifacts.snapshot_content import what_was_found
from tests.orchestrator.openai_server import ScriptedOpenAI
from tests.orchestrator.scripted_agents import agents, findings, one_subtask

GATE = "name: gate\nphases: [exploration, review]\napprove_plan: true\n"
WRITER = """
phases: [implementation]
agents:
  writer:
    description: Updates the notes of the project.
    prompt: AGENT=writer
    tools: [read_file, write_file]
    interrupt_on: [write_file]
"""


def _section(text: str, title: str) -> str:
    found = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert found, f"no section {title!r} in:\n{text}"
    return found.group(1).strip()


def newest_snapshot(memory_dir: Path) -> Path:
    return max((memory_dir / "context_snapshots").glob("snap_*.md"), key=lambda p: p.name)


class TestDecisions:
    """Item 10: approvals and rejections, with their messages, where a person reads."""

    def test_a_rejected_plan_and_its_reason_are_in_the_overview_and_snapshots(
        self, fixture_repo, tmp_path, memory_dir
    ):
        wf = tmp_path / "gate.yaml"
        wf.write_text(GATE)
        orch = Orchestrator(workdir=fixture_repo, workflow=wf)
        first = orch.run("Survey the shop", task_id="gate")
        assert first.status == "waiting"
        request = first.pending_approvals[0]["id"]

        waiting = orch.handoff("gate").read_text()
        pending = _section(waiting, "Pending Decisions")
        assert "the plan of phase exploration" in pending
        assert f"--id {request[:12]}" in pending and "waits for approval since" in pending
        assert _section(waiting, "Decisions Made") == "_None._"

        again = orch.approve("gate", approve=False, message="Split the docs from the code")
        assert again.status == "waiting"  # the lead planned again; that plan waits
        overview = (memory_dir / "working" / "gate" / "overview.md").read_text()
        decisions = _section(overview, "Key Decisions")
        rejected = re.search(
            r"^- \d{4}-\d\d-\d\d \d\d:\d\d UTC: rejected the plan of phase exploration "
            r"\(\d+ subtask\(s\): .*\) \(lead, exploration/plan\): "
            r'"Split the docs from the code"$',
            decisions,
            re.M,
        )
        assert rejected, decisions
        assert "Important decisions made and why" in decisions  # the section's own text kept

        done = orch.approve("gate")
        done = orch.approve("gate") if done.status == "waiting" else done  # review's plan
        assert done.status == "done"
        overview = (memory_dir / "working" / "gate" / "overview.md").read_text()
        lines = [ln for ln in _section(overview, "Key Decisions").splitlines() if "UTC" in ln]
        assert [re.sub(r" \(\d+ subtask.*", "", ln.split("UTC: ")[1]) for ln in lines] == [
            "rejected the plan of phase exploration",
            "approved the plan of phase exploration",
            "approved the plan of phase review",
        ]
        final = newest_snapshot(memory_dir).read_text()
        assert '"Split the docs from the code"' in _section(final, "Decisions Made")
        assert _section(final, "Pending Decisions") == "_None._"

    def test_only_the_request_that_still_waits_is_pending(self, fixture_repo, tmp_path):
        """A resume from a snapshot asks again: the request it replaced waits no more."""
        wf = tmp_path / "gate.yaml"
        wf.write_text(GATE)
        orch = Orchestrator(workdir=fixture_repo, workflow=wf)
        orch.run("Survey the shop", task_id="gate")
        again = orch.resume("gate", from_snapshot=str(orch.handoff("gate")))
        [request] = {p["id"] for p in again.pending_approvals}
        pending = _section(orch.handoff("gate").read_text(), "Pending Decisions")
        waits = [ln for ln in pending.splitlines() if "waits for approval" in ln]
        assert len(waits) == 1 and f"--id {request[:12]}`" in waits[0], pending

    def test_an_edit_decision_says_what_ran_instead(self, tmp_path, memory_dir):
        """A LangGraph Server client may answer `edit`: the overview says what ran."""
        docs = Docs.of(memory_dir)
        action = {"id": "r1", "agent": "writer", "key": "impl/w-1", "tool": "write_file",
                  "args": {"path": "notes.txt", "content": "x"}}  # fmt: skip
        registry_note(docs, "t", "approval:r1", agent="writer", subtask="impl/w-1",
                      actions=[action])  # fmt: skip
        edit = {"type": "edit", "edited_action": {"name": "write_file",
                                                  "args": {"path": "notes-new.txt"}}}  # fmt: skip
        note_decisions(docs, "t", {"r1": {"decisions": [edit]}})
        overview = (memory_dir / "working" / "t" / "overview.md").read_text()
        assert re.search(
            r"^- \d{4}-\d\d-\d\d \d\d:\d\d UTC: edited `write_file` on `notes.txt` "
            r"\(writer, impl/w-1\); ran `write_file` on `notes-new.txt` instead$",
            _section(overview, "Key Decisions"),
            re.M,
        ), overview

    def test_a_refused_edit_names_the_tool_the_path_and_why(self, tmp_path, memory_dir):
        work = tmp_path / "work"
        work.mkdir()
        (work / "notes.txt").write_text("old notes\n")
        wf = tmp_path / "wf.yaml"
        wf.write_text(WRITER)
        steps = {
            "writer": [
                {"tool": "write_file", "args": {"path": "notes.txt", "content": "new\n"}},
                findings("The edit was refused."),
            ]
        }
        with ScriptedOpenAI(responder=agents(one_subtask("writer"), steps)) as server:
            model = ChatOpenAI(
                model="gpt-4o-mini", base_url=server.base_url, api_key="sk-test", max_retries=0
            )
            orch = Orchestrator(workdir=work, workflow=wf, model=model)
            assert orch.run("Update the notes", task_id="notes").status == "waiting"
            done = orch.approve("notes", approve=False, message="keep the old notes")
        assert done.status == "done"
        assert (work / "notes.txt").read_text() == "old notes\n"
        overview = (memory_dir / "working" / "notes" / "overview.md").read_text()
        want = (
            "rejected `write_file` on `notes.txt` (writer, implementation/writer-1): "
            '"keep the old notes"'
        )
        assert want in _section(overview, "Key Decisions")
        assert want in _section(newest_snapshot(memory_dir).read_text(), "Decisions Made")
        # the workdir line says who may write to it, not "read-only for the agents"
        known = _section(overview, "Known Context")
        assert known == (
            f"Workdir: `{work}`; agents that may write to it: writer (write_file; each write "
            "approved by a person); read-only for the others."
        )


def test_a_plan_that_waits_for_approval_lists_its_subtasks_as_waiting(
    fixture_repo, tmp_path, memory_dir
):
    """Item 11: the subtasks of a plan not approved yet are not "In Progress"."""
    wf = tmp_path / "gate.yaml"
    wf.write_text(GATE)
    orch = Orchestrator(workdir=fixture_repo, workflow=wf)
    assert orch.run("Survey the shop", task_id="gate").status == "waiting"
    plan = (memory_dir / "research_plans" / "gate.md").read_text()
    progress = _section(plan, "Progress")
    assert "- In Progress: none" in progress
    waiting = re.search(r"^- Waiting for approval of the plan: (.*)$", progress, re.M)
    assert waiting and "exploration/" in waiting.group(1), progress
    orch.approve("gate")
    plan = (memory_dir / "research_plans" / "gate.md").read_text()
    progress = _section(plan, "Progress")
    assert "exploration/" not in progress.split("- Waiting for approval")[-1]  # approved
    assert re.search(r"^- Completed: exploration/", progress, re.M), progress


def test_findings_files_and_snapshots_show_their_task(fixture_repo, tiny_workflow, memory_dir):
    """Item 14: two tasks in one memory; each file says on a visible line whose it is."""
    orch = Orchestrator(workdir=fixture_repo, workflow=tiny_workflow)
    for task in ("shop-a", "shop-b"):
        assert orch.run("Survey the shop", task_id=task).status == "done"
    files = [p for p in (memory_dir / "findings").glob("*.md") if "merged_" not in p.name]
    assert files
    seen = set()
    for path in files:
        text = path.read_text()
        meta = artifacts.read_findings(path)
        head = text.split("\n## ", 1)[0]
        assert f"\n**Task**: {meta['task_id']}\n" in head, head
        title = re.sub(r"^\[[^]]*\] ", "", meta["task"])
        assert f"\n**Subtask**: {meta['subtask_id']}: {title}\n" in head, head
        assert f"\n**Phase**: {meta['phase']}\n" in head
        seen.add(meta["task_id"])
    assert seen == {"shop-a", "shop-b"}
    for snap in (memory_dir / "context_snapshots").glob("snap_*.md"):
        task = artifacts.read_snapshot(snap)["task_id"]
        assert snap.read_text().startswith(f"# Context Snapshot\n**Task**: {task}\n")


def test_the_snapshot_names_itself_in_its_resume_command(fixture_repo, tmp_path, memory_dir):
    """Item 16: `--from-snapshot <this file>` was not a command a person could paste."""
    wf = tmp_path / "gate.yaml"
    wf.write_text(GATE)
    orch = Orchestrator(workdir=fixture_repo, workflow=wf)
    orch.run("Survey the shop", task_id="gate")
    snap = orch.handoff("gate")
    steps = _section(snap.read_text(), "Resume Instructions")
    command = re.search(r"`(orchestrator resume [^`]*)`", steps).group(1)
    args = shlex.split(command)
    assert args[:4] == ["orchestrator", "resume", "--task", "gate"]
    assert args[4:] == ["--from-snapshot", str(snap), "--memory-dir", str(memory_dir)]
    assert Path(args[5]).is_file()
    assert artifacts.read_snapshot(Path(args[5]))["task_id"] == "gate"


class TestWhatWasFound:
    """Item 15 a: no phase's findings are left out of a snapshot wholesale."""

    @staticmethod
    def records(phases: list[str], per_phase: int) -> list[dict]:
        return [
            {
                "key": f"{p}/{p}-{i}",
                "phase": p,
                "path": f"findings/researcher-{p}-{i}_20261206T190551261919Z.md",
                "status": "completed",
                "summary": f"Area {i} of {p}: " + "what it does, in many words " * 8 + ".",
                "key_discoveries": [f"pkg{i}/mod.py:{n} defines thing {n}" for n in range(9)],
            }
            for p in phases
            for i in range(per_phase)
        ]

    def test_every_phase_is_shown_when_space_is_short(self):
        phases = ["exploration", "planning", "implementation", "review"]
        text = what_was_found(
            self.records(phases, 4),
            phases=phases,
            current="review",
            merged={p: f"findings/merged_{p}.md" for p in phases},
            budget=2000,
        )
        for phase in phases:
            shown = re.findall(rf"^- {phase}/", text, re.M)
            assert shown, f"no finding of {phase} shown:\n{text}"
            more = re.search(rf"^- (\d+) more finding\(s\) of phase {phase} in ", text, re.M)
            assert len(shown) + (int(more.group(1)) if more else 0) == 4
        assert len(text) <= 2000

    def test_the_final_snapshot_of_a_survey_shows_every_phase(self, fixture_repo, memory_dir):
        result = Orchestrator(workdir=fixture_repo).run("Survey this repository", task_id="s")
        assert result.status == "done"
        found = _section(newest_snapshot(memory_dir).read_text(), "What Was Found")
        for phase in ("exploration", "planning", "implementation", "review"):
            assert f"researcher-{phase}-" in found, found
        # what each area is (exploration) is there for every area: in the answer or after
        for path in (memory_dir / "findings").glob("researcher-exploration-*.md"):
            assert f"findings/{path.name}" in found, found


class TestKeyQuestions:
    """Item 15 b: a done task's plan marks the questions its work addressed, and says which
    stay open."""

    def test_a_done_survey_ticks_the_questions_its_findings_addressed(
        self, fixture_repo, tiny_workflow, memory_dir
    ):
        orch = Orchestrator(workdir=fixture_repo, workflow=tiny_workflow)
        assert orch.run("Survey the shop", task_id="q").status == "done"
        plan = (memory_dir / "research_plans" / "q.md").read_text()
        questions = _section(plan, "Key Questions").splitlines()
        assert questions
        review = [q for q in questions if "review phase" in q]
        assert review and review[0].startswith("- [x] ")
        assert re.search(r"\(addressed by review/\S+", review[0]), review[0]
        for q in questions:  # every line says where it stands
            assert re.search(r"\((answered|addressed by .+|open: .+)\)$", q), q

    def test_a_question_nothing_addressed_stays_open_and_says_so(self, memory_dir):
        records = [
            {"key": "exploration/docs", "phase": "exploration", "scope": ["docs"],
             "files": [{"path": "docs/run.md"}], "summary": "How to run the shop.",
             "key_discoveries": ["docs/run.md: run it with make"]},
        ]  # fmt: skip
        phases = ["exploration", "review"]
        assert addressed_by("Which files in docs matter?", records, phases=phases) == [
            "exploration/docs"
        ]
        assert addressed_by("What should the review phase report?", records, phases=phases) == []
        assert addressed_by("Where are refunds handled?", records, phases=phases) == []
        assert addressed_by(
            "Where are refunds handled?", records, phases=phases, answer="Refunds: handled in x."
        ) == ["the answer"]
        path = write_plan(
            memory_dir, "t", objective="o", phase="review", answer="The answer.",
            key_questions=[
                {"text": "Which files in docs matter?", "addressed_by": ["exploration/docs"]},
                {"text": "Where are refunds handled?"},
            ],
        )  # fmt: skip
        lines = _section(path.read_text(), "Key Questions").splitlines()
        assert lines == [
            "- [x] Which files in docs matter? (addressed by exploration/docs)",
            "- [ ] Where are refunds handled? (open: no finding or answer of this task "
            "addressed it)",
        ]
        assert read_plan(path)["key_questions"][0]["addressed_by"] == ["exploration/docs"]
