"""Real-model failures that say where and what: an unreachable or hung endpoint is named
(model and URL), each retry is shown as it happens, a call in flight reports that it waits,
and "the provider could not be reached" ends the run with its own exit code, 5.

The real `langchain-openai` client, against a closed port and a scripted server that hangs.
"""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest
from langchain_core.messages import HumanMessage, SystemMessage
from langchain_openai import ChatOpenAI

from orchestrator.agents.loop import run_agent
from orchestrator.errors import ProviderUnreachableError
from orchestrator.types import SubmitFindings
from tests.orchestrator.openai_server import ScriptedOpenAI

CMD = [sys.executable, "-m", "orchestrator.cli"]


def closed_port() -> int:
    with socket.socket() as sock:  # bound, never listening: connections are refused
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def env(cli_env):
    return {**cli_env, "TETHER_ALLOW_MODEL_REQUESTS": "1", "OPENAI_API_KEY": "sk-test"}


def test_an_unreachable_endpoint_is_named_retried_aloud_and_exits_5(
    env, fixture_repo, tiny_workflow
):
    url = f"http://127.0.0.1:{closed_port()}/v1"
    done = subprocess.run(
        [*CMD, "run", "Survey the shop", "--task", "down", "--workdir", str(fixture_repo),
         "--workflow", str(tiny_workflow), "--model", "openai:gpt-4o-mini"],
        env={**env, "OPENAI_BASE_URL": url}, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 5, done.stdout + done.stderr
    retries = [ln for ln in done.stderr.splitlines() if "retrying in" in ln]
    assert len(retries) == 4  # every retry, as it happens
    assert f"model call to gpt-4o-mini at {url} failed (connection refused)" in retries[0]
    assert "(retry 1 of 4)" in retries[0] and "(retry 4 of 4)" in retries[-1]
    assert (
        f"Provider unreachable: the provider could not be reached: gpt-4o-mini at {url} "
        "(connection refused) after 5 attempt(s)" in done.stdout
    )
    assert "orchestrator resume --task down" in done.stdout


def test_a_hung_call_says_it_waits_and_times_out_as_unreachable():
    lines: list[str] = []
    with ScriptedOpenAI([{"hang": 3}] * 3, responder=None) as server:
        model = ChatOpenAI(
            model="gpt-4o-mini", base_url=server.base_url, api_key="sk-test", timeout=1.2,
            max_retries=0,
        )  # fmt: skip
        with pytest.raises(ProviderUnreachableError) as err:
            run_agent(
                model, tools=[], final_tool=SubmitFindings,
                messages=[SystemMessage("s"), HumanMessage("Subtask: x")],
                retries=1, initial_delay=0.01, notify=lines.append, watch_every=0.5,
            )  # fmt: skip
    waits = [ln for ln in lines if ln.startswith("still waiting for gpt-4o-mini at ")]
    assert waits and server.base_url in waits[0]  # progress while a call hangs
    assert any("failed (timed out); retrying in" in ln for ln in lines)
    assert "(timed out) after 2 attempt(s)" in str(err.value)
