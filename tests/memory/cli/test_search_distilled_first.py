"""`memory search` puts what the agents distilled before the records a run keeps for itself:
a finding before a checkpoint's JSON line with the same words, and, after the README's main
job, the finding that answers the README's example query among the first five results.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.clis import memory_cli

REPO = Path(__file__).resolve().parents[3]
QUERY = "session cookie token rotation middleware"
FINDING = (
    "# Findings: researcher-auth\n\n**Summary**: The session cookie is refreshed by the token "
    "rotation middleware before every request, and the rotation window is configured in "
    "settings.\n"
)
CHECKPOINT = {"task_id": "t1", "state": {"note": QUERY, "x": 1}}


def _search(mem: Path, query: str, env: dict, *args: str) -> list[dict]:
    done = memory_cli(["--memory-dir", str(mem), "search", query, *args, "--json"], env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_finding_ranks_before_a_checkpoint_line_with_the_same_words(tmp_path, cli_env):
    mem = tmp_path / "mem"
    (mem / "findings").mkdir(parents=True)
    (mem / "checkpoints").mkdir()
    (mem / "findings" / "researcher-auth_20261207T000000Z.md").write_text(FINDING)
    # the checkpoint's line holds the query's words alone: word for word the stronger match
    (mem / "checkpoints" / "cp_exploration_20261207T000000Z.json").write_text(
        json.dumps(CHECKPOINT, indent=2)
    )
    hits = _search(mem, QUERY, cli_env)
    assert [h["source"] for h in hits] == ["findings", "checkpoints"]


README_QUERY = "what does the orchestrator do"  # README.md, "Then look around"
ANSWER = "a LangGraph graph that runs a lead agent"  # orchestrator/__init__.py's docstring


def test_the_readme_query_finds_its_answer_after_the_readme_main_job(tmp_path, cli_env):
    readme = (REPO / "README.md").read_text()
    assert f'memory search "{README_QUERY}"' in readme
    assert ANSWER in (REPO / "orchestrator" / "__init__.py").read_text()
    mem = tmp_path / "mem"
    env = {**cli_env, "PYTHONPATH": str(REPO)}
    run = subprocess.run(
        [sys.executable, "-m", "orchestrator.cli", "run",
         "Survey this repository: what each package does and how they fit",
         "--workdir", str(REPO), "--memory-dir", str(mem)],
        env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    top = _search(mem, README_QUERY, env, "--limit", "5")
    answering = [h for h in top if ANSWER in h["text"]]
    assert answering and answering[0]["source"] == "findings", [h["citation"] for h in top]
    assert "checkpoints" not in {h["source"] for h in top}
