"""`orchestrator run --trace` sends the run's spans over OTLP/HTTP to the standard endpoint
(`$OTEL_EXPORTER_OTLP_ENDPOINT`), here a receiver on loopback that decodes what arrives as
a collector would (OpenTelemetry's protobuf messages); the endpoint alone turns tracing on,
and `--no-trace` keeps it off. The model is the real `langchain-openai` client against the
scripted OpenAI-compatible server, so the model calls' spans carry what a provider reports.
Without OpenTelemetry installed, `--trace` is one `Error:` line.
"""

from __future__ import annotations

import gzip
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from click.testing import CliRunner
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from orchestrator import Orchestrator
from orchestrator.cli import cli
from tests.orchestrator.openai_server import ScriptedOpenAI
from tests.orchestrator.scripted_agents import agents, findings

REPO = Path(__file__).resolve().parents[3]
CMD = [sys.executable, "-m", "orchestrator.cli"]
WORKFLOW = """
phases: [exploration, review]
agents:
  scout:
    description: Looks around.
    prompt: AGENT=scout
    tools: [list_files]
"""


def plan(phase: str) -> dict:
    subs = [{"id": "s0", "title": "Look", "description": "Look.", "agent": "scout"}]
    return {"strategy": "One scout.", "subtasks": subs}


STEPS = {"scout": [{"tool": "list_files", "args": {"path": "."}}, findings("Looked.")]}


class Receiver:
    """An OTLP/HTTP trace receiver on 127.0.0.1: `spans` as (resource attributes, span);
    it also takes any other request (LangSmith's), noting its path in `paths`."""

    def __init__(self) -> None:
        self.spans: list[tuple[dict, object]] = []
        self.paths: list[str] = []
        received = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                received.paths.append(self.path.split("?")[0])
                if self.path != "/v1/traces":  # LangSmith's API: taken, not read
                    return self.reply(b"{}", "application/json")
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                request = ExportTraceServiceRequest.FromString(body)
                for resource in request.resource_spans:
                    attrs = {a.key: a.value.string_value for a in resource.resource.attributes}
                    for scope in resource.scope_spans:
                        received.spans.extend((attrs, span) for span in scope.spans)
                reply = ExportTraceServiceResponse().SerializeToString()
                self.reply(reply, "application/x-protobuf")

            do_GET = do_POST  # noqa: N815

            def reply(self, body: bytes, kind: str) -> None:
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> Receiver:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def attributes(span) -> dict:
    out = {}
    for a in span.attributes:
        value = a.value
        out[a.key] = value.int_value if value.HasField("int_value") else value.string_value
    return out


@pytest.fixture
def traced_run(tmp_path, cli_env):
    """Runs `orchestrator run` against the scripted server with the receiver's endpoint."""
    (tmp_path / "wf.yaml").write_text(WORKFLOW)
    (tmp_path / "notes.md").write_text("# Notes\n\nNothing to see.\n")

    def run(
        task: str, *flags: str, langsmith: bool = False
    ) -> tuple[subprocess.CompletedProcess, Receiver]:
        env = {**cli_env, "TETHER_ALLOW_MODEL_REQUESTS": "1", "OPENAI_API_KEY": "sk-test",
               "PYTHONPATH": str(REPO)}  # fmt: skip
        env = {k: v for k, v in env.items() if not k.startswith(("LANGSMITH_", "LANGCHAIN_"))}
        with Receiver() as receiver, ScriptedOpenAI(responder=agents(plan, STEPS)) as model:
            env["OPENAI_BASE_URL"] = model.base_url
            env["OTEL_EXPORTER_OTLP_ENDPOINT"] = receiver.endpoint
            if langsmith:  # LangChain's own tracing, to the same receiver
                env.update(LANGSMITH_TRACING="true", LANGSMITH_API_KEY="ls-test",
                           LANGSMITH_ENDPOINT=receiver.endpoint)  # fmt: skip
            done = subprocess.run(
                [*CMD, "run", "Look around", "--task", task, "--workdir", str(tmp_path),
                 "--workflow", str(tmp_path / "wf.yaml"), "--model", "openai:gpt-4o-mini",
                 *flags],
                env=env, capture_output=True, text=True, timeout=180,
            )  # fmt: skip
        return done, receiver

    return run


@pytest.mark.parametrize("flags", [("--trace",), ()], ids=["--trace", "endpoint-only"])
def test_a_traced_run_sends_its_spans_over_otlp_http(traced_run, memory_dir, flags):
    done, receiver = traced_run("otlp", *flags)
    assert done.returncode == 0, done.stdout + done.stderr
    assert set(receiver.paths) == {"/v1/traces"}
    names = [span.name for _, span in receiver.spans]
    assert names.count("tether.task") == 1
    assert {"phase exploration", "phase review", "invoke_agent scout", "invoke_agent lead",
            "chat gpt-4o-mini", "execute_tool list_files"} <= set(names)  # fmt: skip
    assert {r["service.name"] for r, _ in receiver.spans} == {"tether"}
    record = Orchestrator(memory_dir=memory_dir, trace=False).task_record("otlp")
    assert {span.trace_id.hex() for _, span in receiver.spans} == {record["trace_id"]}
    calls = [attributes(s) for _, s in receiver.spans if s.name == "chat gpt-4o-mini"]
    for call in calls:
        assert call["gen_ai.provider.name"] == "openai"
        assert call["gen_ai.operation.name"] == "chat"
        assert call["gen_ai.usage.input_tokens"] > 0
        assert call["gen_ai.usage.output_tokens"] > 0
    scouts = [attributes(s) for _, s in receiver.spans if s.name == "invoke_agent scout"]
    assert all(Path(a["tether.finding.path"]).is_file() for a in scouts)
    assert all(a["tether.task.id"] == "otlp" for a in scouts)


def test_langsmith_tracing_goes_on_beside_it(traced_run):
    done, receiver = traced_run("both", "--trace", langsmith=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "tether.task" in [span.name for _, span in receiver.spans]
    assert {"/runs/multipart", "/runs/batch"} & set(receiver.paths), receiver.paths


def test_no_trace_keeps_tracing_off_under_the_endpoint(traced_run):
    done, receiver = traced_run("quiet", "--no-trace")
    assert done.returncode == 0, done.stdout + done.stderr
    assert receiver.spans == []  # the process has exited: whatever it sent has arrived


def test_trace_without_opentelemetry_is_one_error_line(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "opentelemetry", None)  # as if not installed
    result = CliRunner().invoke(cli, ["run", "Look", "--model", "offline", "--trace"])
    assert result.exit_code == 1
    assert result.output.strip().splitlines()[-1] == (
        "Error: tracing is on (--trace) but OpenTelemetry is not installed (no module "
        "'opentelemetry'): pip install 'tether[otel]', or pass --no-trace"
    )
