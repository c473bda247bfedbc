"""A task of 1,000 subagents: its cost per subagent against a task of 100, and a kill mid-fan-out.

Run::

    python -m bench.big_task                    # 100 and 1,000 subagents (several minutes)
    python -m bench.big_task --sizes 100,400 --phases 4 --parallel 16

Each size is one task of `--phases` phases (default 4) of `size / phases` subagents,
`max_parallel` `--parallel` (default 16), driven by `bench.orchestration.fast_policy` (the
lead plans N subtasks at once, each subagent answers with one `SubmitFindings`), so the
figures are tether's own cost: graph, files, registry, checkpoints. For each size, in fresh
processes (`spawn`) and fresh memory directories:

1. **a whole run**: wall time per subagent (and the process's CPU time, all threads, which
   other jobs on a shared machine disturb less), the process's peak resident memory
   (`ru_maxrss`), and the graph state per subagent: the bytes of `.langgraph/` when the run
   returned (nothing VACUUMed), the largest size it had during the run (sampled every
   20 ms), and the memory directory's other files beside it;
2. **a kill in the middle of a fan-out**: a run that SIGKILLs itself when the subagent in
   the middle of the third phase has written its findings
   (`TETHER_FAULT=subagent_after_findings:K`), then `Orchestrator.resume` in another
   process: how many subagents it ran, how many it found finished (reused from the
   registry, not run), and how many finished subagents ran twice (a subtask whose registry
   record counts more than one finished run of its agent: the goal is 0), with its wall time.

The last lines give the ratios of the largest size to the smallest: time per subagent,
peak RSS and graph-state bytes per subagent (goal: within 1.5x).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import resource
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.graph_state import KIB, _dir_bytes, _Peak

OBJECTIVE = "Benchmark a large fan-out"
TASK = "big"


def _orchestrator(memory: Path, workdir: Path, per_phase: int, parallel: int, **kw: Any) -> Any:
    from bench.orchestration import fake_model
    from orchestrator.api import Orchestrator

    return Orchestrator(
        memory_dir=memory,
        workdir=workdir,
        workflow=workdir / "wf.yaml",
        model=fake_model(),
        max_parallel=parallel,
        max_subtasks=per_phase,
        **kw,
    )


def _whole(memory: str, workdir: str, per_phase: int, parallel: int, queue: Any) -> None:
    """Child: one uninterrupted run; puts its figures on `queue`."""
    from orchestrator.cli.process import settle_imports

    settle_imports()
    orch = _orchestrator(Path(memory), Path(workdir), per_phase, parallel)
    with _Peak(Path(memory) / ".langgraph") as peak:
        start, cpu = time.perf_counter(), time.process_time()
        result = orch.run(OBJECTIVE, task_id=TASK)
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    figures = {
        "status": result.status,
        "findings": len(result.findings),
        "seconds": seconds,
        "cpu": cpu,
        "rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,  # Linux: KiB
        "graph": _dir_bytes(Path(memory) / ".langgraph"),
        "peak": peak.peak,
        "memory": _dir_bytes(Path(memory), skip=".langgraph"),
    }
    _put(queue, figures)


def _killed(memory: str, workdir: str, per_phase: int, parallel: int, kill_at: int) -> None:
    """Child: a run that SIGKILLs itself after the `kill_at`-th findings file."""
    os.environ["TETHER_FAULT"] = f"subagent_after_findings:{kill_at}"
    _orchestrator(Path(memory), Path(workdir), per_phase, parallel).run(OBJECTIVE, task_id=TASK)
    os._exit(1)  # the fault should have killed us


def _resume(memory: str, workdir: str, per_phase: int, parallel: int, queue: Any) -> None:
    """Child: resume the killed task; puts what ran and what was reused on `queue`."""
    from orchestrator.cli.process import settle_imports

    events: list[dict] = []
    orch = _orchestrator(Path(memory), Path(workdir), per_phase, parallel)
    orch.on_event = events.append
    settle_imports()
    start = time.perf_counter()
    result = orch.resume(TASK)
    seconds = time.perf_counter() - start
    done = [e for e in events if e["event"] == "agent" and e["state"] == "done"]
    ran = sum(1 for e in done if not e.get("reused"))
    _put(
        queue,
        {
            "status": result.status,
            "seconds": seconds,
            "ran": ran,
            "reused": len(done) - ran,
            "findings": len(result.findings),
        },
    )


def _put(queue: Any, figures: dict) -> None:
    queue.put(figures)
    queue.close()
    queue.join_thread()  # flush before `os._exit` skips the interpreter's shutdown
    os._exit(0)


def _child(ctx: Any, target: Any, *args: Any) -> dict | None:
    queue = ctx.Queue()
    proc = ctx.Process(target=target, args=(*args, queue) if target is not _killed else args)
    proc.start()
    figures = queue.get(timeout=3600) if target is not _killed else None
    proc.join(3600)
    if target is _killed:
        if proc.exitcode != -9:
            raise RuntimeError(f"the run to kill ended with exit code {proc.exitcode}")
    elif proc.exitcode != 0:
        raise RuntimeError(f"{target.__name__} failed (exit code {proc.exitcode})")
    return figures


def runs_twice(memory: Path) -> int:
    """Subtasks whose agent finished more than once (its registry record counts the runs)."""
    folder = memory / ".tether" / "records" / "subagents" / TASK
    twice = 0
    for path in folder.glob("findings*.json"):
        twice += json.loads(path.read_text())["data"].get("runs", 1) > 1
    return twice


def measure(size: int, phases: int, parallel: int, root: Path) -> dict:
    """The whole run and the kill-and-resume of a task of `size` subagents."""
    ctx = multiprocessing.get_context("spawn")
    per_phase = size // phases
    workdir = root / f"work-{size}"
    workdir.mkdir(parents=True)
    names = ", ".join(f"phase-{i + 1}" for i in range(phases))
    (workdir / "wf.yaml").write_text(f"name: big\nrun_all_phases: true\nphases: [{names}]\n")
    whole = _child(ctx, _whole, str(root / f"whole-{size}"), str(workdir), per_phase, parallel)
    assert whole["status"] == "done" and whole["findings"] == size, whole
    memory = root / f"killed-{size}"
    kill_at = per_phase * min(2, phases - 1) + per_phase // 2  # mid-fan-out, third phase
    _child(ctx, _killed, str(memory), str(workdir), per_phase, parallel, kill_at)
    written = len(list((memory / "findings").glob("researcher-*.md")))
    resumed = _child(ctx, _resume, str(memory), str(workdir), per_phase, parallel)
    assert resumed["status"] == "done" and resumed["findings"] == size, resumed
    return {
        "size": size,
        "per_phase": per_phase,
        "whole": whole,
        "kill_at": kill_at,
        "written": written,
        "resumed": resumed,
        "twice": runs_twice(memory),
    }


def report(results: list[dict], phases: int, parallel: int) -> list[str]:
    head = (
        "subagents", "phases x each", "run s", "ms/subagent", "cpu ms/subagent", "peak RSS MB",
        "graph state KiB/subagent (end)", "(peak)", "memory dir KiB/subagent", "killed after",
        "resume: ran", "reused", "finished ran twice", "resume s",
    )  # fmt: skip
    rows = [head]
    for r in results:
        w, n, res = r["whole"], r["size"], r["resumed"]
        rows.append(
            (
                f"{n:,}", f"{phases} x {r['per_phase']}", f"{w['seconds']:.1f}",
                f"{w['seconds'] / n * 1000:.1f}", f"{w['cpu'] / n * 1000:.1f}",
                f"{w['rss'] / KIB / KIB:.0f}",
                f"{w['graph'] / n / KIB:.2f}", f"{w['peak'] / n / KIB:.1f}",
                f"{w['memory'] / n / KIB:.1f}", f"{r['written']} findings",
                str(res["ran"]), str(res["reused"]), str(r["twice"]), f"{res['seconds']:.1f}",
            )
        )  # fmt: skip
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    lines = [f"one task, {phases} phases, max_parallel {parallel}, scripted policy"]
    lines += ["  ".join(c.rjust(wd) for c, wd in zip(row, widths, strict=True)) for row in rows]
    small, big = results[0], results[-1]

    def ratio(key: str, per: bool = True) -> float:
        a = small["whole"][key] / (small["size"] if per else 1)
        b = big["whole"][key] / (big["size"] if per else 1)
        return b / a

    lines.append("")
    for label, value in (
        ("time per subagent", ratio("seconds")),
        ("cpu time per subagent", ratio("cpu")),
        ("peak RSS", ratio("rss", per=False)),
        ("graph state per subagent (end)", ratio("graph")),
        ("graph state per subagent (peak)", ratio("peak")),
        ("memory dir per subagent", ratio("memory")),
    ):
        verdict = "yes" if value <= 1.5 else "no"
        lines.append(
            f"{label}: {big['size']:,} vs {small['size']:,}: {value:.2f}x (goal 1.5x: {verdict})"
        )
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,1000", help="subagents per task, comma-separated")
    parser.add_argument("--phases", type=int, default=4)
    parser.add_argument("--parallel", type=int, default=16)
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    with tempfile.TemporaryDirectory(prefix="tether-big-task-") as tmp:
        results = [measure(n, args.phases, args.parallel, Path(tmp)) for n in sizes]
    for line in report(results, args.phases, args.parallel):
        print(line)


if __name__ == "__main__":
    main()
