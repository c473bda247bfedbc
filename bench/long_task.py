"""A long task in waves: does anything grow faster than the work?

A scripted lead (the real `langchain-openai` client against the scripted server of
`tests/orchestrator/openai_server.py`) documents N one-line modules, W a wave, in one phase:
each wave it plans the next W modules and asks for another wave while some are left; each
writer reads its module and submits. The run is tether's own code end to end (graph, memory,
checkpoints, index) with a model that costs nothing, so what is measured is tether.

Printed per wave (every wave up to 10, then every tenth and the last): the lead's plan prompt
(tokens as the server counts them), the wave's wall time, and the bytes of the checkpoints,
the memory (without LangGraph's database) and the search index (`memory.db`) so far. Then the
ratios that matter, from the same run: the last wave's prompt over the second's; bytes per
subagent at N over those at N/2 (a second run); and a run of N/4 modules killed (-9) at a
random subagent's finding, then resumed: every module covered, how many subagents ran twice
(at most those in flight).

    python -m bench.long_task                  # 2,000 modules in waves of 20 (~6 minutes)
    python -m bench.long_task --modules 400    # a quick look
    python -m bench.long_task --modules 10000 --wave 50   # longer than the command limit

Terminal against piped output (the live view's cost) is `python -m bench.live_view`.
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.orchestrator.openai_server import ScriptedOpenAI, prompt_tokens  # noqa: E402
from tests.orchestrator.scripted_agents import (  # noqa: E402
    offered,
    project,
    responder,
    subagent_starts,
)

REPO = Path(__file__).resolve().parents[1]


def _bytes(folder: Path, *, skip: str | None = None) -> int:
    if not folder.exists():
        return 0
    if folder.is_file():
        return folder.stat().st_size
    return sum(
        p.stat().st_size
        for p in folder.rglob("*")
        if p.is_file() and (skip is None or skip not in p.parts)
    )


def _env(server: ScriptedOpenAI) -> dict[str, str]:
    return {
        **os.environ,
        "OPENAI_API_KEY": "sk-bench",
        "OPENAI_BASE_URL": server.base_url,
        "TETHER_ALLOW_MODEL_REQUESTS": "1",
        "PYTHONPATH": str(REPO),
    }


def run(root: Path, modules: int, wave: int) -> dict:
    """One task in process, measured at each wave's merge."""
    from orchestrator.api import Orchestrator

    project(root, modules, wave)
    memory = root / "memory"
    rows: list[dict] = []
    with ScriptedOpenAI(responder=responder(modules, wave, by_wave=True)) as server:
        os.environ.update(_env(server))
        started = last = time.monotonic()

        def on_event(event: dict) -> None:
            nonlocal last
            if event["event"] != "merged":
                return
            now = time.monotonic()
            rows.append(
                {
                    "wave": event.get("wave") or 1,
                    "wall": now - last,
                    "checkpoints": _bytes(memory / "checkpoints"),
                    "memory": _bytes(memory, skip=".langgraph"),
                    "index": _bytes(memory / "memory.db")
                    + sum(_bytes(p) for p in memory.glob("memory.db-*")),
                }
            )
            last = now

        orch = Orchestrator(
            memory_dir=memory,
            workdir=root,
            workflow=root / "wf.yaml",
            model="openai:gpt-4o-mini",
            max_parallel=4,
            max_waves=modules // wave + 1,
            on_event=on_event,
        )
        result = orch.run("Document every module", task_id="long")
        wall = time.monotonic() - started
        plans = [prompt_tokens(b) for b in server.requests if "PhasePlan" in offered(b)]
    for row, tokens in zip(rows, plans, strict=False):
        row["prompt"] = tokens
    return {"status": result.status, "rows": rows, "wall": wall, "findings": len(result.findings)}


def killed(root: Path, modules: int, wave: int, seed: int) -> dict:
    """A run killed at a random subagent's finding, then resumed, through the CLI."""
    project(root, modules, wave)
    at = random.Random(seed).randint(wave + 1, modules - 1)
    cmd = [sys.executable, "-m", "orchestrator.cli"]
    common = ["--memory-dir", str(root / "memory")]
    with ScriptedOpenAI(responder=responder(modules, wave, by_wave=True)) as server:
        env = _env(server)
        first = subprocess.run(
            [*cmd, "run", "Document every module", "--task", "k", "--workdir", str(root),
             "--workflow", str(root / "wf.yaml"), "--model", "openai:gpt-4o-mini",
             "--max-waves", str(modules // wave + 1), *common],
            env={**env, "TETHER_FAULT": f"subagent_after_findings:{at}"},
            capture_output=True, text=True,
        )  # fmt: skip
        second = subprocess.run(
            [*cmd, "resume", "--task", "k", *common], env=env, capture_output=True, text=True
        )
        starts = subagent_starts(server.requests)
    findings = [p for p in (root / "memory" / "findings").glob("writer-*.md")]
    return {
        "killed_at": at,
        "exit": (first.returncode, second.returncode),
        "covered": len(starts),
        "findings": len(findings),
        "twice": sum(1 for n in starts.values() if n > 1),
    }


def _table(rows: list[dict]) -> None:
    print(f"{'wave':>5} {'lead prompt':>12} {'wall s':>8} {'checkpoints':>13} "
          f"{'memory':>13} {'index':>13}")  # fmt: skip
    shown = [r for i, r in enumerate(rows) if i < 10 or (i + 1) % 10 == 0 or i == len(rows) - 1]
    for r in shown:
        print(
            f"{r['wave']:>5} {r.get('prompt', 0):>12,} {r['wall']:>8.2f} "
            f"{r['checkpoints']:>13,} {r['memory']:>13,} {r['index']:>13,}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--modules", type=int, default=2000)
    parser.add_argument("--wave", type=int, default=20)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--no-kill", action="store_true", help="skip the kill -9 run")
    args = parser.parse_args()
    n, w = args.modules, args.wave
    with tempfile.TemporaryDirectory(prefix="tether-long-") as tmp:
        base = Path(tmp)
        full = run(base / "full", n, w)
        print(f"\n{n:,} modules in waves of {w}: {full['status']}, {full['findings']:,} "
              f"findings, {full['wall']:.0f} s\n")  # fmt: skip
        _table(full["rows"])
        half = run(base / "half", n // 2, w)
        rows, hrows = full["rows"], half["rows"]
        print("\nratios (same machine, same run):")
        if len(rows) > 2:
            print(f"  lead prompt, last wave / second wave:        "
                  f"{rows[-1]['prompt'] / rows[1]['prompt']:.2f}")  # fmt: skip
        for key in ("checkpoints", "memory", "index"):
            at_n, at_half = rows[-1][key] / n, hrows[-1][key] / (n // 2)
            label = f"{key} bytes per subagent, N / (N/2):"
            print(f"  {label:<45}{at_n / at_half:.2f}  ({at_n:,.0f} vs {at_half:,.0f})")
        wall_n, wall_half = full["wall"] / n, half["wall"] / (n // 2)
        print(f"  wall per subagent, N / (N/2):               {wall_n / wall_half:.2f}  "
              f"({wall_n * 1000:.0f} ms vs {wall_half * 1000:.0f} ms)")  # fmt: skip
        if not args.no_kill:
            k = killed(base / "killed", max(n // 4, 2 * w), w, args.seed)
            print(
                f"\nkill -9 at finding {k['killed_at']} of {max(n // 4, 2 * w)}, then resume: "
                f"exits {k['exit']}, {k['covered']} modules started, {k['findings']} findings "
                f"files, {k['twice']} subagent(s) run twice (those in flight)"
            )


if __name__ == "__main__":
    main()
