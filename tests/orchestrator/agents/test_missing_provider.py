"""A model whose provider is not installed is one `Error:` line that says where the model
name came from (`TETHER_MODEL`, `--model`, the workflow file, an agent of it, an API key
variable) and the pip command that installs the provider; nothing is written."""

from __future__ import annotations

import importlib.util

import pytest
from click.testing import CliRunner

from orchestrator.cli import cli

HAIKU = "anthropic:claude-haiku-4-5"
MISSING = f"Error: provider 'anthropic' is not installed for model {HAIKU!r}"
INSTALL = "pip install langchain-anthropic"


@pytest.fixture(autouse=True)
def _anthropic_missing(monkeypatch):
    """`langchain_anthropic` looks absent, whatever this machine has."""
    real = importlib.util.find_spec

    def find_spec(name, *args, **kwargs):
        return None if name == "langchain_anthropic" else real(name, *args, **kwargs)

    monkeypatch.setattr("orchestrator.agents.chat_models.importlib.util.find_spec", find_spec)


CASES = [
    ({"TETHER_MODEL": HAIKU}, [], None, f"{MISSING} (from TETHER_MODEL): {INSTALL}"),
    ({}, ["--model", HAIKU], None, f"{MISSING} (from --model): {INSTALL}"),
    (
        {"ANTHROPIC_API_KEY": "k"},
        [],
        None,
        f"{MISSING} (chosen because ANTHROPIC_API_KEY is set): {INSTALL}",
    ),
    (
        {},
        [],
        f"phases: [a]\nmodel: {HAIKU}\n",
        f"{MISSING} (from the workflow file WF): {INSTALL}",
    ),
    (
        {},
        [],
        f"phases: [a]\nagents:\n  reviewer:\n    model: {HAIKU}\n",
        f"{MISSING} (agent 'reviewer' in WF): {INSTALL}",
    ),
]


@pytest.mark.parametrize(
    ("env", "args", "workflow", "line"),
    CASES,
    ids=["TETHER_MODEL", "--model", "key variable", "workflow model", "agent model"],
)
def test_a_missing_provider_names_where_the_model_came_from(
    tmp_path, memory_dir, env, args, workflow, line
):
    work = tmp_path / "work"
    work.mkdir()
    (work / "notes.md").write_text("notes\n")
    wf = tmp_path / "wf.yaml"
    if workflow is not None:
        wf.write_text(workflow)
        args = [*args, "--workflow", str(wf)]
    result = CliRunner().invoke(cli, ["run", "Survey", "--workdir", str(work), *args], env=env)
    assert result.exit_code == 1, result.output
    assert result.output.splitlines() == [line.replace("WF", str(wf))]
    assert not memory_dir.exists()
