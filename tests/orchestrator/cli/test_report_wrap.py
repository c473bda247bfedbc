"""The closing report and `status` show the answer as a person reads it in a terminal:
its lines wrapped at spaces within the terminal's width (`$COLUMNS`), never mid-word, and
Markdown escapes (`\\$`, `click\\_`) shown as the characters they stand for.

Through the `orchestrator` command and the real `langchain-openai` client against the
scripted server, whose lead answers with a long Markdown paragraph.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.orchestrator.openai_server import ScriptedOpenAI
from tests.orchestrator.scripted_agents import agents, findings, one_subtask

REPO = Path(__file__).resolve().parents[3]
CMD = [sys.executable, "-m", "orchestrator.cli"]
WORKFLOW = """
phases: [exploration]
agents:
  scout:
    description: Looks around.
    prompt: AGENT=scout
    tools: [list_files]
"""
WIDTH = 60
ANSWER = (
    "The command line is built with click\\_option decorators, and the memory folder "
    "defaults to \\$HOME/.temp/memory unless TETHER\\_MEMORY\\_DIR names another one; "
    "every subcommand prints one Error line when it fails."
)
WORDS = ANSWER.replace("\\", "").split()


def answer(body: dict) -> dict:
    return {"tool": "SubmitAnswer", "args": {"answer": ANSWER, "findings": []}}


def orch(*args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([*CMD, *args], env=env, capture_output=True, text=True, timeout=120)


def answer_lines(out: str, stop: str) -> list[str]:
    lines = out.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("Answer"))
    block = []
    for line in lines[start + 1 :]:
        if not line.strip() or line.startswith(stop):
            break
        block.append(line)
    return block


def test_the_answer_is_wrapped_at_spaces_and_shown_without_markdown_escapes(tmp_path, cli_env):
    (tmp_path / "wf.yaml").write_text(WORKFLOW)
    env = {**cli_env, "TETHER_ALLOW_MODEL_REQUESTS": "1", "OPENAI_API_KEY": "sk-test",
           "PYTHONPATH": str(REPO), "COLUMNS": str(WIDTH)}  # fmt: skip
    steps = {"scout": [findings("Looked.")]}
    with ScriptedOpenAI(responder=agents(one_subtask("scout"), steps, answer)) as server:
        env["OPENAI_BASE_URL"] = server.base_url
        run = orch(
            "run", "How is the CLI built?", "--task", "w1", "--workdir", str(tmp_path),
            "--workflow", str(tmp_path / "wf.yaml"), "--model", "openai:gpt-4o-mini", env=env,
        )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    status = orch("status", "--task", "w1", env=env)
    for block in (answer_lines(run.stdout, "Memory"), answer_lines(status.stdout, "Plan")):
        assert len(block) > 2, block
        assert max(len(line) for line in block) <= WIDTH, block
        shown = " ".join(block).split()
        assert shown[: len(WORDS)] == WORDS  # whole words, in order, none split
        assert "\\" not in " ".join(block)
    # the answer itself keeps its Markdown (the file and --json are not for a terminal)
    info = json.loads(orch("status", "--task", "w1", "--json", env=env).stdout)
    assert "click\\_option" in info["answer"]["text"]
