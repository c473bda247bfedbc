"""What a context snapshot tells a fresh agent: what was found, what is left, what was said.

Snapshots come from real offline runs (through the CLI, as a user makes them), and are
read back with `read_snapshot`; the digests must quote the findings (same figures, their
`file:line` citations), name the work left, and summarise the whole conversation.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from langchain_core.messages import AIMessage

from memory.store import MemoryStore
from memory.task.working import WorkingMemory
from orchestrator.api import Orchestrator
from orchestrator.artifacts import read_findings, read_snapshot
from orchestrator.artifacts.finding import citations
from orchestrator.artifacts.snapshot_content import (
    SUMMARY_CHARS,
    Turn,
    agent_content,
    summarize_conversation,
)
from orchestrator.offline import OfflineChatModel, ResearchPolicy

CMD = [sys.executable, "-m", "orchestrator.cli"]


@pytest.fixture
def interrupted(fixture_repo, tiny_workflow, memory_dir, cli_env):
    """A task killed after planning its second phase, then handed off: its snapshot."""
    run = [*CMD, "run", "Survey the error handling", "--task", "t", "--workdir", str(fixture_repo),
           "--workflow", str(tiny_workflow)]  # fmt: skip
    killed = subprocess.run(
        run, env={**cli_env, "TETHER_FAULT": "spawn_after_checkpoint:2"}, capture_output=True
    )
    assert killed.returncode == -9, killed.stderr
    handoff = subprocess.run(
        [*CMD, "handoff", "--task", "t"], env=cli_env, capture_output=True, text=True, check=True
    )
    return read_snapshot(handoff.stdout.strip().splitlines()[-1].split()[-1])


def _status(cli_env) -> dict:
    out = subprocess.run(
        [*CMD, "status", "--task", "t", "--json"], env=cli_env, capture_output=True, text=True
    )
    return json.loads(out.stdout)


def test_what_was_found_quotes_the_findings_with_their_citations(interrupted, memory_dir):
    found = interrupted["sections"]["What Was Found"]
    assert found.startswith("3 finding(s) (3 completed) in 1 phase(s).")
    items = [line for line in found.splitlines() if line.startswith("- exploration/")]
    assert len(items) == 3
    for item in items:
        path = re.search(r"`(findings/[^`]+\.md)`", item).group(1)
        finding = read_findings(memory_dir / path)
        summary = finding["summary"]
        quoted = item.split(".md`: ", 1)[1].split(" Cites ")[0].removesuffix(" ...")
        assert quoted in summary  # a verbatim sentence (or its start): the finding's figures
        for cite in re.findall(r"`([^`]+):(\d+)`", item):  # a line the finding names
            file, line = cite
            assert f"{file}:{line}" in finding["text"] or (
                file in finding["text"] and f"(line {line}" in finding["text"]
            )
    # the src/shop finding names a line holding the objective's word, and so does the digest
    assert "`src/shop/mod0.py:5`" in found
    assert interrupted["what_was_found"] == found  # the values round-trip


def test_what_is_left_names_the_pending_subtasks(interrupted, cli_env):
    left = interrupted["sections"]["What Is Left"]
    pending = [k for k, s in _status(cli_env)["subtasks"].items() if s["state"] != "done"]
    assert pending and all(k.startswith("review/") for k in pending)
    assert left.startswith(f"- Phase review (2/2): {len(pending)} subtask(s) pending:")
    for key in pending:
        assert f"  - {key} [researcher]: Review " in left
    # an open question of a finding
    assert "No line of docs matches 'error': where is it handled?" in left


def test_the_conversation_summary_covers_the_whole_conversation(interrupted, memory_dir):
    summary = interrupted["sections"]["Conversation Summary"]
    log = (memory_dir / "working" / "t" / "messages.jsonl").read_text().splitlines()
    assert summary.startswith(f"{len(log)} message(s) in `working/t/messages.jsonl`")
    assert "- L1 user: Objective: Survey the error handling Phase: exploration" in summary
    assert "Plan for phase exploration:" in summary  # an early turn, not only the last two
    assert "Findings of phase exploration" in summary
    assert "Plan for phase review:" in summary
    assert len(summary) < SUMMARY_CHARS + 400


def test_a_fresh_lead_resumes_from_the_snapshot(interrupted, cli_env):
    resumed = subprocess.run(
        [*CMD, "resume", "--from-snapshot", interrupted["path"]],
        env=cli_env,
        capture_output=True,
        text=True,
    )
    assert resumed.returncode == 0, resumed.stderr
    assert _status(cli_env)["status"] == "done"


def test_a_finished_task_has_nothing_left(fixture_repo, tiny_workflow, memory_dir):
    result = Orchestrator(workdir=fixture_repo, workflow=tiny_workflow).run(
        "Survey the shop", task_id="done"
    )
    snap = read_snapshot(memory_dir / result.snapshots[-1])
    left = snap["sections"]["What Is Left"]
    assert left.startswith("Nothing: the task is done; no subtask is pending.")
    assert "pending:" not in left
    found = snap["sections"]["What Was Found"]
    final = result.merged["final"]
    assert found.startswith(f"**Answer** (the whole answer: `{final}`):\n")  # the answer first
    assert result.answer.splitlines()[0] in found
    assert f"6 finding(s) (6 completed) in 2 phase(s). Final summary: `{final}`" in found


class _FailDocs:
    """The offline policy, except that the docs subagent's provider times out."""

    def __init__(self) -> None:
        self.inner = ResearchPolicy()

    def __call__(self, messages, tools) -> AIMessage:
        if "Subtask: exploration-docs" in "\n".join(str(m.content) for m in messages):
            raise RuntimeError("provider timed out")
        return self.inner(messages, tools)


def test_failed_subagents_are_left_with_their_errors(fixture_repo, tiny_workflow):
    orch = Orchestrator(
        workdir=fixture_repo, workflow=tiny_workflow, model=OfflineChatModel(policy=_FailDocs())
    )
    assert orch.run("Survey the shop", task_id="flaky").status == "failed"
    left = read_snapshot(orch.handoff("flaky"))["sections"]["What Is Left"]
    assert left.startswith(
        "- Phase exploration (1/2): no subtask pending (2 of 3 with findings, 1 failed (below)).\n"
        "- Phases not planned yet: review.\n"
        "- 1 failed subagent(s), run again by `orchestrator resume`:\n"
        "  - exploration/exploration-docs [researcher]: ModelCallError: "
    )
    assert "RuntimeError: provider timed out" in left


class TestConversationSummary:
    def _turns(self, n: int) -> list[Turn]:
        return [
            Turn(i, "user" if i % 2 else "assistant", f"turn {i} says something", prose=True)
            for i in range(1, n + 1)
        ]

    def test_a_long_conversation_is_bounded_and_spread_over_its_whole_length(self):
        text = summarize_conversation(self._turns(2000), source="working/t/messages.jsonl")
        assert len(text) <= SUMMARY_CHARS + 2 * 140
        quoted = [int(n) for n in re.findall(r"^- L(\d+) ", text, re.MULTILINE)]
        assert quoted[0] == 1 and quoted[-1] == 2000
        thirds = [sum(1 for n in quoted if k * 667 < n <= (k + 1) * 667) for k in range(3)]
        assert all(thirds), thirds  # early, middle and late turns, not only the last ones
        gaps = re.findall(r"^- \.\.\. L(\d+)-L(\d+) \((\d+) more\)$", text, re.MULTILINE)
        assert sum(int(n) for *_, n in gaps) + len(quoted) == 2000

    def test_replayed_turns_are_quoted_once(self):
        turns = self._turns(3) + [Turn(4, "user", "turn 1 says something", True, said="")]
        text = summarize_conversation(turns)
        assert text.startswith("4 message(s) in the conversation (1 repeating earlier ones)")
        assert text.count("turn 1 says something") == 1

    def test_no_conversation(self):
        assert summarize_conversation([]) == "No conversation yet."


@pytest.mark.parametrize(
    ("text", "path", "expected"),
    [
        ("TODO at src/a.py:12 and docs/b.md:3", None, ["src/a.py:12", "docs/b.md:3"]),
        ("Change sites in a/b.py: f (line 4), g (line 9)", None, ["a/b.py:4", "a/b.py:9"]),
        ("defines Store.open (line 7: opens it)", "m/store.py", ["m/store.py:7"]),
        ("Store.open (line 7) and e.g. 3 more", None, []),  # a name is not a file
        ("README.md:1: # Shop", None, ["README.md:1"]),
    ],
)
def test_citations(text, path, expected):
    assert citations(text, path) == expected


def test_an_agent_handed_off_mid_turn_is_left_with_its_request(memory_dir):
    store = MemoryStore(memory_dir)
    wm = WorkingMemory(store, "a1")
    wm.ensure()
    wm.append_message("user", "Map the auth flow")
    wm.append_message("assistant", "Reading the session module next.")
    content = agent_content(store, "a1")
    assert content.what_was_found.startswith("No findings file of task a1 yet")
    assert content.what_is_left.splitlines() == [
        "- The request is not finished (handed off at the token threshold): "
        "Map the auth flow (`working/a1/messages.jsonl#L1`)",
        "- Last step before the handoff: Reading the session module next. "
        "(`working/a1/messages.jsonl#L2`)",
    ]
    assert "- L1 user: Map the auth flow" in content.conversation_summary
