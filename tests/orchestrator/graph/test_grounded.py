"""Every finding states what it rests on (issue 51 item 2): the tool calls its agent made
and the workdir files they read, from the agent's own tool log, never from its words.

A subagent that submits without a tool call is `ungrounded` in its findings file, the
file's metadata, the registry record, `status` (and `--json`), the lead's digest and the
answer call's digest; a file it lists as examined but never read is marked `not read` (it
exists) or `not found` (it does not), never shown as examined; a file it read but did not
list is shown as examined. A record of an older run, with no tool log, is `unknown`.

Through the real `langchain-openai` client against the scripted server.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from langchain_openai import ChatOpenAI

from orchestrator import artifacts
from orchestrator.agents.langgraph_server import findings_of
from orchestrator.api import Orchestrator
from orchestrator.artifacts.documents import Docs
from orchestrator.artifacts.finding import FindingRecord
from orchestrator.artifacts.registry import Keys, registry_lookup
from tests.orchestrator.openai_server import ScriptedOpenAI
from tests.orchestrator.scripted_agents import agents, findings, offered, text_of

CMD = [sys.executable, "-m", "orchestrator.cli"]
WORKFLOW = """
phases: [exploration, review]
agents:
  scout:
    description: Looks around.
    prompt: AGENT=scout
    tools: [list_files, read_file, grep_files]
"""
KEY = "exploration/look"
UNGROUNDED = "ungrounded: no tool call"


def scout_plan(phase: str) -> dict:
    """One scout in exploration; the review phase plans nothing and ends the task."""
    if phase == "review":
        return {"strategy": "Review what was found.", "subtasks": [], "done": True}
    sub = {"id": "look", "title": "Look", "description": "Look.", "agent": "scout"}
    return {"strategy": "One scout.", "subtasks": [sub]}


def _run(tmp_path: Path, workdir: Path, steps: list, task_id: str):
    (tmp_path / "wf.yaml").write_text(WORKFLOW)
    with ScriptedOpenAI(responder=agents(scout_plan, {"scout": steps})) as server:
        model = ChatOpenAI(
            model="gpt-4o-mini", base_url=server.base_url, api_key="sk-test", max_retries=0
        )
        orch = Orchestrator(workdir=workdir, workflow=tmp_path / "wf.yaml", model=model)
        result = orch.run("Where are errors logged?", task_id=task_id)
    assert result.status == "done", result
    return result, server.requests


def _section(text: str, title: str) -> str:
    found = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |^<!--|\Z)", text, re.M | re.S)
    return found.group(1).strip() if found else ""


def _told(requests: list[dict], tool: str) -> str:
    """What the lead was told in its last request offering `tool` (every message of it)."""
    bodies = [b for b in requests if tool in offered(b)]
    return "\n".join(text_of(m) for m in bodies[-1]["messages"]) if bodies else ""


def _status(task_id: str, cli_env: dict, *json_flag: str) -> str:
    done = subprocess.run(
        [*CMD, "status", "--task", task_id, *json_flag], env=cli_env, capture_output=True,
        text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_finding_without_a_tool_call_is_ungrounded_everywhere(
    fixture_repo, tmp_path, memory_dir, cli_env
):
    """The weak model's case: it submits at once, naming a log file that does not exist."""
    steps = [
        findings(
            "Errors are written to .logs/error.log.",
            key_discoveries=["the error log is .logs/error.log"],
            files=[{"path": ".logs/error.log", "description": "the error log"}],
        )
    ]
    result, requests = _run(tmp_path, fixture_repo, steps, "bare")
    path = memory_dir / result.findings[0]
    text = path.read_text()
    assert re.search(r"^\*\*Grounding\*\*: ungrounded: the agent made no tool call", text, re.M)
    assert _section(text, "Files Examined") == "_None._"
    assert "`.logs/error.log` (not found) - the error log" in _section(
        text, "Files Listed, Not Examined"
    )

    meta = artifacts.read_findings(path)
    assert meta["grounding"] == "ungrounded"
    assert meta["tools"]["calls"] == {} and meta["tools"]["not_found"] == [".logs/error.log"]
    assert meta["files"] == []
    record = registry_lookup(Docs.of(memory_dir), "bare", Keys.findings(KEY))
    assert record["findings"]["tools"]["calls"] == {}
    assert FindingRecord.of(record["findings"]).grounding == "ungrounded"

    # the review phase's lead and the answer call are told it rests on nothing
    lead = _told(requests, "PhasePlan")
    assert f"- {KEY} [completed; {UNGROUNDED}]: Errors are written" in lead
    assert "listed but not examined: .logs/error.log (not found)" in lead
    answer = _told(requests, "SubmitAnswer")
    assert re.search(rf"^- findings/\S+\.md \[completed; {UNGROUNDED}\]", answer, re.M), answer
    assert "listed but not examined: .logs/error.log (not found)" in answer
    assert "files: .logs/error.log" not in answer

    merged = (memory_dir / result.merged["exploration"]).read_text()
    assert f"(completed, {UNGROUNDED})" in merged

    shown = _status("bare", cli_env)
    assert re.search(rf"done +{KEY} \[scout\] \({UNGROUNDED}\)", shown), shown
    assert f"Ungrounded: 1 finding(s) whose agent made no tool call: {KEY}" in shown
    info = json.loads(_status("bare", cli_env, "--json"))
    assert info["ungrounded"] == [KEY]
    assert info["subtasks"][KEY]["grounding"] == "ungrounded"


def test_files_listed_but_not_read_are_not_shown_as_examined(
    fixture_repo, tmp_path, memory_dir, cli_env
):
    """It reads one file and lists three: the one it read, one that exists and one that
    does not; each is shown for what it is."""
    steps = [
        {"tool": "read_file", "args": {"path": "./src/shop/__init__.py"}},
        findings(
            "The shop package holds carts, orders and payments.",
            files=[
                {"path": "src/shop/__init__.py", "description": "the package docstring"},
                {"path": "README.md", "description": "the project's readme"},
                {"path": "src/shop/ghost.py", "description": "the ghost module"},
            ],
        ),
    ]
    result, requests = _run(tmp_path, fixture_repo, steps, "listed")
    text = (memory_dir / result.findings[0]).read_text()
    assert re.search(
        r"^\*\*Grounding\*\*: grounded: 1 tool call \(read_file 1\); 1 workdir file read$",
        text,
        re.M,
    ), text
    assert _section(text, "Files Examined") == "- `src/shop/__init__.py` - the package docstring"
    unread = _section(text, "Files Listed, Not Examined").splitlines()
    assert unread == [
        "- `README.md` (not read) - the project's readme",
        "- `src/shop/ghost.py` (not found) - the ghost module",
    ]
    meta = artifacts.read_findings(memory_dir / result.findings[0])
    assert meta["grounding"] == "grounded"
    assert meta["tools"]["read"] == ["src/shop/__init__.py"]
    assert meta["tools"]["not_read"] == ["README.md"]
    assert meta["tools"]["not_found"] == ["src/shop/ghost.py"]
    answer = _told(requests, "SubmitAnswer")
    assert "  files: src/shop/__init__.py\n" in answer + "\n"
    assert "listed but not examined: README.md (not read), src/shop/ghost.py (not found)" in (
        answer
    )
    assert UNGROUNDED not in answer and UNGROUNDED not in _told(requests, "PhasePlan")
    info = json.loads(_status("listed", cli_env, "--json"))
    assert info["ungrounded"] == [] and info["subtasks"][KEY]["grounding"] == "grounded"
    assert "Ungrounded" not in _status("listed", cli_env)


def test_files_it_read_appear_though_it_listed_none(fixture_repo, tmp_path, memory_dir):
    """A writer that read its file with read_file (and found lines with grep_files) but
    submitted no files: what it read is examined."""
    steps = [
        {"tool": "read_file", "args": {"path": "README.md"}},
        {"tool": "grep_files", "args": {"pattern": "def handle_1", "path": "src"}},
        findings("The readme says what the shop is."),
    ]
    result, requests = _run(tmp_path, fixture_repo, steps, "unlisted")
    text = (memory_dir / result.findings[0]).read_text()
    examined = _section(text, "Files Examined").splitlines()
    assert [line.split(" - ")[0] for line in examined] == ["- `README.md`", "- `src/shop/mod1.py`"]
    assert "Files Listed, Not Examined" not in text
    assert "grounded: 2 tool calls (grep_files 1, read_file 1); 2 workdir files read" in text
    assert "  files: README.md, src/shop/mod1.py" in _told(requests, "SubmitAnswer")


def test_a_finding_of_an_older_run_is_unknown_not_ungrounded():
    """No tool log (a record written before tether kept one): its grounding is unknown, its
    files stay as listed, and no digest calls it ungrounded."""
    old = {
        "status": "completed",
        "summary": "Old finding.",
        "files": [{"path": "a.py", "description": "core"}],
        "path": "findings/researcher-x_20250101T000000000000Z.md",
    }
    record = FindingRecord.of(old)
    assert record.grounding == "unknown" and record.examined() == ["a.py"]
    assert UNGROUNDED not in "\n".join(record.for_lead()) + record.for_answer()
    assert record.ref()["grounding"] == "unknown"
    text = artifacts.findings_text("researcher", task="t", summary="Old finding.")
    assert "**Grounding**: unknown" in text


def test_a_remote_run_s_tool_log_is_its_messages_calls_or_unknown():
    """A remote agent's tool log is what its messages show: their tool calls (the files
    read are not known, so its listed files stay as it listed them); with no messages it
    is unknown, never ungrounded."""
    ai = {"type": "ai", "content": "", "tool_calls": [{"name": "search", "args": {}, "id": "1"}]}
    final = {"type": "ai", "content": "Found it."}
    done = FindingRecord.of(findings_of({"messages": [ai, final]}))
    assert done.grounding == "grounded" and done.tools.calls == {"search": 1}
    bare = FindingRecord.of(findings_of({"messages": [final]}))
    assert bare.grounding == "ungrounded"
    structured = {"summary": "S", "files": [{"path": "a.py", "description": "d"}]}
    unseen = FindingRecord.of(findings_of({"structured_response": structured}))
    assert unseen.grounding == "unknown" and unseen.examined() == ["a.py"]


def test_the_tool_log_counts_answered_calls_and_what_they_read(tmp_path):
    """From the transcript: calls by name (the final call not counted), files from the
    tools' artifacts (an error reads nothing), memory files `memory_read` read; a memory
    file the agent listed and read stays examined."""
    from langchain_core.messages import AIMessage, ToolMessage

    from orchestrator.graph.written import in_workdir, tool_log

    calls = [
        {"name": "read_file", "args": {"path": "a.py"}, "id": "1"},
        {"name": "read_file", "args": {"path": "gone.py"}, "id": "2"},
        {"name": "memory_read", "args": {"path": "facts/shop.md"}, "id": "3"},
        {"name": "SubmitFindings", "args": {"summary": "s"}, "id": "4"},
    ]
    transcript = [
        AIMessage("", tool_calls=calls[:3]),
        ToolMessage("# a.py (lines 1-1 of 1)\n1: x", tool_call_id="1", artifact={"read": ["a.py"]}),
        ToolMessage("Error: path 'gone.py' does not exist", tool_call_id="2", artifact=None),
        ToolMessage("# Shop", tool_call_id="3"),
        AIMessage("", tool_calls=calls[3:]),
        ToolMessage("accepted", tool_call_id="4"),
    ]
    log = tool_log(transcript)
    assert log.calls == {"read_file": 2, "memory_read": 1}
    assert log.read == ["a.py"] and log.memory == ["facts/shop.md"]
    (tmp_path / "a.py").write_text("x\n")
    listed = [{"path": "facts/shop.md", "description": "the fact"},
              {"path": "gone.py", "description": "gone"}]  # fmt: skip
    record = FindingRecord.of({"summary": "s", "files": listed}).with_tools(
        log, in_workdir(tmp_path)
    )
    assert record.examined() == ["facts/shop.md", "a.py"]
    assert record.unread() == ["gone.py (not found)"]
