"""Remote agents in the workflow (`AgentSpec.remote`): parsing, `${VAR}` in headers expanded
only when a client connects, and the checks before a task starts (one `Error:` line,
nothing written, no header value anywhere)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator import Orchestrator
from orchestrator.config.workflow import AgentSpec, RemoteSpec, load_workflow
from orchestrator.errors import WorkflowError

REPO = Path(__file__).parents[3]


def _load(tmp_path: Path, text: str):
    path = tmp_path / "wf.yaml"
    path.write_text(text)
    return load_workflow(path)


@pytest.mark.parametrize(
    "remote,error",
    [
        ("{url: ftp://a, graph: g}", "'ftp://a' is not an http(s):// URL of a LangGraph Server"),
        ("{url: [], graph: g}", "must name at least one server URL"),
        ("{url: [http://a:1, http://a:1], graph: g}", "lists a server URL more than once"),
        ("{url: http://a:1}", "'agents.coder.remote.graph' is required"),
        ("{url: http://a:1, graph: g, port: 2}", "unknown key 'agents.coder.remote.port'; "
         "allowed: url, graph, headers"),
    ],
)  # fmt: skip
def test_bad_remote_specs_are_one_line_naming_the_key(tmp_path, remote, error):
    with pytest.raises(WorkflowError) as caught:
        _load(tmp_path, f"agents:\n  coder:\n    remote: {remote}\n")
    assert error in str(caught.value)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    "remote,error",
    [
        ("{url: 'http://a:99999', graph: g}",
         "agent 'coder': remote url of host 'a' has port '99999'; a port is 1 to 65535"),
        ("{url: 'http://a:0', graph: g}",
         "agent 'coder': remote url of host 'a' has port '0'; a port is 1 to 65535"),
        ("{url: 'http://a:80x', graph: g}",
         "agent 'coder': remote url of host 'a' has port '80x'; a port is 1 to 65535"),
        ('{url: http://a:1, graph: g, headers: {"x-k": "a\\r\\nInjected: 1"}}',
         "agent 'coder': remote header 'x-k': its value holds a line break or a control "
         "character; a header value is one line of text"),
        ('{url: http://a:1, graph: g, headers: {"x key": "v"}}',
         "agent 'coder': remote header 'x key': a header name is letters, digits and "
         "!#$%&'*+-.^_`|~ (no space, no colon)"),
        ('{url: http://a:1, graph: g, headers: {"x-k": "caf\u00e9"}}',
         "agent 'coder': remote header 'x-k': its value is not ASCII; HTTP sends header "
         "values as ASCII"),
    ],
)  # fmt: skip
def test_headers_and_ports_no_request_can_send_are_refused_when_the_workflow_is_read(
    tmp_path, remote, error
):
    with pytest.raises(WorkflowError) as caught:
        _load(tmp_path, f"agents:\n  coder:\n    remote: {remote}\n")
    assert str(caught.value) == f"workflow file {str(tmp_path / 'wf.yaml')!r}: {error}"
    assert "Injected" not in str(caught.value) and "caf" not in str(caught.value)


def test_a_header_variable_holding_a_line_break_stops_the_run_in_one_line(
    tmp_path, cli_env, memory_dir
):
    wf = tmp_path / "wf.yaml"
    wf.write_text(
        "agents:\n  coder:\n    remote: {url: http://127.0.0.1:9, graph: coder, "
        "headers: {x-api-key: 'k-${CODER_KEY}'}}\n"
    )
    env = {**cli_env, "CODER_KEY": "s3cret\r\nX-Evil: 1", "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-m", "orchestrator.cli", "run", "Fix it", "--workflow", str(wf)],
        env=env, capture_output=True, text=True, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        f"Error: workflow file {str(wf)!r}: agent 'coder': remote header 'x-api-key': its "
        "value holds a line break or a control character (from ${CODER_KEY}); a header "
        "value is one line of text"
    ]
    assert not memory_dir.exists()


def test_local_only_fields_are_refused_unless_the_graph_is_tethers_own(tmp_path):
    text = "agents:\n  coder:\n    tools: [read_file]\n    remote: {url: http://a:1, graph: %s}\n"
    with pytest.raises(WorkflowError, match="'tools' does not apply to a remote agent"):
        _load(tmp_path, text % "coder")
    served = _load(tmp_path, text % "tether_subagent").agents["coder"]
    assert served.tools == ["read_file"] and served.served().remote is None


def test_urls_spread_in_order_and_headers_expand_only_at_connect_time(monkeypatch):
    spec = RemoteSpec(
        url=["http://a:1/", "http://b:2"], graph="g", headers={"x-api-key": "k-${KEY}"}
    )
    assert spec.urls == ["http://a:1", "http://b:2"]
    monkeypatch.delenv("KEY", raising=False)
    with pytest.raises(WorkflowError) as caught:
        spec.connect_headers("coder")
    assert str(caught.value) == (
        "agent 'coder': remote header 'x-api-key' needs ${KEY}, which is not set; "
        "export KEY before running the task"
    )
    monkeypatch.setenv("KEY", "v4lue")
    assert spec.connect_headers("coder") == {"x-api-key": "k-v4lue"}
    assert spec.headers == {"x-api-key": "k-${KEY}"}  # as written: what is recorded


def test_an_unset_header_variable_stops_the_run_before_anything_is_written(
    tmp_path, cli_env, memory_dir
):
    wf = tmp_path / "wf.yaml"
    wf.write_text(
        "agents:\n  coder:\n    remote: {url: http://127.0.0.1:9, graph: coder, "
        "headers: {x-api-key: '${CODER_KEY}'}}\n"
    )
    env = {k: v for k, v in cli_env.items() if k != "CODER_KEY"}
    env["PYTHONPATH"] = str(REPO)
    done = subprocess.run(
        [sys.executable, "-m", "orchestrator.cli", "run", "Fix it", "--workflow", str(wf)],
        env=env, capture_output=True, text=True, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        f"Error: workflow file {str(wf)!r}: agent 'coder': remote header 'x-api-key' needs "
        "${CODER_KEY}, which is not set; export CODER_KEY before running the task"
    ]
    assert not memory_dir.exists()


def test_the_python_api_records_remote_agents_as_given(tmp_path, memory_dir, monkeypatch):
    monkeypatch.setenv("CODER_KEY", "t0ps3cret")
    remote = {"url": "http://127.0.0.1:9", "graph": "coder", "headers": {"k": "${CODER_KEY}"}}
    orch = Orchestrator(workdir=tmp_path, agents={"coder": {"remote": remote}}, model="offline")
    assert isinstance(orch.workflow.agents["coder"], AgentSpec)
    state = orch.new_task("Fix it", task_id="api")
    assert state["task_id"] == "api"
    record = json.loads((memory_dir / ".tether/records/tasks/api.json").read_text())
    assert record["data"]["agents"]["coder"]["remote"] == remote  # `${CODER_KEY}`, unexpanded
    assert b"t0ps3cret" not in b"".join(
        p.read_bytes() for p in memory_dir.rglob("*") if p.is_file()
    )
