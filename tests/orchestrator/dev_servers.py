"""`langgraph dev` servers for tests: real LangGraph Servers on loopback ports.

`DevServer` starts one (in-memory runtime, no browser, no reload, analytics and version
checks off) in a working folder of its own, from a `langgraph.json` there that serves
tether's graphs (`orchestrator.server`) and the test graphs of
`tests/orchestrator/e2e/remote_graphs.py` (or the `graphs` given); it can be killed
(SIGKILL, as a crash) and started again on the same port and folder, where the dev runtime
keeps what it last wrote (`.langgraph_api/`). The code it serves is this checkout's (`PYTHONPATH`).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
NO_NETWORK_ENV = {
    "LANGGRAPH_CLI_NO_ANALYTICS": "1",  # langgraph-cli posts anonymous usage otherwise
    "LANGGRAPH_NO_VERSION_CHECK": "1",  # langgraph-api asks PyPI for newer versions otherwise
    "LANGSMITH_TRACING": "false",
    "LANGCHAIN_TRACING_V2": "false",
}
GRAPHS = {
    "tether": "orchestrator.server:make_graph",
    "tether_subagent": "orchestrator.server:make_subagent_graph",
    "echo": "tests.orchestrator.e2e.remote_graphs:echo",
    "asks": "tests.orchestrator.e2e.remote_graphs:asks",
    "flaky": "tests.orchestrator.e2e.remote_graphs:flaky",
    "hollow": "tests.orchestrator.e2e.remote_graphs:hollow",
}
PROVIDER_KEYS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "TETHER_MODEL")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class DevServer:
    """One `langgraph dev` process; `start()`, `kill()` (SIGKILL), `stop()`."""

    def __init__(
        self,
        folder: Path,
        name: str,
        env: dict[str, str] | None = None,
        graphs: dict[str, str] | None = None,
    ) -> None:
        self.folder = folder
        self.name = name
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.extra_env = dict(env or {})
        self.proc: subprocess.Popen | None = None
        self.log = folder / "dev.log"
        folder.mkdir(parents=True, exist_ok=True)
        config = {"dependencies": ["."], "graphs": graphs or GRAPHS}
        (folder / "langgraph.json").write_text(json.dumps(config))

    def start(self) -> DevServer:
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("LANGSMITH_", "LANGCHAIN_", "TETHER_")) and k not in PROVIDER_KEYS
        }
        env.update(NO_NETWORK_ENV, TETHER_ALLOW_MODEL_REQUESTS="0", REMOTE_NAME=self.name)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
        env.update(self.extra_env)
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "langgraph_cli", "dev", "--config", "langgraph.json"]
                + ["--host", "127.0.0.1", "--port", str(self.port), "--no-browser"]
                + ["--no-reload", "--n-jobs-per-worker", "10"],
                cwd=self.folder,  # the in-memory runtime keeps its files in ./.langgraph_api
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        return self

    def wait_ready(self, timeout: float = 90.0) -> None:
        import httpx

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is None or self.proc.poll() is not None:
                raise AssertionError(f"langgraph dev exited early:\n{self.tail()}")
            try:
                if httpx.get(f"{self.url}/ok", timeout=1.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise AssertionError(f"langgraph dev not ready in {timeout}s:\n{self.tail()}")

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:] if self.log.exists() else ""

    def kill(self) -> None:
        """SIGKILL the server (its process group), as a crash of its machine would."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.kill()

    def client(self):
        from langgraph_sdk import get_sync_client

        return get_sync_client(url=self.url, api_key=None)

    def runs_of(self, task_id: str) -> dict[str, list[dict]]:
        """`{subtask key: its runs, over all attempts}` of a task's threads on this server."""
        client = self.client()
        out: dict[str, list[dict]] = {}
        for thread in client.threads.search(metadata={"tether_task": task_id}, limit=1000):
            key = thread["metadata"]["tether_subtask"]
            out.setdefault(key, []).extend(client.runs.list(thread["thread_id"], limit=100))
        return out


def start_all(*servers: DevServer) -> None:
    """Start servers side by side (each takes seconds to import its graphs)."""
    for server in servers:
        server.start()
    for server in servers:
        server.wait_ready()
