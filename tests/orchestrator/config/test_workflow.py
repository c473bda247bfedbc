"""Workflow YAML: defaults, precedence (skill < file < CLI) and one-line errors.

Covers `orchestrator.config.workflow`: `load_workflow`, `Workflow.with_overrides`,
`phase_index`/`next_phase`/`agent`, and the `WorkflowError` for each kind of bad file.
"""

from __future__ import annotations

import pytest

from orchestrator.config import workflow
from orchestrator.config.workflow import AgentSpec, Workflow, load_workflow
from orchestrator.errors import WorkflowError


def _wf(tmp_path, text, name="wf.yaml"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


class TestDefaults:
    def test_no_file_gives_defaults_from_the_skill(self, tmp_path):
        wf = load_workflow(None, tmp_path)
        assert wf.phases == ["exploration", "planning", "implementation", "review"]
        assert wf.thresholds.token_threshold == 150_000
        assert wf.thresholds.warning_ratio == 0.8
        assert wf.thresholds.warning_tokens == 120_000
        assert wf.thresholds.max_parallel == 4
        assert list(wf.agents) == ["researcher"]
        assert "read_file" in wf.agents["researcher"].tools
        assert wf.model is None and wf.memory_dir is None and wf.source is None

    def test_project_skill_sets_the_default_threshold(self, tmp_path):
        folder = tmp_path / "skills" / "external-memory"
        folder.mkdir(parents=True)
        (folder / "SKILL.md").write_text(
            "---\nname: external-memory\ndescription: d\ntriggers:\n  token_threshold: 9000\n"
            "  warning_ratio: 0.5\n---\n"
        )
        assert load_workflow(None, tmp_path).thresholds.token_threshold == 9000
        wf = load_workflow(_wf(tmp_path, "thresholds:\n  max_parallel: 2\n"), tmp_path)
        assert (
            wf.thresholds.token_threshold,
            wf.thresholds.warning_ratio,
            wf.thresholds.max_parallel,
        ) == (9000, 0.5, 2)

    def test_file_beats_skill_and_cli_beats_file(self, tmp_path):
        path = _wf(
            tmp_path,
            "name: survey\nphases: [scan, write]\nmodel: openai:gpt-4o-mini\n"
            "thresholds:\n  token_threshold: 50000\n"
            "agents:\n  reader:\n    role: reader\n    tools: [read_file]\n"
            "    max_steps: 3\nmemory_dir: mem\n",
        )
        wf = load_workflow(path, tmp_path)
        assert wf.name == "survey" and wf.phases == ["scan", "write"]
        assert wf.thresholds.token_threshold == 50_000
        assert wf.agents == {"reader": AgentSpec(role="reader", tools=["read_file"], max_steps=3)}
        assert wf.source == path.absolute()
        assert wf.resolved_memory_dir() == (tmp_path / "mem").absolute()
        over = wf.with_overrides(token_threshold=1000, max_parallel=8, model="ollama:llama3.1")
        assert (over.thresholds.token_threshold, over.thresholds.max_parallel, over.model) == (
            1000,
            8,
            "ollama:llama3.1",
        )
        assert over.source == wf.source
        assert wf.thresholds.token_threshold == 50_000  # the original is unchanged
        same = wf.with_overrides()
        assert same.model_dump() == wf.model_dump()

    @pytest.mark.parametrize(
        ("kw", "message"),
        [
            ({"token_threshold": 0}, "--token-threshold must be a positive integer, got 0"),
            ({"max_parallel": -2}, "--max-parallel must be a positive integer, got -2"),
        ],
    )
    def test_bad_overrides(self, kw, message):
        with pytest.raises(WorkflowError) as exc:
            Workflow().with_overrides(**kw)
        assert str(exc.value) == message


class TestQueries:
    def test_phase_index_and_next(self):
        wf = Workflow(phases=["a", "b", "c"])
        assert wf.phase_index("b") == 1
        assert wf.next_phase("b") == "c" and wf.next_phase("c") is None
        with pytest.raises(WorkflowError) as exc:
            wf.phase_index("z")
        assert str(exc.value) == "unknown phase 'z'; this workflow's phases are: a, b, c"

    def test_agent_lookup_falls_back_to_the_default(self):
        wf = Workflow(agents={"researcher": AgentSpec(), "critic": AgentSpec(role="critic")})
        assert wf.agent("critic").role == "critic"
        assert wf.agent("unknown").role == "researcher"
        only = Workflow(agents={"solo": AgentSpec(role="solo")})
        assert only.agent(None).role == "solo"


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (
            "phases: [a, b\n",
            "malformed YAML: expected ',' or ']', but got '<stream end>' at line 2",
        ),
        ("name: a\nname: b\n", "malformed YAML: duplicate key 'name' at line 2"),
        (
            "phasez: [a]\n",
            "unknown key 'phasez'; allowed: name, phases, agents, thresholds, model, "
            "model_timeout, tool_timeout, python_tools, mcp_servers, approve_plan, "
            "run_all_phases, memory_dir, status_file, secret_files, budget_tokens",
        ),
        (
            "thresholds:\n  tokens: 5\n",
            "unknown key 'thresholds.tokens'; allowed: "
            "token_threshold, warning_ratio, max_parallel, max_subtasks, max_waves, "
            "subagent_context_tokens, subagent_max_tokens, tool_result_tokens",
        ),
        (
            "agents:\n  r:\n    tool: [x]\n",
            "unknown key 'agents.r.tool'; allowed: role, description, prompt, prompt_file, tools, "
            "model, max_steps, nudges, max_tokens, interrupt_on, skills, remote",
        ),
        ("phases: []\n", "'phases': must name at least one phase (got [])"),
        (
            "phases: [a, b, a]\n",
            "'phases': phase 'a' is listed more than once (got ['a', 'b', 'a'])",
        ),
        (
            "phases: ['a/b']\n",
            "'phases': phase 'a/b' must be letters, digits, '.', '_' or '-' "
            "(it is used in file names) (got ['a/b'])",
        ),
        ("phases: [1, 2]\n", "'phases.0': Input should be a valid string (got 1)"),
        ("phases: a\n", "'phases': Input should be a valid list (got 'a')"),
        (
            "agents:\n  r:\n    tools: [read_file, 3]\n",
            "'agents.r.tools.1': Input should be a valid string (got 3)",
        ),
        (
            "agents:\n  r:\n    tools: read_file\n",
            "'agents.r.tools': Input should be a valid list (got 'read_file')",
        ),
        (
            "agents:\n  r:\n    max_steps: 0\n",
            "'agents.r.max_steps': Input should be greater than 0 (got 0)",
        ),
        (
            "agents:\n  r:\n    nudges: -1\n",
            "'agents.r.nudges': Input should be greater than or equal to 0 (got -1)",
        ),
        ("agents: {}\n", "agents: must define at least one agent (or leave 'agents' out)"),
        (
            "agents:\n  lead:\n    max_tokens: 100\n  r: {}\n",
            "agent 'lead': max_tokens caps a subagent, not the lead (whose calls the task's "
            "--budget-tokens bounds); drop it",
        ),
        (
            "thresholds:\n  token_threshold: 0\n",
            "'thresholds.token_threshold': Input should be greater than 0 (got 0)",
        ),
        (
            "thresholds:\n  token_threshold: -5\n",
            "'thresholds.token_threshold': Input should be greater than 0 (got -5)",
        ),
        (
            "thresholds:\n  token_threshold: '1000'\n",
            "'thresholds.token_threshold': Input should be a valid integer (got '1000')",
        ),
        (
            "thresholds:\n  max_parallel: 0\n",
            "'thresholds.max_parallel': Input should be greater than 0 (got 0)",
        ),
        (
            "thresholds:\n  warning_ratio: 2\n",
            "'thresholds.warning_ratio': Input should be less than or equal to 1 (got 2)",
        ),
        (
            "thresholds:\n  warning_ratio: yes\n",
            "'thresholds.warning_ratio': must be a number between 0 and 1 (got True)",
        ),
        (
            "thresholds: 5\n",
            "'thresholds': Input should be a valid dictionary or instance of Thresholds (got 5)",
        ),
        ("- a\n- b\n", "must be a mapping of keys such as 'phases' and 'agents', got list"),
        ("", "is empty; give at least 'phases:' or drop --workflow"),
        ("# only a comment\n", "is empty; give at least 'phases:' or drop --workflow"),
    ],
)
def test_bad_workflow_files(tmp_path, text, problem):
    path = _wf(tmp_path, text)
    with pytest.raises(WorkflowError) as exc:
        load_workflow(path, tmp_path)
    sep = " " if problem.startswith(("must be", "is empty")) else ": "
    assert str(exc.value) == f"workflow file {str(path)!r}{sep}{problem}"


@pytest.mark.parametrize(
    ("setup", "problem"),
    [
        (lambda p: None, "not found; check the path"),
        (lambda p: p.mkdir(), "is a directory, not a file"),
        (lambda p: p.write_bytes(b"phases: [\xff]\n"), "is not UTF-8 text"),
    ],
)
def test_unreadable_workflow_files(tmp_path, setup, problem):
    path = tmp_path / "wf.yaml"
    setup(path)
    with pytest.raises(WorkflowError) as exc:
        load_workflow(path, tmp_path)
    assert str(exc.value) == f"workflow file {str(path)!r} {problem}"


def test_python_objects_in_yaml_are_refused(tmp_path):
    path = _wf(tmp_path, "name: !!python/object/apply:os.system ['echo hacked']\n")
    with pytest.raises(WorkflowError) as exc:
        load_workflow(path, tmp_path)
    assert str(exc.value).startswith(
        f"workflow file {str(path)!r}: malformed YAML: could not determine a constructor for "
        "the tag 'tag:yaml.org,2002:python/object/apply:os.system'"
    )


def test_default_phases_constant():
    assert workflow.DEFAULT_PHASES == ("exploration", "planning", "implementation", "review")


def test_known_tools_are_the_tools_a_run_builds(tmp_path):
    """`KNOWN_TOOLS` (what a workflow may name) matches the workdir and memory tools."""
    from memory import MemoryStore
    from memory.facts.tools import memory_tools
    from orchestrator.tools.workdir import workdir_tools
    from orchestrator.tools.workdir_write import write_tools

    store = MemoryStore(tmp_path / "mem")
    built = [t.name for t in workdir_tools(tmp_path)]
    built += [t.name for t in write_tools(tmp_path, store)]
    built += [t.name for t in memory_tools(store, task_id="t")]
    assert sorted(workflow.KNOWN_TOOLS) == sorted(built)
