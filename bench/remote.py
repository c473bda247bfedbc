"""Remote subagents: a fan-out over two LangGraph Servers beside the same fan-out in process.

Run::

    python -m bench.remote                          # 20 subtasks, 0.5 s per model call
    python -m bench.remote --subtasks 40 --latency 1 --parallel 4,10,40

Two local `langgraph dev` servers (loopback ports, 10 jobs each, working folders in a
temporary directory) serve `bench/remote_agent.py`, a LangChain `create_agent` agent whose
model takes `--latency` seconds per call and answers once. The lead runs in this process
(`Orchestrator.run`) with a fake model of the same latency (`bench.orchestration.fast_policy`:
one `PhasePlan` of N subtasks, then the answer). Rows, for each `--parallel`:

1. `in process` (the baseline): N local subagents, each one model call of the same latency
   (`SubmitFindings`), on the lead's threads;
2. `2 servers`: the workflow's agent is `remote: {url: [A, B], graph: agent}`: each subtask a
   run on one of the servers (spread by runs in flight), joined by the lead;
3. `2 servers, bare SDK` (the servers' own cost): the same N runs started and joined through
   `langgraph-sdk` by `parallel` threads, no tether, plus the lead's two calls' latency: what
   the servers take (a dev server's queue picks a new run up within about half a second
   to a second), so row 2 less row 3 is tether's part.

Columns: wall time; the ideal (the model calls' latency alone: the lead's two calls plus
`ceil(N / parallel)` rounds of subagent calls); tether's cost per subtask above the ideal;
model calls (the lead's, the subagents'); the runs each server's own run list shows. Both
rows run in one process, one after the other, each in a new memory directory, after one
warm-up run each (imports, the servers' first runs); `--repeat` keeps the best of N.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.orchestration import fast_policy  # noqa: E402
from tests.orchestrator.dev_servers import DevServer, start_all  # noqa: E402

GRAPHS = {"agent": "bench.remote_agent:agent"}


def slow_model(latency: float) -> Any:
    """The lead's (and the local subagents') model: `fast_policy` after `latency` seconds."""
    from orchestrator.offline import OfflineChatModel

    def policy(messages: list[Any], tools: list[dict]) -> Any:
        time.sleep(latency)
        return fast_policy(messages, tools)

    return OfflineChatModel(policy=policy)


def workflow(path: Path, urls: list[str] | None) -> Path:
    text = "name: bench\nphases: [exploration]\n"
    if urls:
        text += (
            "agents:\n  researcher:\n    description: Reads one part on a LangGraph Server.\n"
            f"    remote: {{url: [{', '.join(urls)}], graph: agent}}\n"
        )
    path.write_text(text)
    return path


def one_run(root: Path, n: int, parallel: int, latency: float, urls: list[str] | None) -> dict:
    """One task of `n` subtasks; its wall time and model calls."""
    from orchestrator import Orchestrator

    task = f"bench-{time.monotonic_ns()}"
    wf = workflow(root / f"{task}.yaml", urls)
    orch = Orchestrator(
        memory_dir=root / task,
        workdir=root,
        workflow=wf,
        model=slow_model(latency),
        max_parallel=parallel,
        max_subtasks=n,
    )
    start = time.perf_counter()
    result = orch.run("Benchmark the fan-out", task_id=task)
    wall = time.perf_counter() - start
    assert result.status == "done" and len(result.findings) == n, (result.status, result.failed)
    values = orch.status(task)
    lead = int(values["usage"]["calls"]) - n
    return {"task": task, "wall": wall, "calls": int(values["usage"]["calls"]), "lead": lead}


def bare_sdk(servers: list[DevServer], n: int, parallel: int, latency: float) -> dict:
    """The same `n` runs through `langgraph-sdk` alone (round robin over the servers)."""
    import uuid
    from concurrent.futures import ThreadPoolExecutor

    clients = [s.client() for s in servers]

    def one(i: int) -> None:
        client, thread = clients[i % len(clients)], str(uuid.uuid4())
        client.threads.create(thread_id=thread)
        message = {"role": "user", "content": f"Subtask: s{i:03d}\nRead its part."}
        run = client.runs.create(thread, "agent", input={"messages": [message]})
        client.runs.join(thread, run["run_id"])

    start = time.perf_counter()
    time.sleep(latency)  # the lead's plan
    with ThreadPoolExecutor(parallel) as pool:
        list(pool.map(one, range(n)))
    time.sleep(latency)  # the lead's answer
    return {"wall": time.perf_counter() - start, "calls": n + 2, "lead": 2}


def runs_per_server(servers: list[DevServer], task: str) -> list[int]:
    return [sum(len(r) for r in s.runs_of(task).values()) for s in servers]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--subtasks", type=int, default=20)
    parser.add_argument("--latency", type=float, default=0.5, help="seconds per model call")
    parser.add_argument("--parallel", default="4,20", help="max_parallel values, comma-separated")
    parser.add_argument("--repeat", type=int, default=1, help="best of N runs per row")
    args = parser.parse_args(argv)
    parallels = [int(p) for p in args.parallel.split(",")]
    n = args.subtasks
    with tempfile.TemporaryDirectory(prefix="bench-remote-") as tmp:
        root = Path(tmp)
        env = {"BENCH_LATENCY": str(args.latency)}
        servers = [DevServer(root / name, name.upper(), env, GRAPHS) for name in ("a", "b")]
        print(f"starting two langgraph dev servers in {root} ...", file=sys.stderr)
        try:
            start_all(*servers)
            urls = [s.url for s in servers]
            for mode_urls in (None, urls):  # warm-up: imports, the servers' first runs
                one_run(root, 2, 2, 0.0, mode_urls)
            rows = []
            for parallel in parallels:
                for mode, mode_urls in (("in process", None), ("2 servers", urls)):
                    runs = [one_run(root, n, parallel, args.latency, mode_urls)]
                    runs += [one_run(root, n, parallel, args.latency, mode_urls)
                             for _ in range(args.repeat - 1)]  # fmt: skip
                    best = min(runs, key=lambda r: r["wall"])
                    spread = runs_per_server(servers, best["task"]) if mode_urls else None
                    rows.append((mode, parallel, best, spread))
                    print(f"{mode}, parallel {parallel}: {best['wall']:.2f} s", file=sys.stderr)
                bare = min(
                    (bare_sdk(servers, n, parallel, args.latency) for _ in range(args.repeat)),
                    key=lambda r: r["wall"],
                )
                half = [n - n // 2, n // 2]
                rows.append(("2 servers, bare SDK", parallel, bare, half))
        finally:
            for server in servers:
                server.stop()
    print(table(rows, n, args.latency))
    return 0


def table(rows: list[tuple], n: int, latency: float) -> str:
    lines = [
        f"{n} subtasks, {latency:g} s per model call; lead and subagents one call each "
        "(the lead: plan and answer)",
        "",
        "| mode | max_parallel | wall s | ideal s | above ideal, per subtask | ratio to in "
        "process | model calls (lead + subagents) | runs on A / B |",
        "|---|---|---|---|---|---|---|---|",
    ]
    base = {p: r["wall"] for mode, p, r, _ in rows if mode == "in process"}
    for mode, parallel, run, spread in rows:
        ideal = latency * (2 + math.ceil(n / min(parallel, n)))
        extra = (run["wall"] - ideal) / n
        ratio = run["wall"] / base[parallel]
        where = " / ".join(str(s) for s in spread) if spread else "-"
        calls = f"{run['calls']} ({run['lead']} + {run['calls'] - run['lead']})"
        lines.append(
            f"| {mode} | {parallel} | {run['wall']:.2f} | {ideal:.2f} | {extra * 1000:.0f} ms "
            f"| {ratio:.2f}x | {calls} | {where} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
