"""Graph state per finished subagent: what LangGraph's checkpointer keeps, with and without pruning.

Run::

    python -m bench.graph_state                   # offline model surveying this checkout
    python -m bench.graph_state --workdir ~/src/click-8.1.7   # the sdist issue 32 measured
    python -m bench.graph_state --model scripted  # bench.orchestration's one-call policy
    python -m bench.graph_state --postgres postgresql://postgres@127.0.0.1/test
    python -m bench.graph_state --pruning off     # only the runs that keep every checkpoint

Each run is one offline survey (`run_all_phases: true`, at most 4 subagents a phase,
`max_parallel` 4) of `--phases` phases (default 8 and 16), once with pruning off
(`TETHER_PRUNE_CHECKPOINTS=0`: every checkpoint kept, as before `orchestrator.graph.pruning`) and
once with it on, each in a new memory directory. The model is tether's offline model (its
research policy reads, greps and cites the workdir's files) or, with `--model scripted`,
`bench.orchestration.fast_policy` (one `PhasePlan` of N subtasks, one `SubmitFindings` per
subagent: the smallest conversations a run can have).

What is counted, after the run returned (its connections closed; nothing is VACUUMed):

* **file**: the bytes of `.langgraph/` (`state.sqlite` with its `-wal` and `-shm`), as the
  file system reports them. A database tether created gives the pages a prune frees back
  to the file system (`auto_vacuum=INCREMENTAL`); an older one keeps them for later writes;
* **in use**: the database's pages that hold rows (`page_count - freelist_count`, times
  `page_size`);
* **peak**: the largest size of `.langgraph/` seen during the run (sampled every 20 ms):
  what the disk must hold at once;
* **checkpoints**: the rows of the `checkpoints` table, and the largest one's bytes;
* **memory dir**: every other file of the memory directory (plans, findings, messages,
  checkpoints as JSON, snapshots, `memory.db`): the human-readable memory beside it;
* with `--postgres URL`, the runs use LangGraph's `PostgresSaver` in a private schema of
  that database (created and dropped) and the memory on files; **pg tables** is
  `pg_total_relation_size` of its three tables (heap, TOAST and indexes, dead rows a
  `DELETE` left until autovacuum included), **pg live** the `pg_column_size` of the rows
  left.

The verdict lines compare the per-subagent figure of the longest and shortest run (goal:
within 1.25x; at most 100 KiB a subagent). KiB are 1,024 bytes.
"""

from __future__ import annotations

import argparse
import os
import secrets
import sqlite3
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import quote

OBJECTIVE = "Survey this repository: what each package does and how they fit"
PER_PHASE = 4
PG_TABLES = ("checkpoints", "checkpoint_blobs", "checkpoint_writes")
KIB = 1024


class Run(NamedTuple):
    phases: int
    pruned: bool
    backend: str
    subagents: int
    seconds: float
    file: int
    in_use: int
    peak: int
    checkpoints: int
    largest: int
    memory: int


def _dir_bytes(root: Path, skip: str | None = None) -> int:
    total = 0
    for path in root.rglob("*"):
        if skip and skip in path.parts:
            continue
        try:
            if path.is_file():
                total += path.stat().st_size
        except OSError:  # a file that went while we walked (a WAL, a temp file)
            pass
    return total


class _Peak:
    """The largest size of a folder seen every 20 ms while the block runs."""

    def __init__(self, folder: Path) -> None:
        self.folder, self.peak = folder, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self) -> None:
        while not self._stop.wait(0.02):
            if self.folder.exists():
                self.peak = max(self.peak, _dir_bytes(self.folder))

    def __enter__(self) -> _Peak:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()
        if self.folder.exists():
            self.peak = max(self.peak, _dir_bytes(self.folder))


def _sqlite_figures(db: Path) -> tuple[int, int, int]:
    """`(bytes in use, checkpoints, largest checkpoint)` of a `SqliteSaver` file."""
    conn = sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True)
    try:
        size = conn.execute("PRAGMA page_size").fetchone()[0]
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        free = conn.execute("PRAGMA freelist_count").fetchone()[0]
        rows, largest = conn.execute(
            "SELECT count(*), coalesce(max(length(checkpoint)), 0) FROM checkpoints"
        ).fetchone()
    finally:
        conn.close()
    return (pages - free) * size, rows, largest


def _pg_figures(url: str) -> tuple[int, int, int, int]:
    """`(relation bytes, live bytes, checkpoints, largest checkpoint)` of `PostgresSaver`."""
    import psycopg

    with psycopg.connect(url) as conn:
        relation = sum(
            conn.execute("SELECT pg_total_relation_size(%s)", (t,)).fetchone()[0] for t in PG_TABLES
        )
        live = sum(
            conn.execute(f"SELECT coalesce(sum(pg_column_size(t.*)), 0) FROM {t} t").fetchone()[0]
            for t in PG_TABLES
        )
        rows, largest = conn.execute(
            "SELECT count(*), coalesce(max(pg_column_size(checkpoint)), 0) FROM checkpoints"
        ).fetchone()
    return relation, live, rows, largest


@contextmanager
def pg_schema(base: str):
    """A URL whose `search_path` is a new schema of `base`'s database, dropped after."""
    import psycopg

    schema = f"tether_bench_{secrets.token_hex(4)}"
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    try:
        sep = "&" if "?" in base else "?"
        yield f"{base}{sep}options={quote(f'-csearch_path={schema}')}"
    finally:
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def _model(kind: str) -> Any:
    if kind == "scripted":
        from bench.orchestration import fake_model

        return fake_model()
    from orchestrator.offline import OfflineChatModel

    return OfflineChatModel()  # the research policy: reads the workdir's files


def survey(
    phases: int, pruned: bool, root: Path, workdir: Path, model: str, pg: str | None = None
) -> Run:
    """One survey of `phases` phases in a new memory directory under `root`."""
    from memory.backends.savers import open_postgres_saver
    from orchestrator.api import Orchestrator
    from orchestrator.graph.pruning import ENV_VAR

    names = ", ".join(f"phase-{i + 1}" for i in range(phases))
    workflow = root / f"wf-{phases}.yaml"
    workflow.write_text(f"name: bench\nrun_all_phases: true\nphases: [{names}]\n")
    memory = root / f"memory-{phases}-{'on' if pruned else 'off'}-{'pg' if pg else 'sqlite'}"
    os.environ[ENV_VAR] = "1" if pruned else "0"
    saver = open_postgres_saver(pg) if pg else None
    orch = Orchestrator(
        memory_dir=memory,
        workdir=workdir,
        workflow=workflow,
        model=_model(model),
        max_parallel=PER_PHASE,
        max_subtasks=PER_PHASE,
        checkpointer=saver,
    )
    try:
        with _Peak(memory / ".langgraph") as peak:
            start = time.perf_counter()
            result = orch.run(OBJECTIVE, task_id=f"survey-{phases}")
            seconds = time.perf_counter() - start
    finally:
        if saver is not None:
            saver.conn.close()
    if result.status != "done":
        raise RuntimeError(f"the {phases}-phase survey ended {result.status}: {result.failed}")
    mem = _dir_bytes(memory, skip=".langgraph")
    if pg:
        relation, live, rows, largest = _pg_figures(pg)
        return Run(phases, pruned, "postgres", len(result.findings), seconds, relation, live, 0,
                   rows, largest, mem)  # fmt: skip
    db = memory / ".langgraph" / "state.sqlite"
    in_use, rows, largest = _sqlite_figures(db)
    return Run(phases, pruned, "sqlite", len(result.findings), seconds,
               _dir_bytes(db.parent), in_use, peak.peak, rows, largest, mem)  # fmt: skip


def _kib(n: int) -> str:
    return f"{n / KIB:,.0f}"


def table(runs: list[Run]) -> list[str]:
    head = (
        "backend", "phases", "subagents", "pruning", "run s", "file KiB", "in use KiB",
        "peak KiB", "file/subagent KiB", "in use/subagent KiB", "checkpoints", "largest KiB",
        "memory dir KiB",
    )  # fmt: skip
    rows = [head]
    for r in runs:
        pg = r.backend == "postgres"
        rows.append(
            (
                r.backend, str(r.phases), str(r.subagents), "on" if r.pruned else "off",
                f"{r.seconds:.1f}", _kib(r.file), _kib(r.in_use), "-" if pg else _kib(r.peak),
                f"{r.file / r.subagents / KIB:.1f}", f"{r.in_use / r.subagents / KIB:.1f}",
                str(r.checkpoints), f"{r.largest / KIB:.1f}", _kib(r.memory),
            )
        )  # fmt: skip
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    return ["  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)) for row in rows]


def _figure(r: Run) -> int:
    """The bytes a verdict judges: SQLite's file, PostgreSQL's live rows (its tables keep
    the space of deleted rows until autovacuum, then reuse it)."""
    return r.in_use if r.backend == "postgres" else r.file


def verdicts(runs: list[Run]) -> list[str]:
    """Per backend and pruning: the per-subagent figure of the longest run against the
    shortest's (within 1.25x either way), and against the 100 KiB goal; what pruning saved."""
    lines = []
    for backend in dict.fromkeys(r.backend for r in runs):
        label = "pg live rows" if backend == "postgres" else "file"
        for pruned in (False, True):
            group = sorted(
                (r for r in runs if r.backend == backend and r.pruned == pruned),
                key=lambda r: r.phases,
            )
            if len(group) < 2:
                continue
            short, long = group[0], group[-1]
            a, b = _figure(short) / short.subagents, _figure(long) / long.subagents
            worst = max(_figure(r) / r.subagents for r in group) / KIB
            lines.append(
                f"{backend}, pruning {'on' if pruned else 'off'}: {label} per subagent "
                f"{a / KIB:.1f} KiB at {short.phases} phases, {b / KIB:.1f} KiB at "
                f"{long.phases}: {b / a:.2f}x (goal within 1.25x: "
                f"{'yes' if max(a, b) <= 1.25 * min(a, b) else 'no'}); at most {worst:.1f} KiB "
                f"(goal 100: {'yes' if worst <= 100 else 'no'})"
            )
        for phases in sorted({r.phases for r in runs if r.backend == backend}):
            pair = {r.pruned: r for r in runs if r.backend == backend and r.phases == phases}
            if len(pair) == 2:
                off, on = pair[False], pair[True]
                lines.append(
                    f"{backend}, {phases} phases: pruning leaves {_figure(on) / _figure(off):.3f} "
                    f"of the {label} ({_kib(_figure(off))} -> {_kib(_figure(on))} KiB), run "
                    f"time {on.seconds / off.seconds:.2f}x"
                )
    return lines


def _default_workdir() -> Path:
    """This checkout: the offline lead plans 4 subagents a phase for it (for the installed
    `click` package alone it plans 2)."""
    return Path(__file__).resolve().parent.parent


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--phases", default="8,16", help="comma-separated phase counts")
    parser.add_argument("--pruning", choices=("both", "on", "off"), default="both")
    parser.add_argument("--model", choices=("offline", "scripted"), default="offline")
    parser.add_argument("--workdir", type=Path, help="the tree to survey (default: this checkout)")
    parser.add_argument("--postgres", metavar="URL", help="also run on PostgresSaver there")
    args = parser.parse_args(argv)
    counts = [int(n) for n in args.phases.split(",")]
    modes = {"both": (False, True), "on": (True,), "off": (False,)}[args.pruning]
    workdir = (args.workdir or _default_workdir()).resolve()
    runs: list[Run] = []
    with tempfile.TemporaryDirectory(prefix="tether-graph-state-") as tmp:
        root = Path(tmp)
        for phases in counts:
            for pruned in modes:
                runs.append(survey(phases, pruned, root, workdir, args.model))
                if args.postgres:
                    with pg_schema(args.postgres) as url:
                        runs.append(survey(phases, pruned, root, workdir, args.model, url))
    print(
        f"graph state per finished subagent: {args.model} model, at most {PER_PHASE} subagents "
        f"a phase (the lead chose {runs[0].subagents / counts[0]:g}), workdir {workdir}"
    )
    for line in table(runs) + [""] + verdicts(runs):
        print(line)


if __name__ == "__main__":
    main()
