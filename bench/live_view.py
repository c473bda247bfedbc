"""The live view's cost per event at N agents done against N/10, and a terminal against a pipe.

Run::

    python -m bench.live_view                      # 1,000, 3,000 and 10,000 agents, and a run
    python -m bench.live_view --sizes 1000 --run 0 # the synthetic feed only

Two parts, each view writing into memory (`io.StringIO`), so the terminal's own speed is
not measured:

1. **synthetic events**: for N agents (and N/10), the events a fan-out of N subagents
   sends (`pending` for all, then for each, 16 at a time: `running`, two step updates with
   its tokens, `done`), fed as fast as they come to the live view (`LiveView` on a
   `Console(force_terminal=True)` of 100x30, inside its `with`: rich's refresh thread
   draws four frames a second meanwhile) and to the plain view of a pipe (`PlainView`).
   Per event: the wall time in the feeding thread (what the run waits for) and the
   process's CPU time (every thread: the frames drawn included); and the time of one frame
   at the end (the median of 7: what the refresh thread pays, at most four times a second,
   at N agents done);
2. **a run** (`--run`, default 1,000 subagents; 0: skip): one task of 4 phases of
   `N / 4` subagents, `max_parallel` 16, with `bench.orchestration.fast_policy` (the lead
   plans N subtasks at once, each subagent answers at once: tether's own cost only), once
   under the live view and once under the plain view, each in a fresh process (`spawn`)
   and memory directory: wall and CPU time of the run.

The verdict lines: the cost per event at N against N/10 (goal: flat, within 1.5x), and the
terminal against the pipe at 1,000 subagents (goal: within 1.1x).
"""

from __future__ import annotations

import argparse
import io
import multiprocessing
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from orchestrator.events import build_event

PARALLEL = 16
WIDTH, HEIGHT = 100, 30
FRAMES = 7


def events(n: int) -> Iterator[dict[str, Any]]:
    """The events of one phase of `n` subagents, `PARALLEL` running at a time."""
    yield {"event": "model", "name": "bench", "offline": False}
    yield {"event": "start", "task_id": "bench", "objective": "o", "phases": ["exploration"],
           "memory_dir": "m", "workdir": ".", "model": "bench", "offline": False,
           "token_threshold": 150_000, "max_parallel": PARALLEL}  # fmt: skip
    yield {"event": "tokens", "agent": "lead", "context": 0, "threshold": 150_000}
    yield {"event": "phase", "phase": "exploration", "index": 1, "total": 1}
    keys = [f"exploration/exploration-m{i:05d}" for i in range(n)]
    for key in keys:
        yield {"event": "agent", "key": key, "agent": "researcher", "state": "pending"}
    agent = {"agent": "researcher"}
    for start in range(0, n, PARALLEL):
        batch = keys[start : start + PARALLEL]
        for key in batch:
            yield {"event": "agent", "key": key, **agent, "state": "running", "tokens": 0}
        for step in (1, 2):
            for key in batch:
                yield {"event": "agent", "key": key, **agent, "state": "running",
                       "tokens": 900 * step, "steps": step, "max_steps": 8,
                       "tool": "read_file"}  # fmt: skip
        for key in batch:
            yield {"event": "agent", "key": key, **agent, "state": "done", "tokens": 1_900}


def _terminal_view() -> Any:
    from rich.console import Console

    from orchestrator.cli.view import LiveView

    buffer = io.StringIO()
    view = LiveView(buffer)
    view.console = Console(file=buffer, width=WIDTH, height=HEIGHT, force_terminal=True)
    return view


def _piped_view() -> Any:
    from orchestrator.cli.view import PlainView

    return PlainView(io.StringIO())


def feed(n: int, mode: str) -> dict[str, float]:
    """Feed `events(n)` to a view of `mode` (terminal, piped); its cost per event."""
    fed = [build_event(e.pop("event"), **e) for e in events(n)]  # as the run sends them
    view = _terminal_view() if mode == "terminal" else _piped_view()
    with view:
        start, cpu = time.perf_counter(), time.process_time()
        for event in fed:
            view(event)
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    frame = 0.0
    if mode == "terminal":  # the median of a few frames: one is at the mercy of the load
        times = []
        for _ in range(FRAMES):
            with view.console.capture():
                start = time.perf_counter()
                view.console.print(view.render())
                times.append(time.perf_counter() - start)
        frame = statistics.median(times)
    return {"events": len(fed), "wall": wall / len(fed), "cpu": cpu / len(fed), "frame": frame}


def _run_child(memory: str, workdir: str, size: int, mode: str, queue: Any) -> None:
    """Child: one run of `size` subagents under a view of `mode`; puts its times."""
    from bench.big_task import _orchestrator
    from orchestrator.cli.process import settle_imports

    settle_imports()
    view = _terminal_view() if mode == "terminal" else _piped_view()
    orch = _orchestrator(Path(memory), Path(workdir), size // 4, PARALLEL, on_event=view)
    with view:
        start, cpu = time.perf_counter(), time.process_time()
        result = orch.run("Benchmark the live view", task_id="bench")
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    queue.put({"status": result.status, "findings": len(result.findings), "wall": wall,
               "cpu": cpu})  # fmt: skip


def run(size: int, root: Path) -> dict[str, dict[str, float]]:
    """A run of `size` subagents under each view, each in its own process."""
    ctx = multiprocessing.get_context("spawn")
    workdir = root / "work"
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "wf.yaml").write_text(
        "name: bench\nrun_all_phases: true\nphases: [p1, p2, p3, p4]\n"
    )
    out = {}
    for mode in ("piped", "terminal"):
        queue = ctx.Queue()
        memory = str(root / f"memory-{mode}")
        proc = ctx.Process(target=_run_child, args=(memory, str(workdir), size, mode, queue))
        proc.start()
        out[mode] = queue.get(timeout=3600)
        proc.join(3600)
        assert out[mode]["status"] == "done" and out[mode]["findings"] == size, out[mode]
    return out


def _all_sizes(sizes: list[int]) -> list[int]:
    """Each size and its tenth, smallest first."""
    return sorted({m for size in sizes for m in (size // 10, size)})


def _table(rows: list[tuple[str, ...]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)) for row in rows]


def report(sizes: list[int], fed: dict[tuple[int, str], dict[str, float]]) -> list[str]:
    rows = [("agents", "events", "terminal µs/event", "cpu µs/event", "piped µs/event",
             "cpu µs/event", "terminal / piped", "frame ms")]  # fmt: skip
    for n in _all_sizes(sizes):
        t, p = fed[n, "terminal"], fed[n, "piped"]
        rows.append((f"{n:,}", f"{t['events']:,}", f"{t['wall'] * 1e6:.1f}",
                     f"{t['cpu'] * 1e6:.1f}", f"{p['wall'] * 1e6:.1f}", f"{p['cpu'] * 1e6:.1f}",
                     f"{t['cpu'] / p['cpu']:.2f}x", f"{t['frame'] * 1e3:.1f}"))  # fmt: skip
    lines = [f"synthetic events, {PARALLEL} agents running at a time, view {WIDTH}x{HEIGHT}"]
    lines += _table(rows) + [""]
    for n in sizes:
        for mode in ("terminal", "piped"):
            grow = fed[n, mode]["cpu"] / fed[n // 10, mode]["cpu"]
            verdict = "yes" if grow <= 1.5 else "no"
            lines.append(
                f"{mode} cpu per event, {n:,} vs {n // 10:,} agents: {grow:.2f}x "
                f"(goal 1.5x: {verdict})"
            )
    return lines


def run_report(size: int, runs: dict[str, dict[str, float]]) -> list[str]:
    t, p = runs["terminal"], runs["piped"]
    rows = [("view", "run s", "cpu s", "ms/subagent", "cpu ms/subagent")]
    for mode, r in (("piped", p), ("terminal", t)):
        rows.append((mode, f"{r['wall']:.1f}", f"{r['cpu']:.1f}", f"{r['wall'] / size * 1e3:.1f}",
                     f"{r['cpu'] / size * 1e3:.1f}"))  # fmt: skip
    lines = ["", f"a run of {size:,} subagents (4 phases, max_parallel {PARALLEL}, scripted)"]
    lines += _table(rows)
    for label, key in (("wall", "wall"), ("cpu", "cpu")):
        value = t[key] / p[key]
        verdict = "yes" if value <= 1.1 else "no"
        lines.append(f"terminal / piped {label}: {value:.2f}x (goal 1.1x: {verdict})")
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,3000,10000", help="agents, comma-separated")
    parser.add_argument("--run", type=int, default=1000, help="subagents of the run (0: none)")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    fed = {}
    for n in _all_sizes(sizes):
        for mode in ("terminal", "piped"):
            fed[n, mode] = feed(n, mode)
    for line in report(sizes, fed):
        print(line, flush=True)
    if args.run:
        with tempfile.TemporaryDirectory(prefix="tether-live-view-") as tmp:
            runs = run(args.run, Path(tmp))
        for line in run_report(args.run, runs):
            print(line)


if __name__ == "__main__":
    main()
