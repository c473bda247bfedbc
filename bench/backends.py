"""Storage backends side by side: recall through the contract, and orchestration per backend.

Run (PostgreSQL at `$TETHER_BENCH_PG_URL`, default `postgresql://postgres@127.0.0.1/test`; a
private schema is created and dropped)::

    python -m bench.backends                 # 10K messages, 40 subagents
    python -m bench.backends --sizes 10k,100k --fanout 100

1. **Recall** on `bench.recall`'s labelled corpus: every message becomes one `SearchDoc`
   (id = its citation, `working/T0001/messages.jsonl#L12`), loaded with `index_upsert` in
   batches of 1,000 into each backend (files+SQLite: the FTS5 index and query planner behind
   `memory search`; PostgreSQL `tsvector` + GIN; the in-memory reference up to 20K), then
   every labelled question is asked with `index_query(limit=10)`: build rate (messages/s),
   search p50/p95, recall@10. The first row is `memory search` itself on a memory directory
   holding the corpus as files (`MemoryStore.reindex()`, then `MemoryStore.search`).
2. **Orchestration**: one phase of N subagents with the fast fake model of
   `bench.orchestration`: on a memory directory with graph state in `SqliteSaver` (the
   default) or LangGraph's `PostgresSaver` (`Orchestrator(checkpointer=...)`), and with
   everything on PostgreSQL (`Orchestrator(memory_url=...)`, what `--memory-url` runs):
   wall time per subagent.
3. **Appends to a growing log**: `append_lines` of one 300-byte message to
   `working/T/messages.jsonl` as the log grows to `--log-lines` lines (in batches of 1,000):
   the median of 20 single appends at each size, per backend, and its ratio to the
   first size (1.0 means an append costs the same however long the log is).
4. **Concurrent writers** (`bench.concurrency`): `--writers` processes append `--messages`
   messages each to one task's log through `WorkingMemory.append_message` while
   `--searchers` processes search it (until the writers are done, or `--searches-each N`
   searches each: the same search work on both backends), on files and on PostgreSQL:
   wall time, appends per second, searches done (and per second), the CPU of one append
   and of one search (the caller's + PostgreSQL's server process's), the ratio to files,
   and the check that every message is there once and in order per writer. `--parts`
   picks sections (`recall,orchestration,appends,concurrency`); `--repeat N` runs the
   concurrency race N times and prints each.
"""

from __future__ import annotations

import argparse
import os
import secrets
import shutil
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.recall import _pct, _recall, _stage
from bench.recall_data import ensure_corpus
from memory.backends.blocks import message_text
from memory.contract.base import SearchDoc

PG_URL = os.environ.get("TETHER_BENCH_PG_URL", "postgresql://postgres@127.0.0.1/test")
BATCH = 1000


def _pg_problem() -> str:
    """Why PostgreSQL cannot be benchmarked here ("" when it can)."""
    try:
        import psycopg
    except ImportError:
        return "psycopg is not installed: pip install -e '.[postgres]'"
    try:
        psycopg.connect(PG_URL, connect_timeout=5).close()
    except psycopg.Error as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return f"cannot reach PostgreSQL at {PG_URL} ({first}); start it or set TETHER_BENCH_PG_URL"
    return ""


@contextmanager
def pg_schema():
    import psycopg

    schema = f"tether_bench_{secrets.token_hex(4)}"
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    try:
        sep = "&" if "?" in PG_URL else "?"
        yield f"{PG_URL}{sep}options={quote(f'-csearch_path={schema}')}"
    finally:
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def corpus_docs(corpus) -> list[SearchDoc]:
    docs = []
    for path in corpus.files:
        rel = path.relative_to(corpus.root).as_posix()
        with path.open("rb") as fh:
            for n, raw in enumerate(fh, start=1):
                text = message_text(raw)
                if text:
                    docs.append(SearchDoc(f"{rel}#L{n}", "messages", text, rel))
    return docs


def measure(backend, docs, questions, gold) -> dict:
    began = time.perf_counter()
    for i in range(0, len(docs), BATCH):
        backend.index_upsert(docs[i : i + BATCH])
    build = time.perf_counter() - began
    backend.index_query(questions[0], limit=10)
    lat, ranked = [], []
    for q in questions:
        t0 = time.perf_counter()
        hits = backend.index_query(q, limit=10)
        lat.append(time.perf_counter() - t0)
        ranked.append([h.doc_id for h in hits])
    return {
        "build_rate": len(docs) / build,
        "p50": _pct(lat, 0.5),
        "p95": _pct(lat, 0.95),
        "r10": _recall(ranked, gold, 10),
    }


def recall_rows(n: int) -> list[tuple[str, dict]]:
    from memory.backends.files import FilesBackend
    from memory.backends.inmemory import InMemoryBackend
    from memory.backends.postgres import PostgresBackend
    from memory.store import MemoryStore

    corpus = ensure_corpus(n)
    docs = corpus_docs(corpus)
    questions = [q["question"] for q in corpus.queries]
    gold = [q["citation"] for q in corpus.queries]
    rows = []
    tmp = _stage(corpus)
    try:
        store = MemoryStore(tmp / "memory")
        t0 = time.perf_counter()
        store.reindex()
        build = time.perf_counter() - t0
        lat, ranked = [], []
        for q in questions:
            t1 = time.perf_counter()
            ranked.append([h.citation for h in store.search(q, limit=10)])
            lat.append(time.perf_counter() - t1)
        store.close()
        reference = {"build_rate": corpus.messages / build, "p50": _pct(lat, 0.5)}
        reference |= {"p95": _pct(lat, 0.95), "r10": _recall(ranked, gold, 10)}
        rows.append(("files: memory search (tether recall)", reference))
        with FilesBackend.open(tmp / "contract") as backend:
            label = "files: contract index (FTS5 + planner)"
            rows.append((label, measure(backend, docs, questions, gold)))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    with pg_schema() as url, PostgresBackend.open(url) as backend:
        rows.append(
            ("postgres: contract index (tsvector)", measure(backend, docs, questions, gold))
        )
    if n <= 20_000:
        rows.append(
            ("memory: contract index (BM25)", measure(InMemoryBackend(), docs, questions, gold))
        )
    return rows


def orchestration_rows(n: int) -> list[tuple[str, float]]:
    from bench.orchestration import OBJECTIVE, fake_model
    from memory.backends.savers import open_postgres_saver
    from orchestrator.api import Orchestrator

    rows = []
    labels = {
        "sqlite": "files (SqliteSaver)",
        "postgres": "files + PostgresSaver",
        "url": "--memory-url: memory and PostgresSaver on PostgreSQL",
    }
    for kind, label in labels.items():
        with tempfile.TemporaryDirectory() as tmp, pg_schema() as url:
            root = Path(tmp)
            workflow = root / "one.yaml"
            workflow.write_text("name: bench\nphases: [exploration]\n")
            saver = open_postgres_saver(url) if kind == "postgres" else None
            orch = Orchestrator(
                memory_dir=root / "memory",
                memory_url=url if kind == "url" else None,
                workdir=root,
                workflow=workflow,
                model=fake_model(),
                max_parallel=4,
                max_subtasks=n,
                checkpointer=saver,
            )
            with orch:
                began = time.perf_counter()
                result = orch.run(OBJECTIVE, task_id="bench")
                elapsed = time.perf_counter() - began
            if saver is not None:
                saver.conn.close()
            assert result.status == "done" and len(result.findings) == n, result.failed
            rows.append((label, elapsed / n))
    return rows


def append_rows(total: int) -> list[tuple[str, list[tuple[int, float]]]]:
    import json
    import statistics

    from memory.backends import open_backend

    line = json.dumps({"role": "assistant", "content": "word " * 55})
    path = "working/T/messages.jsonl"
    marks = sorted({0, total // 4, total // 2, total})
    rows = []
    with tempfile.TemporaryDirectory() as tmp, pg_schema() as url:
        for name, where in (("files + SQLite", str(Path(tmp) / "memory")), ("PostgreSQL", url)):
            with open_backend(where) as backend:
                backend.put_document(path, b"")
                size, found = 0, []
                for mark in marks:
                    while size < mark:
                        batch = min(BATCH, mark - size)
                        backend.append_lines(path, [line] * batch)
                        size += batch
                    times = []
                    for _ in range(20):
                        began = time.perf_counter()
                        backend.append_lines(path, [line])
                        times.append(time.perf_counter() - began)
                    size += 20
                    found.append((mark, statistics.median(times)))
                rows.append((name, found))
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10k")
    parser.add_argument("--fanout", type=int, default=40)
    parser.add_argument("--log-lines", type=int, default=20_000)
    parser.add_argument("--writers", type=int, default=8)
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--searchers", type=int, default=2)
    parser.add_argument("--searches-each", type=int, default=None)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--parts", default="recall,orchestration,appends,concurrency")
    args = parser.parse_args(argv)
    parts = set(args.parts.split(","))
    problem = _pg_problem()
    if problem:
        parser.exit(2, f"bench.backends: {problem}\n")
    if "recall" in parts:
        recall_table(args)
    if "orchestration" in parts:
        print()
        print(f"| orchestration ({args.fanout} subagents, 1 phase) | per subagent |")
        print("|---|---:|")
        for name, per in orchestration_rows(args.fanout):
            print(f"| {name} | {per * 1000:.0f} ms |")
    if "appends" in parts:
        print()
        print("| append one message to a log of | backend | median | vs an empty log |")
        print("|---:|---|---:|---:|")
        for name, found in append_rows(args.log_lines):
            for lines, seconds in found:
                ratio = seconds / found[0][1]
                print(f"| {lines:,} lines | {name} | {seconds * 1000:.2f} ms | {ratio:.1f}x |")
    if "concurrency" in parts:
        print()
        concurrency_table(args)


def concurrency_table(args: argparse.Namespace) -> None:
    from bench.concurrency import fsync_ms, run

    total = args.writers * args.messages
    each = f" ({args.searches_each:,} each)" if args.searches_each is not None else ""
    print(
        f"| {args.writers} writers x {args.messages:,} messages, {args.searchers} searchers{each} "
        "| wall | appends/s | searches (per s) | CPU per append | CPU per search | vs files "
        "| every message once, in order |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory() as tmp, pg_schema() as url:
            files = None
            for name, where in (("files + SQLite", str(Path(tmp) / "memory")), ("PostgreSQL", url)):
                got = run(
                    where,
                    writers=args.writers,
                    messages=args.messages,
                    searchers=args.searchers,
                    searches_each=args.searches_each,
                )
                files = files or got["wall"]
                print(
                    f"| {name} | {got['wall']:.1f} s | {total / got['wall']:,.0f} "
                    f"| {got['searches']:,} ({got['searches'] / got['wall']:,.0f}) "
                    f"| {_cpu_ms(got['append_cpu'])} | {_cpu_ms(got['search_cpu'])} "
                    f"| {got['wall'] / files:.2f}x | {got['problem'] or 'yes'} |",
                    flush=True,
                )
    with tempfile.TemporaryDirectory() as tmp:
        print(
            f"\nThe disk under the files backend: appending a line and fsyncing it takes "
            f"{fsync_ms(tmp):.2f} ms (median of 300), which every files append waits for."
        )


def _cpu_ms(used: tuple[float, float]) -> str:
    """`client + server` CPU milliseconds (the server's only where it has any)."""
    client, server = used
    if server <= 0:
        return f"{client * 1000:.2f} ms"
    return f"{client * 1000:.2f} + {server * 1000:.2f} ms"


def recall_table(args: argparse.Namespace) -> None:
    print("| corpus | backend | build (msg/s) | search p50 | search p95 | recall@10 |")
    print("|---|---|---:|---:|---:|---:|")
    for part in args.sizes.split(","):
        n = int(float(part.lower().rstrip("km")) * (1000 if part.lower().endswith("k") else 1))
        for name, row in recall_rows(n):
            print(
                f"| {n:,} | {name} | {row['build_rate']:,.0f} | {row['p50'] * 1000:.1f} ms "
                f"| {row['p95'] * 1000:.1f} ms | {row['r10']:.2f} |"
            )


if __name__ == "__main__":
    main()
