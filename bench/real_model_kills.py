"""kill -9 with the real OpenAI client: how many model calls does `resume` repeat?

    PYTHONPATH=. python -m bench.real_model_kills [--points 12]

A baseline run counts the model requests of an uninterrupted task (the scripted
OpenAI-compatible server of `tests/orchestrator/openai_server.py`, answering with tether's
offline policy, through `langchain-openai`). Then, for each kill point, a fresh run is
killed with SIGKILL by the server the moment request N arrives (so that request is the
interrupted call), and `orchestrator resume` finishes the task. Repeated calls =
(requests of the killed run + of the resume) - baseline requests - 1 (the interrupted
call itself is not a repeat: it never completed). Goal: 0.

Prints a Markdown table; no files outside a temporary directory are touched.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.orchestrator.conftest import build_repo  # noqa: E402
from tests.orchestrator.openai_server import ScriptedOpenAI, policy_responder  # noqa: E402

WORKFLOW = "name: bench\nphases: [exploration, review]\n"


class Killer:
    """A responder that SIGKILLs the client process when request `kill_at` arrives."""

    def __init__(self, kill_at: int | None):
        self.kill_at = kill_at
        self.count = 0
        self.pid: int | None = None
        self.lock = threading.Lock()

    def __call__(self, body: dict) -> dict:
        with self.lock:
            self.count += 1
            hit = self.count == self.kill_at
        if hit and self.pid:
            os.kill(self.pid, signal.SIGKILL)
            time.sleep(0.2)
            return {"status": 500}
        return policy_responder(body)


def _env(server: ScriptedOpenAI, memory: Path) -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "TETHER_MEMORY_DIR": str(memory),
        "TETHER_ALLOW_MODEL_REQUESTS": "1",
        "OPENAI_API_KEY": "sk-bench",
        "OPENAI_BASE_URL": server.base_url,
        "TETHER_RETRY_DELAY": "0.05",
    }


def _cli(args: list[str], env: dict, killer: Killer) -> int:
    proc = subprocess.Popen(
        [sys.executable, "-m", "orchestrator.cli", *args],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    killer.pid = proc.pid
    return proc.wait(timeout=300)


def run_once(base: Path, repo: Path, workflow: Path, kill_at: int | None) -> dict:
    memory = base / f"m-{kill_at}"
    killer = Killer(kill_at)
    with ScriptedOpenAI(responder=killer) as server:
        env = _env(server, memory)
        run = [
            "run", "Survey the shop service", "--task", "bench", "--workdir", str(repo),
            "--workflow", str(workflow), "--model", "openai:gpt-4o-mini", "--model-timeout", "30",
        ]  # fmt: skip
        code = _cli(run, env, killer)
        first = killer.count
        resumed = None
        if kill_at is not None:
            killer.kill_at = None
            resumed = _cli(["resume", "--task", "bench"], env, killer)
        return {"kill_at": kill_at, "run": code, "resume": resumed, "first": first,
                "total": killer.count}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=12, help="kill points (requests)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        repo = build_repo(base / "repo", readme=False)
        workflow = base / "bench.yaml"
        workflow.write_text(WORKFLOW)
        baseline = run_once(base, repo, workflow, None)
        n = baseline["total"]
        print(f"Baseline: {n} model requests, exit {baseline['run']}\n")
        print("| kill at request | run exit | resume exit | requests | repeated |")
        print("|---:|---:|---:|---:|---:|")
        step = max(1, n // args.points)
        points = list(range(1, n + 1, step))[: args.points]
        repeated_all = []
        for at in points:
            r = run_once(base, repo, workflow, at)
            repeated = r["total"] - n - 1
            repeated_all.append(repeated)
            print(f"| {at} | {r['run']} | {r['resume']} | {r['total']} | {repeated} |")
        print(f"\nTotal repeated calls over {len(points)} kills: {sum(repeated_all)}")


if __name__ == "__main__":
    main()
