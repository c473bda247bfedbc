"""Settings precedence (`orchestrator.config.settings`), through the public CLI, the Python API and
files on disk.

Layers, lowest first: defaults < the external-memory skill < the workflow file < the
environment < the task's recorded options (resume) < flags / arguments. Each test sets a
value in one layer and checks it wins over every layer below it; an invalid value is one
`Error:` line naming where it was set.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from orchestrator import Orchestrator
from orchestrator.cli.app import cli
from orchestrator.errors import OrchestratorUserError
from tests.orchestrator.conftest import build_repo

SKILL = """---
name: external-memory
description: Saves a long task's plan, findings and snapshots as files.
triggers:
  token_threshold: {threshold}
---

# External Memory
"""


def _skill(project: Path, threshold: object) -> Path:
    path = project / "skills" / "external-memory" / "SKILL.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(SKILL.format(threshold=threshold))
    return path


def _workflow(tmp_path: Path, extra: str = "") -> Path:
    path = tmp_path / "wf.yaml"
    path.write_text("name: one\nphases: [exploration]\n" + extra)
    return path


def _start_event(output: str) -> dict:
    events = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
    return next(e for e in events if e.get("event") == "start")


class TestLimits:
    """`token_threshold` (default, skill, workflow, flag) and `max_parallel` (default,
    workflow, flag), as the `start` event of `orchestrator run --json` reports them."""

    @pytest.mark.parametrize(
        ("skill", "workflow", "flags", "expected"),
        [
            (None, "", [], (150_000, 4)),
            (9000, "", [], (9000, 4)),
            (9000, "thresholds:\n  token_threshold: 7000\n  max_parallel: 2\n", [], (7000, 2)),
            (
                9000,
                "thresholds:\n  token_threshold: 7000\n  max_parallel: 2\n",
                ["--token-threshold", "5000", "--max-parallel", "3"],
                (5000, 3),
            ),
        ],
        ids=["default", "skill", "workflow", "flag"],
    )
    def test_each_layer_wins_over_the_ones_below(self, tmp_path, skill, workflow, flags, expected):
        if skill is not None:
            _skill(tmp_path, skill)  # the project directory is the cwd
        repo = build_repo(tmp_path / "repo", modules=1, docs=0, readme=False)
        args = ["run", "Survey the shop", "--workdir", str(repo), "--json"]
        args += ["--workflow", str(_workflow(tmp_path, workflow)), *flags]
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 0, result.output
        start = _start_event(result.output)
        assert (start["token_threshold"], start["max_parallel"]) == expected

    def test_a_resumed_task_keeps_its_options_unless_an_argument_changes_them(self, tmp_path):
        repo = build_repo(tmp_path / "repo", modules=1, docs=0, readme=False)
        workflow = _workflow(tmp_path, "thresholds:\n  token_threshold: 7000\n")
        with Orchestrator(workdir=repo, workflow=workflow, token_threshold=5000) as orch:
            orch.run("Survey the shop", task_id="t1")
        with Orchestrator(workflow=workflow) as later:  # the task's 5000 over the file's
            record = later.task_record("t1")
            settings = later.settings_for(later.workflow, record)
            assert (settings.token_threshold, settings.sources["token_threshold"]) == (
                5000,
                "task",
            )
        with Orchestrator(workflow=workflow, token_threshold=3000) as later:
            assert later.settings_for(later.workflow, record).token_threshold == 3000


class TestModel:
    """The model: default (offline) < workflow < `$TETHER_MODEL` < `--model`."""

    @pytest.mark.parametrize(
        ("workflow", "env", "argument", "expected"),
        [
            ("", None, None, ("tether:offline", "default")),
            ("model: ollama:llama3.1\n", None, None, ("ollama:llama3.1", "workflow")),
            ("model: ollama:llama3.1\n", "groq:x", None, ("groq:x", "TETHER_MODEL")),
            ("model: ollama:llama3.1\n", "groq:x", "offline", ("offline", "--model")),
        ],
        ids=["default", "workflow", "environment", "argument"],
    )
    def test_each_layer_wins_over_the_ones_below(
        self, tmp_path, monkeypatch, workflow, env, argument, expected
    ):
        if env is not None:
            monkeypatch.setenv("TETHER_MODEL", env)
        orch = Orchestrator(workflow=_workflow(tmp_path, workflow), model=argument)
        assert (orch.settings.model, orch.settings.sources["model"]) == expected

    def test_the_cli_flag_wins_over_the_environment_and_the_workflow(self, tmp_path):
        repo = build_repo(tmp_path / "repo", modules=1, docs=0, readme=False)
        workflow = _workflow(tmp_path, "model: openai:gpt-4o-mini\n")
        args = ["run", "Survey", "--workdir", str(repo), "--workflow", str(workflow)]
        runner = CliRunner()
        refused = runner.invoke(cli, args, env={"TETHER_MODEL": "openai:gpt-from-env"})
        assert refused.exit_code == 1  # real models are refused in tests
        assert "cannot use 'openai:gpt-from-env'" in refused.output  # env over the workflow
        ran = runner.invoke(cli, [*args, "--model", "offline", "--json"])
        assert ran.exit_code == 0, ran.output
        assert _start_event(ran.output)["model"] == "tether:offline"

    @pytest.mark.parametrize(
        ("workflow", "env", "argument", "expected"),
        [
            ("", None, None, (120.0, "default")),
            ("model_timeout: 30\n", None, None, (30.0, "workflow")),
            ("model_timeout: 30\n", "20", None, (20.0, "TETHER_MODEL_TIMEOUT")),
            ("model_timeout: 30\n", "20", 10.0, (10.0, "flag")),
        ],
        ids=["default", "workflow", "environment", "argument"],
    )
    def test_the_timeout_layers(self, tmp_path, monkeypatch, workflow, env, argument, expected):
        if env is not None:
            monkeypatch.setenv("TETHER_MODEL_TIMEOUT", env)
        orch = Orchestrator(workflow=_workflow(tmp_path, workflow), model_timeout=argument)
        assert (orch.settings.model_timeout, orch.settings.sources["model_timeout"]) == expected


class TestMemory:
    """Where the memory is: default < workflow `memory_dir` < `$TETHER_MEMORY_DIR` <
    `--memory-dir`; `$TETHER_MEMORY_URL` < `--memory-url`."""

    @pytest.mark.parametrize(
        ("workflow", "env", "argument", "expected"),
        [
            (False, False, False, ".temp/memory"),
            (True, False, False, "from-workflow"),
            (True, True, False, "from-env"),
            (True, True, True, "from-flag"),
        ],
        ids=["default", "workflow", "environment", "flag"],
    )
    def test_the_memory_directory_layers(
        self, tmp_path, monkeypatch, workflow, env, argument, expected
    ):
        monkeypatch.delenv("TETHER_MEMORY_DIR")
        if env:
            monkeypatch.setenv("TETHER_MEMORY_DIR", str(tmp_path / "from-env"))
        wf = _workflow(tmp_path, "memory_dir: from-workflow\n" if workflow else "")
        orch = Orchestrator(workflow=wf, memory_dir=tmp_path / "from-flag" if argument else None)
        assert orch.layout.root == tmp_path / expected
        assert orch.docs.location == str(tmp_path / expected)

    def test_the_group_flag_sets_the_directory_without_touching_the_environment(self, tmp_path):
        target = tmp_path / "elsewhere"
        result = CliRunner().invoke(cli, ["--memory-dir", str(target), "status", "--task", "x"])
        assert result.output.startswith(f"Error: unknown task 'x' in '{target}'")
        assert os.environ["TETHER_MEMORY_DIR"] == str(tmp_path / "memory")

    def test_the_url_flag_wins_over_the_environment(self):
        runner = CliRunner()
        env = {"TETHER_MEMORY_URL": "sqlite:///from-env"}
        from_env = runner.invoke(cli, ["status"], env=env)
        assert from_env.output.strip() == (
            "Error: TETHER_MEMORY_URL must be postgresql://... for the orchestrator"
        )
        flag = runner.invoke(cli, ["status", "--memory-url", "sqlite:///from-flag"], env=env)
        assert flag.output.strip() == (
            "Error: --memory-url must be postgresql://... for the orchestrator"
        )


class TestInvalid:
    """An invalid value is one `Error:` line naming its source, exit code 1."""

    def test_skill(self, tmp_path):
        path = _skill(tmp_path, -1)
        result = CliRunner().invoke(cli, ["run", "Survey"])
        assert result.exit_code == 1
        assert result.output.strip().splitlines()[-1] == (
            f"Error: skill file '{path}': token_threshold must be a positive integer, got -1"
        )

    def test_workflow(self, tmp_path):
        path = _workflow(tmp_path, "thresholds:\n  max_parallel: 0\n")
        result = CliRunner().invoke(cli, ["run", "Survey", "--workflow", str(path)])
        assert result.exit_code == 1
        assert result.output.strip() == (
            f"Error: workflow file '{path}': 'thresholds.max_parallel': "
            "Input should be greater than 0 (got 0)"
        )

    def test_environment(self, tmp_path):
        repo = build_repo(tmp_path / "repo", modules=1, docs=0, readme=False)
        result = CliRunner().invoke(
            cli, ["run", "Survey", "--workdir", str(repo)], env={"TETHER_MODEL_TIMEOUT": "soon"}
        )
        assert result.exit_code == 1
        assert result.output.strip() == (
            "Error: TETHER_MODEL_TIMEOUT 'soon' is not a positive number of seconds; e.g. 60"
        )

    def test_flag(self):
        result = CliRunner().invoke(cli, ["run", "Survey", "--max-parallel", "0"])
        assert result.exit_code == 1
        assert result.output.strip() == (
            "Error: Invalid value for '--max-parallel': 0 is not in the range x>=1."
        )

    @pytest.mark.parametrize(
        ("kwargs", "message"),
        [
            ({"max_parallel": 0}, "max parallel 0 must be at least 1"),
            ({"token_threshold": -5}, "token threshold -5 must be a positive number of tokens"),
            ({"max_subtasks": 0}, "max subtasks 0 must be at least 1"),
            (
                {"model_timeout": -1},
                "model_timeout argument -1 is not a positive number of seconds; e.g. 60",
            ),
        ],
    )
    def test_argument(self, kwargs, message):
        with pytest.raises(OrchestratorUserError) as info:
            Orchestrator(**kwargs)
        assert str(info.value) == message
