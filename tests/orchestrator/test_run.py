"""An offline run end to end through the Python API: phases, files, checkpoints, failures."""

from __future__ import annotations

import json
import re

import jsonschema
import pytest
from langchain_core.messages import AIMessage

from orchestrator.api import Orchestrator
from orchestrator.artifacts.checkpoint import SCHEMA_PATH
from orchestrator.offline import OfflineChatModel, ResearchPolicy
from orchestrator.state import merge_keyed


def _meta(path):
    match = re.search(r"<!-- tether:\w+ (.*) -->", path.read_text(encoding="utf-8"))
    assert match, f"{path} has no metadata block"
    return json.loads(match.group(1))


@pytest.fixture
def run(fixture_repo, tiny_workflow, memory_dir):
    events: list[dict] = []
    orch = Orchestrator(workdir=fixture_repo, workflow=tiny_workflow, on_event=events.append)
    result = orch.run("Survey the shop service", task_id="shop")
    return result, events, memory_dir


class TestOfflineRun:
    def test_finishes_every_phase(self, run):
        result, events, _ = run
        assert result.status == "done"
        assert result.offline is True
        assert [e["phase"] for e in events if e["event"] == "phase"][:2] == [
            "exploration",
            "review",
        ]
        assert set(result.merged) == {"exploration", "review", "final"}
        assert result.failed == {}

    def test_writes_plan_findings_merged_checkpoints_snapshot(self, run):
        result, _, mem = run
        plan = (mem / "research_plans" / "shop.md").read_text()
        assert "Survey the shop service" in plan and "## Progress" in plan
        final = result.merged["final"]
        assert f"1. None: the task is done; the answer is in `{final}`." in plan
        # the answer opens the plan and the final synthesis; the offline model says what it is
        assert plan.index("## Answer") < plan.index("## Strategy")
        assert result.answer and result.answer.splitlines()[0] in plan
        synthesis = (mem / final).read_text()
        assert synthesis.index("## Answer") < synthesis.index("## Summary")
        assert "Extractive answer by tether's offline model (not an LLM)" in synthesis
        assert result.answer_path == final
        agent_files = sorted(
            p for p in (mem / "findings").glob("*.md") if not p.name.startswith("merged_")
        )
        merged = sorted((mem / "findings").glob("merged_*.md"))
        assert len(agent_files) == len(result.findings) == 6  # 3 areas x 2 phases
        assert len(merged) == 3  # one per phase + the final summary
        assert [p.name.split("_")[0] for p in (mem / "checkpoints").glob("*.json")]
        assert list((mem / "context_snapshots").glob("snap_*.md"))
        subtasks = {_meta(p)["subtask_id"] for p in agent_files}
        assert len(subtasks) == 6 and all(
            s.split("/")[0] in {"exploration", "review"} for s in subtasks
        )

    def test_findings_cite_real_files_of_the_workdir(self, run, fixture_repo):
        result, _, mem = run
        cited = {f["path"] for p in result.findings for f in _meta(mem / p)["files"]}
        assert cited and all((fixture_repo / c).is_file() for c in cited)

    def test_every_checkpoint_validates_against_the_shipped_schema(self, run):
        result, _, mem = run
        schema = json.loads(SCHEMA_PATH.read_text())
        paths = sorted((mem / "checkpoints").glob("cp_*.json"))
        triggers = set()
        for path in paths:
            data = json.loads(path.read_text())
            jsonschema.validate(data, schema)
            assert path.stem == data["checkpoint_id"]
            triggers.add(data["extra"]["trigger"])
        assert {"before_spawning", "agent_completion", "phase_transition"} <= triggers
        names = {p.name.split("_")[1] for p in paths}
        assert names == {"exploration", "review"}

    def test_the_result_lists_the_task_s_checkpoints_newest_first(
        self, run, fixture_repo, tiny_workflow
    ):
        # another task in the same memory: its checkpoints are not the first task's
        result, _, mem = run
        other = Orchestrator(workdir=fixture_repo, workflow=tiny_workflow).run(
            "Survey the shop service again", task_id="again"
        )
        for res in (result, other):
            own = [
                f"checkpoints/{p.name}"
                for p in (mem / "checkpoints").glob("cp_*.json")
                if json.loads(p.read_text())["task_id"] == res.task_id
            ]
            assert len(own) >= 5 and sorted(res.checkpoints) == sorted(own)
            stamps = [json.loads((mem / c).read_text())["timestamp"] for c in res.checkpoints]
            assert stamps == sorted(stamps, reverse=True)

    def test_lead_messages_are_logged_in_working_memory(self, run):
        _, _, mem = run
        lines = (mem / "working" / "shop" / "messages.jsonl").read_text().splitlines()
        roles = [json.loads(line)["role"] for line in lines]
        assert "assistant" in roles and "user" in roles


def test_reducer_is_keyed_and_idempotent():
    a = {"x/1": {"v": 1}}
    b = {"x/2": {"v": 2}, "x/1": {"v": 1}}
    once = merge_keyed(a, b)
    assert merge_keyed(once, b) == once == {"x/1": {"v": 1}, "x/2": {"v": 2}}
    assert merge_keyed(once, {"x/1": None}) == {"x/2": {"v": 2}}


def test_build_graph_is_importable_with_the_designed_nodes():
    from orchestrator.graph.build import build_graph

    graph = build_graph()
    assert {"plan", "spawn", "subagent", "merge", "monitor", "advance"} <= set(graph.nodes)


class _FailOne:
    """The offline policy, except that the subagent of one area raises."""

    def __init__(self, area: str):
        self.area = area
        self.inner = ResearchPolicy()

    def __call__(self, messages, tools) -> AIMessage:
        text = "\n".join(str(m.content) for m in messages)
        if f"Subtask: exploration-{self.area}" in text and self.area != "-":
            raise RuntimeError("provider timed out")
        return self.inner(messages, tools)


def test_a_failing_subagent_is_blocked_and_retried_on_resume(
    fixture_repo, tiny_workflow, memory_dir
):
    policy = _FailOne("docs")
    orch = Orchestrator(
        workdir=fixture_repo, workflow=tiny_workflow, model=OfflineChatModel(policy=policy)
    )
    result = orch.run("Survey the shop service", task_id="flaky")
    assert list(result.failed) == ["exploration/exploration-docs"]
    assert "provider timed out" in result.failed["exploration/exploration-docs"]["error"]
    # the task stops failed after the phase: the other subagents were spared, and the next
    # phase is not planned without the failed agent's finding
    assert result.status == "failed"
    assert len(result.findings) == 2
    assert orch.status("flaky")["status"] == "failed"
    assert not any(k.startswith("review/") for k in orch.status("flaky")["subtasks"])
    blocked = [
        json.loads(p.read_text())["state"]["blocked_agents"]
        for p in sorted((memory_dir / "checkpoints").glob("*.json"))
    ]
    assert any("researcher:exploration/exploration-docs" in b for b in blocked)

    policy.area = "-"  # the provider recovered
    before = {p.name for p in (memory_dir / "findings").glob("researcher-*.md")}
    resumed = orch.resume("flaky")
    after = {p.name for p in (memory_dir / "findings").glob("researcher-*.md")}
    assert resumed.status == "done" and resumed.failed == {}
    assert len(resumed.findings) == 6
    new = after - before
    # only the failed subagent of the first phase ran again; the review phase ran once
    assert [n for n in new if n.startswith("researcher-exploration-")] == [
        next(n for n in new if n.startswith("researcher-exploration-docs_"))
    ]
    assert len([n for n in new if n.startswith("researcher-review-")]) == 3


def test_public_api():
    import orchestrator

    assert orchestrator.__all__ == sorted(orchestrator.__all__)
    assert {
        "Orchestrator",
        "RunResult",
        "Workflow",
        "build_graph",
        "OrchestratorError",
        "PhasePlan",
        "SubmitFindings",
    } <= set(orchestrator.__all__)
    for name in orchestrator.__all__:
        assert getattr(orchestrator, name) is not None


class TestAgentLoop:
    """The tool-calling loop every agent runs (`orchestrator.agents.loop`)."""

    def _tool(self):
        from langchain_core.tools import tool

        @tool
        def echo(text: str) -> str:
            """Echo `text` back, many times over."""
            if text == "boom":
                raise ValueError("bad input")
            return text * 5000

        return echo

    def test_tool_errors_go_back_to_the_model_and_the_final_call_is_parsed(self):
        from langchain_core.messages import HumanMessage, SystemMessage, ToolMessage

        from orchestrator.agents.loop import run_agent
        from orchestrator.types import SubmitFindings

        model = OfflineChatModel(
            policy=[
                AIMessage("", tool_calls=[{"name": "echo", "args": {"text": "boom"}, "id": "1"}]),
                AIMessage(
                    "",
                    tool_calls=[
                        {
                            "name": "SubmitFindings",
                            "id": "2",
                            "args": {"summary": "ok", "key_discoveries": ["a"]},
                        }
                    ],
                ),
            ]
        )
        result = run_agent(
            model,
            tools=[self._tool()],
            final_tool=SubmitFindings,
            messages=[SystemMessage("s"), HumanMessage("go")],
        )
        assert result.final.summary == "ok" and result.final.key_discoveries == ["a"]
        errors = [m for m in result.transcript if isinstance(m, ToolMessage)]
        assert errors[0].content == "Error: ValueError: bad input"
        assert result.tokens > 0

    def test_parallel_runs_sharing_model_and_tools_keep_their_own_results(self):
        """The compiled agent is shared; each run's steps, answer and tokens are its own."""
        import threading

        from langchain_core.messages import HumanMessage, SystemMessage
        from langchain_core.tools import tool

        from orchestrator.agents.loop import run_agent
        from orchestrator.types import SubmitFindings

        def policy(messages, tools):
            task = str(messages[1].content)
            n = sum(1 for m in messages if m.type == "tool")
            if n < int(task.split()[-1]):
                return AIMessage(
                    "", tool_calls=[{"name": "echo", "args": {"text": task}, "id": None}]
                )
            args = {"summary": f"{task} after {n} calls", "key_discoveries": [task]}
            return AIMessage("", tool_calls=[{"name": "SubmitFindings", "args": args, "id": None}])

        @tool
        def echo(text: str) -> str:
            """Echo `text` back."""
            return text

        model = OfflineChatModel(policy=policy)
        results: dict[int, object] = {}
        barrier = threading.Barrier(4)

        def run(k: int) -> None:
            barrier.wait()
            results[k] = run_agent(
                model,
                tools=[echo],
                final_tool=SubmitFindings,
                messages=[SystemMessage("s"), HumanMessage(f"task {k}")],
                max_steps=8,
            )

        threads = [threading.Thread(target=run, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for k in range(4):
            assert results[k].final.summary == f"task {k} after {k} calls"
            assert [c["args"]["text"] for c in results[k].tool_calls] == [f"task {k}"] * k
            assert len(results[k].context_tokens) == k + 1

    def test_context_stays_within_budget_and_steps_are_bounded(self):
        from langchain_core.messages import HumanMessage, SystemMessage

        from orchestrator.agents.loop import run_agent
        from orchestrator.agents.provider import approx_tokens
        from orchestrator.errors import AgentLoopError
        from orchestrator.types import SubmitFindings

        sent: list[int] = []

        def never_finishes(messages, tools):
            sent.append(approx_tokens(messages))
            return AIMessage(
                "", tool_calls=[{"name": "echo", "args": {"text": "word "}, "id": f"c{len(sent)}"}]
            )

        with pytest.raises(AgentLoopError, match="within 5 steps"):
            run_agent(
                OfflineChatModel(policy=never_finishes),
                tools=[self._tool()],
                final_tool=SubmitFindings,
                max_steps=5,
                max_context_tokens=3000,
                messages=[SystemMessage("s"), HumanMessage("go")],
            )
        # 5 steps + 1 "finish now" call (forced) + 1 asking for it in words (the model
        # called another tool instead), each sent a trimmed context although every tool
        # result alone is ~6,000 tokens
        assert len(sent) == 7 and max(sent) <= 3000

    def test_fit_context_drops_whole_old_exchanges(self):
        from langchain_core.messages import HumanMessage, SystemMessage, ToolMessage

        from orchestrator.agents.provider import approx_tokens, fit_context

        messages = [SystemMessage("s"), HumanMessage("task")]
        for i in range(10):
            messages.append(AIMessage("", tool_calls=[{"name": "t", "args": {}, "id": f"{i}"}]))
            messages.append(ToolMessage("x" * 2000, tool_call_id=f"{i}"))
        fitted = fit_context(messages, 1500)
        assert approx_tokens(fitted) <= 1500
        assert fitted[:2] == messages[:2]
        assert isinstance(fitted[2], AIMessage)  # never a tool result without its call
        assert fitted[-1] is messages[-1]


def test_the_lead_sees_the_memory_index_on_its_first_call_only(fixture_repo, tiny_workflow):
    """Long-term memory from earlier tasks is announced at iteration 1."""
    Orchestrator(workdir=fixture_repo, workflow=tiny_workflow).run("Survey the shop", task_id="a")
    systems: list[str] = []
    inner = ResearchPolicy()

    def recording(messages, tools):
        system = str(messages[0].content)
        if any(t["function"]["name"] == "PhasePlan" for t in tools) and system not in systems:
            systems.append(system)
        return inner(messages, tools)

    Orchestrator(
        workdir=fixture_repo, workflow=tiny_workflow, model=OfflineChatModel(policy=recording)
    ).run("Review the shop", task_id="b")
    assert len(systems) == 2  # one context per planning turn (one turn per phase)
    assert "Available memory:" in systems[0] and "episodes/" in systems[0]
    assert "Available memory:" not in systems[1]
    assert all("external-memory" in s for s in systems)  # the skills index, every time


@pytest.mark.parametrize("limit", [1, 2])
def test_max_parallel_bounds_the_subagents_running_at_once(fixture_repo, tiny_workflow, limit):
    running: set[str] = set()
    peak = 0

    def watch(event):
        nonlocal peak
        if event["event"] == "agent" and event["state"] == "running":
            running.add(event["key"])
        elif event["event"] == "agent" and event["state"] in ("done", "failed"):
            running.discard(event["key"])
        peak = max(peak, len(running))

    Orchestrator(
        workdir=fixture_repo, workflow=tiny_workflow, max_parallel=limit, on_event=watch
    ).run("Survey the shop service", task_id=f"p{limit}")
    assert 1 <= peak <= limit


def test_workflow_max_subtasks_bounds_each_wave(fixture_repo, tmp_path, memory_dir):
    workflow = tmp_path / "one.yaml"
    workflow.write_text("phases: [exploration, review]\nthresholds:\n  max_subtasks: 1\n")
    events: list[dict] = []
    result = Orchestrator(workdir=fixture_repo, workflow=workflow, on_event=events.append).run(
        "Survey", task_id="one"
    )
    assert result.status == "done"
    plans = [e for e in events if e["event"] == "plan"]
    assert all(len(e["subtasks"]) <= 1 for e in plans)  # one subtask per wave, not three
    # the exploration phase goes on in waves until its areas are covered
    explored = [e for e in plans if e["phase"] == "exploration" and e["subtasks"]]
    assert [e["wave"] for e in explored] == list(range(1, len(explored) + 1))
    assert len(explored) > 1 and not explored[-1]["continue_phase"]
    phases = sorted(_meta(memory_dir / f)["phase"] for f in result.findings)
    assert phases.count("exploration") == len(explored) and "review" in phases


def test_overview_tracks_the_task_and_keeps_the_agents_sections(run):
    result, _, mem = run
    from orchestrator.artifacts import sections

    overview = sections((mem / "working" / "shop" / "overview.md").read_text())
    assert overview["Current Task"].startswith("Survey the shop service\n\nPhase: review (2/2")
    assert "Workdir (read-only for the agents): `" in overview["Known Context"]
    recent = overview["Recent Operations"].splitlines()
    assert [line.split(" of phase ")[1].split()[0] for line in recent] == ["review", "exploration"]
    assert overview["Key Decisions"] == "<!-- Important decisions made and why -->"


def test_status_lists_subtasks_in_workflow_phase_order(fixture_repo, tmp_path):
    workflow = tmp_path / "order.yaml"
    workflow.write_text("phases: [survey, analysis]\n")  # not alphabetical on purpose
    orch = Orchestrator(workdir=fixture_repo, workflow=workflow)
    orch.run("Survey the shop service", task_id="order")
    phases = [v["phase"] for v in orch.status("order")["subtasks"].values()]
    assert phases == sorted(phases, key=["survey", "analysis"].index) and len(set(phases)) == 2


def test_final_snapshot_says_the_task_is_done_and_where_it_runs(run):
    result, _, mem = run
    from orchestrator.artifacts import read_snapshot

    snap = read_snapshot(mem / result.snapshots[-1])
    assert snap["sections"]["Resume Instructions"].startswith(
        f"The task is done; nothing to resume. Read the final summary `{result.merged['final']}`"
    )
    important = snap["sections"]["Important Context"]
    assert "Workdir (paths of findings are relative to it): " in important
