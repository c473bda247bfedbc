"""`memory search` after the offline survey: the README's own example, on a small project.

The survey reads the project's files, and the README it reads is large enough to be offloaded
as an entry (raw tool output) that holds the search command itself. The search must answer
from what the agents distilled (findings, plans, snapshots, notes), not from the README's
chunks or the conversation log quoting the same words (`memory.search.recall.SOURCE_WEIGHTS`).
"""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from memory.cli.app import cli as memory_cli
from orchestrator.cli.app import cli as orchestrator_cli

OBJECTIVE = "Survey this repository: what each package does and how they fit"
QUESTION = "what does the orchestrator graph do"
PURPOSE = "a LangGraph graph that runs a lead agent and subagents in phases"
README = (
    "# tether\n\nLong multi-agent work.\n\n```bash\n"
    f'orchestrator run "{OBJECTIVE}" --workdir .\n'
    f'memory search "{QUESTION}" --limit 3\n```\n\n'
    + "".join(
        f"The orchestrator graph runs phase {i}: what does the graph do at step {i}?\n"
        for i in range(600)  # ~45 KB: well over the offline model's limit, offloaded as an entry
    )
)
FILES = {
    "README.md": README,
    "orchestrator/__init__.py": f'"""tether\'s orchestrator: {PURPOSE}."""\n',
    "orchestrator/graph.py": '"""The graph: plan, spawn, merge, advance."""\n\n\n'
    "def run_graph(state):\n    return state\n",
    "memory/__init__.py": '"""tether\'s external memory: files a person reads, and recall."""\n',
    "memory/search/recall.py": '"""Ranked recall over all of memory."""\n',
}


def _search(memory_dir: Path, *args: str) -> list[dict]:
    shown = CliRunner().invoke(
        memory_cli, ["--memory-dir", str(memory_dir), "search", QUESTION, *args, "--json"]
    )
    assert shown.exit_code == 0, shown.output
    return json.loads(shown.output)


def test_the_readme_search_answers_from_findings_not_from_the_readme(tmp_path):
    work = tmp_path / "work"
    for rel, text in FILES.items():
        (work / rel).parent.mkdir(parents=True, exist_ok=True)
        (work / rel).write_text(text)
    mem = tmp_path / "mem"
    ran = CliRunner().invoke(
        orchestrator_cli, ["run", OBJECTIVE, "--workdir", str(work), "--memory-dir", str(mem)]
    )
    assert ran.exit_code == 0, ran.output
    raw = _search(mem, "--scope", "entries", "--limit", "3")
    assert any(QUESTION in hit["text"] for hit in raw)  # the README was offloaded, command and all
    top = _search(mem, "--limit", "3")
    assert [hit["source"] for hit in top] == ["findings"] * 3
    assert any(PURPOSE in hit["text"] for hit in top)  # what the orchestrator package does
