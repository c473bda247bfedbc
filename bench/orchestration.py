"""Orchestration benchmark: tether's overhead per subagent, resume time, checkpoint latency.

Run::

    python -m bench.orchestration            # default sizes
    python -m bench.orchestration --fanout 100 --resume-size 200 --checkpoints 200
    python -m bench.orchestration --history 300   # adds a run in a memory of 300 tasks

It prints one table with:

1. **Overhead per subagent** against a bare LangGraph graph doing the same fan-out with
   the same fake model (`OfflineChatModel` with a policy that answers at once: one
   `PhasePlan` of N subtasks for the lead, one `SubmitFindings` per subagent). The bare
   graph is measured twice, without a checkpointer and with `SqliteSaver` +
   `durability="sync"`, so the table separates LangGraph's own durability cost from
   tether's (plan/findings/merged files, registry, JSON checkpoints, events). Same
   process, same model, best of `--repeat` rounds, imports excluded, closing the
   databases included on both sides (SQLite copies its WAL into the database file at the
   last close, as a run's end does); a round runs every
   row once, so a slow spell of a shared machine slows all rows of a ratio alike. Each row
   also gives the process's CPU time per subagent (all threads), which other jobs on a
   shared machine disturb less than wall time.
   Two more rows split a run's cost: a run of one subagent (tether's fixed cost: lead
   planning turn, plan, merged, snapshot and checkpoint files, the final merge; and the
   create_agent workers' graph with one worker), and what each further subagent adds
   (the run of N less the run of one, over N - 1). Every tether run uses a new memory
   directory, as the workers' graph a new database; one more row times the one-subagent
   run as a further task in an existing memory directory (a user's usual case).
2. **Resume of a 200-subagent run killed half-way**: a forked child runs one phase of
   `--resume-size` subtasks and SIGKILLs itself after the `n/2`-th findings file
   (`TETHER_FAULT=subagent_after_findings:n/2`); the time of `Orchestrator.resume` is
   measured in another forked child (imports excluded; best of three pairs), with how many
   subagents it ran and how many finished ones LangGraph ran again: LangGraph queues each
   finished task's write behind the step's waiting tasks in its `max_concurrency` pool,
   so a kill mid-fan-out loses them, and tether's registry answers those without running
   the agent.
3. **Checkpoint write latency**: p50/p95 of writing a JSON checkpoint of a 200-subtask
   state (render from the template, validate against the schema, atomic durable write).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import re
import statistics
import tempfile
import time
from pathlib import Path
from typing import Annotated, Any, NamedTuple, TypedDict

OBJECTIVE = "Benchmark the fan-out"


def fast_policy(messages: list[Any], tools: list[dict]) -> Any:
    """Answer at once: the plan for the lead, findings for a subagent."""
    from langchain_core.messages import AIMessage

    names = [t.get("function", t).get("name") for t in tools]
    text = "\n".join(str(m.content) for m in messages)
    if "PhasePlan" in names:
        n = int(re.search(r"Max subtasks: (\d+)", text).group(1))
        subtasks = [
            {
                "id": f"s{i:03d}",
                "title": f"Part {i}",
                "description": "Look.",
                "agent": "researcher",
                "scope": ["."],
            }
            for i in range(n)
        ]
        args = {"strategy": "Fan out.", "subtasks": subtasks}
        return AIMessage("", tool_calls=[{"name": "PhasePlan", "args": args, "id": "p"}])
    if "SubmitAnswer" in names:
        call = {"name": "SubmitAnswer", "args": {"answer": "The parts are done."}, "id": "a"}
        return AIMessage("", tool_calls=[call])
    sub = re.search(r"Subtask: (\S+)", text)
    args = {"summary": f"Done {sub.group(1) if sub else '?'}.", "key_discoveries": ["x"]}
    return AIMessage("", tool_calls=[{"name": "SubmitFindings", "args": args, "id": "f"}])


def fake_model() -> Any:
    from orchestrator.offline import OfflineChatModel

    return OfflineChatModel(policy=fast_policy)


# -- bare LangGraph baseline --------------------------------------------------------------


def _merge(left: dict | None, right: dict | None) -> dict:
    return {**(left or {}), **(right or {})}


class BareState(TypedDict, total=False):
    n: int
    subtasks: list[dict]
    findings: Annotated[dict, _merge]


def bare_graph(model: Any, checkpointer: Any = None, *, agents: bool = False) -> Any:
    """plan -> Send x N -> worker -> merge, calling the same model the same way.

    `agents`: each worker runs a LangChain `create_agent` agent (one model call answered with
    the `SubmitFindings` structured output) inside its node, a durable subgraph of the run's
    checkpointer as tether's subagents are, instead of calling the model directly.
    """
    from langchain_core.messages import HumanMessage
    from langgraph.graph import END, START, StateGraph
    from langgraph.types import Send

    from orchestrator.types import PhasePlan, SubmitFindings

    lead = model.bind_tools([PhasePlan])
    worker_model = model.bind_tools([SubmitFindings])
    agent = None
    if agents:
        from langchain.agents import create_agent
        from langchain.agents.structured_output import ToolStrategy

        agent = create_agent(model, tools=[], response_format=ToolStrategy(SubmitFindings))

    def plan(state: BareState) -> dict:
        reply = lead.invoke([HumanMessage(f"Objective: x\nMax subtasks: {state['n']}")])
        return {"subtasks": reply.tool_calls[0]["args"]["subtasks"]}

    def fan_out(state: BareState) -> list:
        return [Send("worker", sub) for sub in state["subtasks"]]

    def worker(sub: dict) -> dict:
        prompt = [HumanMessage(f"Subtask: {sub['id']}")]
        if agent is not None:
            found = agent.invoke({"messages": prompt})["structured_response"]
            return {"findings": {sub["id"]: found.model_dump()}}
        reply = worker_model.invoke(prompt)
        return {"findings": {sub["id"]: reply.tool_calls[0]["args"]}}

    def merge(state: BareState) -> dict:
        return {}

    graph = StateGraph(BareState)
    graph.add_node("plan", plan)
    graph.add_node("worker", worker)
    graph.add_node("merge", merge)
    graph.add_edge(START, "plan")
    graph.add_conditional_edges("plan", fan_out, ["worker"])
    graph.add_edge("worker", "merge")
    graph.add_edge("merge", END)
    return graph.compile(checkpointer=checkpointer)


class Timed(NamedTuple):
    wall: float
    cpu: float
    """This process's CPU time (all threads): steadier than wall time on a shared machine."""


def timed(run: Any, *args: Any) -> Timed:
    """Wall and CPU seconds of `run(*args)` (which returns its own wall time)."""
    cpu = time.process_time()
    wall = run(*args)
    return Timed(wall, time.process_time() - cpu)


def best(runs: list[Timed]) -> Timed:
    """The fastest run by wall time, with the lowest CPU time seen."""
    return Timed(min(r.wall for r in runs), min(r.cpu for r in runs))


def time_bare(n: int, durable: bool, root: Path, parallel: int, agents: bool = False) -> float:
    from memory.backends.savers import open_sqlite_saver

    saver = open_sqlite_saver(root / f"bare-{time.monotonic_ns()}.sqlite") if durable else None
    graph = bare_graph(fake_model(), saver, agents=agents)
    config = {"configurable": {"thread_id": "t"}, "max_concurrency": parallel}
    start = time.perf_counter()
    out = graph.invoke({"n": n}, config, durability="sync" if durable else None)
    if saver is not None:  # timed, as tether's run closes its databases before it returns
        saver.conn.close()
    elapsed = time.perf_counter() - start
    assert len(out["findings"]) == n
    return elapsed


def time_tether(n: int, root: Path, parallel: int, memory: Path | None = None) -> float:
    """One run of `n` subagents in a new memory directory, or as a further task in
    `memory` (a user's second task: its folders and databases exist already)."""
    from orchestrator.api import Orchestrator

    workflow = root / "one.yaml"
    workflow.write_text("name: bench\nphases: [exploration]\n")
    memory = memory or root / f"tether-{time.monotonic_ns()}"
    orch = Orchestrator(
        memory_dir=memory,
        workdir=root,
        workflow=workflow,
        model=fake_model(),
        max_parallel=parallel,
        max_subtasks=n,
    )
    start = time.perf_counter()
    result = orch.run(OBJECTIVE, task_id=f"bench-{time.monotonic_ns()}")
    elapsed = time.perf_counter() - start
    assert result.status == "done" and len(result.findings) == n, result.failed
    return elapsed


def grown_memory(tasks: int, root: Path, parallel: int) -> tuple[float, float]:
    """`(best of 3 one-subagent runs in a memory that has run `tasks` tasks, the same in a
    new memory)`: what a user's long-lived memory directory adds to a run."""
    memory = root / "grown-memory"
    for _ in range(tasks):
        time_tether(1, root, parallel, memory)
    grown = min(time_tether(1, root, parallel, memory) for _ in range(3))
    fresh = min(time_tether(1, root, parallel) for _ in range(3))
    return grown, fresh


# -- resume after a kill ------------------------------------------------------------------


def _resume_child(kind: str, memory: str, workdir: str, n: int, queue: Any) -> None:
    from orchestrator.api import Orchestrator

    workflow = Path(workdir) / "one.yaml"
    orch = Orchestrator(
        memory_dir=memory, workdir=workdir, workflow=workflow, model=fake_model(), max_subtasks=n
    )
    if kind == "run":
        os.environ["TETHER_FAULT"] = f"subagent_after_findings:{n // 2}"
        orch.run(OBJECTIVE, task_id="big")
        os._exit(1)  # the fault should have killed us
    events: list[dict] = []
    orch.on_event = events.append
    from orchestrator.cli.process import settle_imports

    settle_imports()  # as `orchestrator resume` does before it starts
    start = time.perf_counter()
    result = orch.resume("big")
    elapsed = time.perf_counter() - start
    done = [e for e in events if e["event"] == "agent" and e["state"] == "done"]
    ran = sum(1 for e in done if not e.get("reused"))
    queue.put((elapsed, ran, len(done) - ran, len(result.findings), result.status))
    queue.close()
    queue.join_thread()  # flush before `os._exit` skips the interpreter's shutdown
    os._exit(0)


def time_resume(n: int, root: Path) -> tuple[float, int, int, int, int]:
    # "spawn": the parent already ran graphs (threads), which makes `fork` unsafe here;
    # imports happen before the timer starts in the child
    ctx = multiprocessing.get_context("spawn")
    root.mkdir(parents=True, exist_ok=True)
    memory = root / "resume-memory"
    (root / "one.yaml").write_text("name: bench\nphases: [exploration]\n")
    queue = ctx.Queue()
    killed = ctx.Process(target=_resume_child, args=("run", str(memory), str(root), n, queue))
    killed.start()
    killed.join()
    written = len(list((memory / "findings").glob("researcher-*.md")))
    resumer = ctx.Process(target=_resume_child, args=("resume", str(memory), str(root), n, queue))
    resumer.start()
    resumer.join(600)
    if resumer.exitcode != 0:
        raise RuntimeError(f"the resuming child failed (exit code {resumer.exitcode})")
    elapsed, ran, reused, findings, status = queue.get(timeout=10)
    assert killed.exitcode == -9 and status == "done", (killed.exitcode, status)
    return elapsed, ran, reused, findings, written


# -- checkpoint latency -------------------------------------------------------------------


def checkpoint_latency(count: int, root: Path) -> tuple[float, float]:
    from memory.store import MemoryStore
    from orchestrator.config.workflow import Workflow
    from orchestrator.graph.context import RunContext
    from orchestrator.graph.writes import checkpoint_state
    from orchestrator.state import initial_state

    store = MemoryStore(root / "cp-memory")
    ctx = RunContext(store=store, workflow=Workflow(), model=None, project_dir=str(root))
    state = initial_state(
        task_id="cp", objective=OBJECTIVE, workdir=str(root), phases=["exploration", "review"]
    )
    state["subtasks"] = {
        f"exploration/s{i:03d}": {
            "id": f"s{i:03d}",
            "title": f"Part {i}",
            "description": "Look at it.",
            "agent": "researcher",
            "scope": ["."],
            "phase": "exploration",
        }
        for i in range(200)
    }
    state["findings"] = {
        k: {"path": f"findings/researcher-{i}.md", "summary": "ok"}
        for i, k in enumerate(list(state["subtasks"])[:100])
    }
    samples = []
    for _ in range(count):
        start = time.perf_counter()
        checkpoint_state(ctx, state, trigger="bench", next_action="continue")
        samples.append((time.perf_counter() - start) * 1000)
    store.close()
    samples.sort()
    return statistics.median(samples), samples[int(0.95 * (len(samples) - 1))]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fanout", type=int, default=50, help="subagents in the fan-out")
    parser.add_argument("--repeat", type=int, default=5, help="rounds (best of)")
    parser.add_argument("--parallel", type=int, default=4, help="max concurrency")
    parser.add_argument("--resume-size", type=int, default=200)
    parser.add_argument("--checkpoints", type=int, default=200)
    parser.add_argument(
        "--history",
        type=int,
        default=0,
        help="also time a one-subagent run in a memory that has run this many tasks",
    )
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="tether-bench-") as tmp:
        root = Path(tmp)
        existing = root / "existing-memory"
        time_tether(4, root, args.parallel, existing)  # warm up imports and caches
        time_bare(4, True, root, args.parallel, True)
        n, par = args.fanout, args.parallel
        kinds = {  # one-subagent runs: the fixed cost of a run, and what each further adds
            "bare": lambda: timed(time_bare, n, False, root, par),
            "bare_sync": lambda: timed(time_bare, n, True, root, par),
            "agents_sync": lambda: timed(time_bare, n, True, root, par, True),
            "tether": lambda: timed(time_tether, n, root, par),
            "agents_one": lambda: timed(time_bare, 1, True, root, par, True),
            "tether_one": lambda: timed(time_tether, 1, root, par),
            "tether_one_existing": lambda: timed(time_tether, 1, root, par, existing),
        }
        # rounds of one run of each kind, so a slow spell of a shared machine hits every
        # row of a ratio alike instead of only the rows measured during it
        samples: dict[str, list[Timed]] = {kind: [] for kind in kinds}
        for _ in range(args.repeat):
            for kind, run in kinds.items():
                samples[kind].append(run())
        bare, bare_sync, agents_sync, tether, agents_one, tether_one, tether_existing = (
            best(samples[kind]) for kind in kinds
        )
        # the ratio in each round, whose two runs met the same state of the machine
        paired = sorted(
            t.wall / a.wall for t, a in zip(samples["tether"], samples["agents_sync"], strict=True)
        )
        # best of 3 kill-and-resume pairs (each in fresh processes, a fresh memory)
        resumes = [time_resume(args.resume_size, root / f"resume-{i}") for i in range(3)]
        resume, ran, reused, findings, written = min(resumes)
        p50, p95 = checkpoint_latency(args.checkpoints, root)
        history = grown_memory(args.history, root, par) if args.history else None

    def per(t: Timed) -> str:
        return f"{t.wall / n * 1000:.2f} ms/subagent (cpu {t.cpu / n * 1000:.2f})"

    def marginal(big: Timed, one: Timed) -> str:
        wall, cpu = (big.wall - one.wall) / (n - 1), (big.cpu - one.cpu) / (n - 1)
        return f"{wall * 1000:.2f} ms (cpu {cpu * 1000:.2f})"

    rows = [
        ("bare LangGraph, no checkpointer", per(bare), "1.0x"),
        (
            "bare LangGraph + SqliteSaver sync",
            per(bare_sync),
            f"{bare_sync.wall / bare.wall:.1f}x",
        ),
        (
            "bare LangGraph + create_agent workers, sync",
            per(agents_sync),
            f"{agents_sync.wall / bare.wall:.1f}x (vs sync: "
            f"{agents_sync.wall / bare_sync.wall:.1f}x)",
        ),
        (
            "tether (files, registry, checkpoints)",
            per(tether),
            f"{tether.wall / bare.wall:.1f}x (vs sync: {tether.wall / bare_sync.wall:.1f}x; "
            f"cpu {tether.cpu / bare_sync.cpu:.1f}x; vs create_agent workers: "
            f"{tether.wall / agents_sync.wall:.2f}x, cpu {tether.cpu / agents_sync.cpu:.2f}x)",
        ),
        (
            "  the same ratio round by round",
            f"median {statistics.median(paired):.2f}x",
            f"{paired[0]:.2f}x to {paired[-1]:.2f}x over {len(paired)} rounds "
            "(each round's tether and workers runs back to back)",
        ),
        (
            "fixed cost of a run (1 subagent)",
            f"tether {tether_one.wall * 1000:.1f} ms (cpu {tether_one.cpu * 1000:.1f})",
            f"create_agent workers {agents_one.wall * 1000:.1f} ms "
            f"(cpu {agents_one.cpu * 1000:.1f})",
        ),
        (
            "  the same, a further task in an existing memory",
            f"tether {tether_existing.wall * 1000:.1f} ms (cpu {tether_existing.cpu * 1000:.1f})",
            "folders, memory.db and the LangGraph database exist already",
        ),
        (
            f"each further subagent (runs of {n} less runs of 1)",
            f"tether {marginal(tether, tether_one)}",
            f"create_agent workers {marginal(agents_sync, agents_one)}; ratio "
            f"{(tether.wall - tether_one.wall) / (agents_sync.wall - agents_one.wall):.2f}x "
            f"(cpu {(tether.cpu - tether_one.cpu) / (agents_sync.cpu - agents_one.cpu):.2f}x)",
        ),
        (
            f"resume {args.resume_size}-subagent run killed at {written}",
            f"{resume:.2f} s",
            f"{ran} subagents ran, {findings} findings ({reused} finished ones re-entered "
            "and reused from the registry)",
        ),
        (
            f"checkpoint write ({args.checkpoints} x, 200 subtasks)",
            f"p50 {p50:.2f} ms",
            f"p95 {p95:.2f} ms",
        ),
    ]
    if history is not None:
        rows.append(
            (
                f"1-subagent run after {args.history} tasks in the memory",
                f"{history[0] * 1000:.1f} ms",
                f"{history[1] * 1000:.1f} ms in a new memory: {history[0] / history[1]:.2f}x",
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    print(f"fan-out of {n} subagents, max_parallel {args.parallel}, best of {args.repeat} rounds")
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=False)))


if __name__ == "__main__":
    main()
