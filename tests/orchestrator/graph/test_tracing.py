"""OpenTelemetry traces of a task through the Python API (`Orchestrator(trace=provider)`),
caught by the SDK's in-memory exporter: a span for the run, each phase wave, each agent,
each model call (GenAI attributes, reported tokens) and each tool call, all in one trace
that a resume continues; and tracing off (the default) imports nothing of OpenTelemetry.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode, format_span_id, format_trace_id

from orchestrator import Orchestrator
from orchestrator.errors import Interrupted, OrchestratorUserError

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def spans():
    """An SDK tracer provider whose finished spans stay in memory."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider, exporter
    provider.shutdown()


@pytest.fixture
def workdir(tmp_path):
    root = tmp_path / "project"
    root.mkdir()
    (root / "README.md").write_text("# Tool\n\nIt reads settings from config.toml.\n")
    (root / "app.py").write_text("def load(path):\n    return open(path).read()\n")
    return root


def named(found, prefix: str) -> list:
    return [s for s in found if s.name.startswith(prefix)]


def children(found, parent) -> list:
    return [s for s in found if s.parent is not None and s.parent.span_id == parent.context.span_id]


def test_a_run_is_one_trace_of_its_phases_agents_and_calls(spans, workdir, memory_dir):
    provider, exporter = spans
    with Orchestrator(workdir=workdir, model="offline", trace=provider) as orch:
        result = orch.run("Survey this project", task_id="traced")
        record = orch.task_record("traced")
    assert result.status == "done"
    found = exporter.get_finished_spans()
    assert {s.context.trace_id for s in found} == {found[0].context.trace_id}
    (task,) = named(found, "tether.task")
    assert task.parent is None
    assert task.attributes["tether.task.id"] == "traced"
    assert task.attributes["tether.task.status"] == "done"
    # the record keeps the trace, for the runs that continue the task
    assert record["trace_id"] == format_trace_id(task.context.trace_id)
    assert record["trace_span"] == format_span_id(task.context.span_id)

    phases = named(found, "phase ")
    assert {s.name for s in phases} == {f"phase {p}" for p in orch.workflow.phases}
    assert all(s.parent.span_id == task.context.span_id for s in phases)

    subagents = [s for s in named(found, "invoke_agent ") if "tether.subtask.key" in s.attributes]
    assert len(subagents) == len(result.findings) >= 4
    for span in subagents:
        assert span.parent.span_id in {p.context.span_id for p in phases}
        assert span.attributes["gen_ai.operation.name"] == "invoke_agent"
        assert Path(span.attributes["tether.finding.path"]).is_file()  # the finding's file
        assert span.attributes["tether.agent.state"] == "done"
    leads = named(found, "invoke_agent lead")
    assert len(leads) == len(phases) + 1  # a planning turn per wave, then the answer

    calls = named(found, "chat ")
    assert calls and all(c.parent.span_id != task.context.span_id for c in calls)
    for call in calls:
        attrs = call.attributes
        assert attrs["gen_ai.operation.name"] == "chat"
        assert attrs["gen_ai.request.model"] == "tether-offline"
        assert attrs["gen_ai.usage.input_tokens"] > 0
        assert attrs["gen_ai.usage.output_tokens"] > 0
        assert attrs["tether.task.id"] == "traced"
    for agent in [*subagents, *leads]:
        assert named(children(found, agent), "chat "), agent.name
    tools = named(found, "execute_tool ")
    assert {"list_files", "read_file"} <= {t.attributes["gen_ai.tool.name"] for t in tools}
    by_key = {s.attributes["tether.subtask.key"]: s for s in subagents}
    for tool in tools:
        key = tool.attributes.get("tether.subtask.key")
        if key is not None:
            assert tool.parent.span_id == by_key[key].context.span_id
    assert all(s.status.status_code != StatusCode.ERROR for s in found)


def test_a_resume_continues_the_trace_of_the_task(spans, workdir):
    provider, exporter = spans
    with Orchestrator(workdir=workdir, model="offline", trace=provider, budget_tokens=4000) as o:
        first = o.run("Survey this project", task_id="again")
    assert first.status == "stopped"
    before = exporter.get_finished_spans()
    (task,) = named(before, "tether.task")
    assert task.attributes["tether.task.status"] == "stopped"
    exporter.clear()
    with Orchestrator(model="offline", trace=provider, budget_tokens=10**9) as orch:
        assert orch.resume("again").status == "done"
    after = exporter.get_finished_spans()
    (resumed,) = named(after, "tether.task")
    # a child of the first run's task span, in the same trace
    assert resumed.parent.span_id == task.context.span_id
    assert resumed.parent.is_remote
    assert resumed.attributes["tether.run"] != "run"
    assert {s.context.trace_id for s in after} == {task.context.trace_id}
    assert named(after, "chat ") and named(after, "phase ")


def test_an_interrupted_run_ends_its_spans_when_the_orchestrator_closes(spans, workdir):
    provider, exporter = spans
    seen = []

    def stop_at_the_second_phase(event: dict) -> None:
        seen.append(event)
        if event["event"] == "phase" and event["index"] == 2:
            raise KeyboardInterrupt

    orch = Orchestrator(
        workdir=workdir, model="offline", trace=provider, on_event=stop_at_the_second_phase
    )
    with pytest.raises(Interrupted):
        orch.run("Survey this project", task_id="cut")
    assert named(exporter.get_finished_spans(), "tether.task") == []  # still open
    orch.close()
    (task,) = named(exporter.get_finished_spans(), "tether.task")
    assert task.status.status_code == StatusCode.ERROR


def test_a_bad_trace_value_is_a_user_error(workdir):
    with pytest.raises(OrchestratorUserError, match="trace must be True, False, None or an"):
        Orchestrator(workdir=workdir, model="offline", trace="yes")


OFF = """
import sys

def otel():
    return {m for m in sys.modules if m.startswith("opentelemetry")}

import orchestrator
assert not otel(), "import orchestrator"
from orchestrator import Orchestrator
import langsmith.client  # LangChain's tracing client imports the SDK itself when installed
before = otel()
with Orchestrator(workdir=sys.argv[1], model="offline") as orch:
    print(orch.run("Survey this project").status)
print(sorted(otel() - before), "orchestrator.agents.tracing_middleware" in sys.modules)
"""


def test_tracing_off_imports_nothing_of_opentelemetry(workdir, cli_env):
    env = {k: v for k, v in cli_env.items() if not k.startswith("OTEL_")}
    env["PYTHONPATH"] = str(REPO)
    done = subprocess.run(
        [sys.executable, "-c", OFF, str(workdir)], env=env, capture_output=True, text=True,
        timeout=120, cwd=REPO,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["done", "[]", "False"]


def test_a_failing_model_call_marks_its_span_its_agent_and_the_task(spans, workdir, monkeypatch):
    from langchain_openai import ChatOpenAI

    from tests.orchestrator.openai_server import ScriptedOpenAI
    from tests.orchestrator.scripted_agents import agents

    def plan(phase: str) -> dict:
        subs = [{"id": "s0", "title": "Look", "description": "Look.", "agent": "scout"}]
        return {"strategy": "One scout.", "subtasks": subs}

    monkeypatch.setenv("TETHER_ALLOW_MODEL_REQUESTS", "1")
    (workdir / "wf.yaml").write_text(
        "phases: [exploration]\nagents:\n  scout:\n    prompt: AGENT=scout\n"
        "    tools: [list_files]\n"
    )
    provider, exporter = spans
    with ScriptedOpenAI(responder=agents(plan, {"scout": [{"status": 500}]})) as server:
        model = ChatOpenAI(model="gpt-4o-mini", base_url=server.base_url, api_key="k",
                           max_retries=0)  # fmt: skip
        with Orchestrator(
            workdir=workdir, workflow=workdir / "wf.yaml", model=model, trace=provider
        ) as orch:
            result = orch.run("Look around", task_id="broken")
    assert result.status == "failed"
    found = exporter.get_finished_spans()
    (scout,) = named(found, "invoke_agent scout")
    assert scout.status.status_code == StatusCode.ERROR
    assert scout.attributes["tether.agent.state"] == "failed"
    failed_calls = children(found, scout)
    assert failed_calls and all(c.status.status_code == StatusCode.ERROR for c in failed_calls)
    assert all(c.attributes["gen_ai.provider.name"] == "openai" for c in failed_calls)
    (task,) = named(found, "tether.task")
    assert task.status.status_code == StatusCode.ERROR
    assert task.attributes["tether.task.status"] == "failed"
