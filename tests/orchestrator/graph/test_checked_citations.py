"""The answer's sources are checked: only this task's findings files and workdir files that
exist (resolved inside the workdir) are written as its sources, a `file:line` must name a
line the file has, and the answer file says how many citations were checked and which were
not found (`orchestrator.graph.citations`).

Through the real `langchain-openai` client against the scripted server.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from langchain_openai import ChatOpenAI

from orchestrator.api import Orchestrator
from tests.orchestrator.openai_server import ScriptedOpenAI
from tests.orchestrator.scripted_agents import agents, findings, text_of

REPO = Path(__file__).resolve().parents[3]
CMD = [sys.executable, "-m", "orchestrator.cli"]
WORKFLOW = """
phases: [exploration]
agents:
  scout:
    description: Looks around.
    prompt: AGENT=scout
    tools: [list_files, read_file]
"""
STEPS = {"scout": [findings("Retries live in src/adapters.py.", key_discoveries=["retries=3"])]}


def client(server: ScriptedOpenAI) -> ChatOpenAI:
    return ChatOpenAI(
        model="gpt-4o-mini", base_url=server.base_url, api_key="sk-test", max_retries=0
    )


def scout_plan(phase: str) -> dict:
    sub = {"id": "look", "title": "Look", "description": "Look.", "agent": "scout"}
    return {"strategy": "One scout.", "subtasks": [sub]}


def answer_citing(text: str, files: list[str], extra_findings: list[str] = ()):
    def answer(body: dict) -> dict:
        given = text_of(body["messages"][-1])
        source = re.search(r"^- (findings/\S+\.md) \[", given, re.MULTILINE).group(1)
        return {
            "tool": "SubmitAnswer",
            "args": {"answer": text, "findings": [source, *extra_findings], "files": files},
        }

    return answer


def _run(tmp_path, answer) -> tuple[object, str]:
    (tmp_path / "wf.yaml").write_text(WORKFLOW)
    (tmp_path / "src").mkdir(exist_ok=True)
    (tmp_path / "src" / "adapters.py").write_text("import x\n\nRETRIES = 3\n")  # 3 lines
    with ScriptedOpenAI(responder=agents(scout_plan, STEPS, answer=answer)) as server:
        orch = Orchestrator(workdir=tmp_path, workflow=tmp_path / "wf.yaml", model=client(server))
        result = orch.run("How are retries set?", task_id="cite")
    assert result.status == "done", result.failed
    return result, (Path(result.memory_dir) / result.answer_path).read_text()


def _answer_section(text: str) -> str:
    return text[text.index("## Answer") : text.index("## Summary")]


def _labelled(section: str, label: str) -> str:
    found = re.search(rf"^\*\*{label}\*\*: (.*)$", section, re.MULTILINE)
    return found.group(1) if found else ""


def test_false_sources_are_listed_as_not_found_never_as_sources(tmp_path):
    result, text = _run(
        tmp_path,
        answer_citing(
            "RETRIES is 3 (`src/adapters.py:3`).",
            ["src/adapters.py", "../../../etc/passwd", "/etc/shadow", "src/missing.py"],
            ["findings/DOES-NOT-EXIST.md"],
        ),
    )
    section = _answer_section(text)
    sources = _labelled(section, "Workdir files")
    assert sources == "`src/adapters.py`"
    used = _labelled(section, "Findings used")
    assert used.startswith("`findings/") and "DOES-NOT-EXIST" not in used
    # 2 findings, 4 files and one `file:line` of the text checked; 4 not found
    assert _labelled(section, "Citations checked").startswith("7, 4 not found")
    assert "- `findings/DOES-NOT-EXIST.md` (not a finding of this task)" in section
    assert "- `../../../etc/passwd` (outside the workdir)" in section
    assert "- `/etc/shadow` (outside the workdir)" in section
    assert "- `src/missing.py` (not found in the workdir)" in section
    assert result.answer == "RETRIES is 3 (`src/adapters.py:3`)."  # the text as written


def test_a_file_line_past_the_end_of_the_file_fails_the_check(tmp_path):
    _, text = _run(
        tmp_path,
        answer_citing(
            "See src/adapters.py:40 and `src/adapters.py:1-3`.",
            ["src/adapters.py:3", "src/adapters.py:4", "src/adapters.py:2-9"],
        ),
    )
    section = _answer_section(text)
    assert _labelled(section, "Workdir files") == "`src/adapters.py:3`"
    assert _labelled(section, "Citations checked").startswith("6, 3 not found")
    assert "- `src/adapters.py:4` (line 4 is past the end: the file has 3 lines)" in section
    assert "- `src/adapters.py:2-9` (line 9 is past the end: the file has 3 lines)" in section
    assert "- `src/adapters.py:40` (line 40 is past the end: the file has 3 lines)" in section
    assert "src/adapters.py:1-3" not in section.split("**Citations checked**")[1]


def test_an_answer_whose_citations_hold_says_all_were_found(tmp_path):
    _, text = _run(tmp_path, answer_citing("RETRIES = 3.", [str(tmp_path / "src/adapters.py")]))
    section = _answer_section(text)
    assert _labelled(section, "Citations checked") == "2, all found"
    assert _labelled(section, "Workdir files") == f"`{tmp_path / 'src/adapters.py'}`"


def test_a_run_that_ends_without_an_answer_says_so_in_its_report(tmp_path, cli_env):
    """The lead never gives a non-blank answer: `orchestrator run` fails, and its report
    says there is no answer and why, where the answer would be."""
    (tmp_path / "wf.yaml").write_text(WORKFLOW)
    env = {**cli_env, "TETHER_ALLOW_MODEL_REQUESTS": "1", "OPENAI_API_KEY": "sk-test",
           "PYTHONPATH": str(REPO)}  # fmt: skip
    run = [*CMD, "run", "How are retries set?", "--task", "none", "--workdir",
           str(tmp_path), "--workflow", str(tmp_path / "wf.yaml"),
           "--model", "openai:gpt-4o-mini"]  # fmt: skip

    def blank(body: dict) -> dict:
        return {"tool": "SubmitAnswer", "args": {"answer": "  "}}

    with ScriptedOpenAI(responder=agents(scout_plan, STEPS, answer=blank)) as server:
        env["OPENAI_BASE_URL"] = server.base_url
        done = subprocess.run(run, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    lines = done.stdout.splitlines()
    assert lines[0].startswith("Task none: failed"), done.stdout
    assert lines[1] == "No answer: the run failed before the lead answered", done.stdout
    assert not any(ln.startswith("Answer") for ln in lines)
    status = subprocess.run(
        [*CMD, "status", "--task", "none"], env=env, capture_output=True, text=True, timeout=60
    )
    assert "No answer: the run failed before the lead answered" in status.stdout.splitlines()
