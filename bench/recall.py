"""Recall benchmark: tether's index vs rg / grep -i vs plain BM25 (bm25s), one table.

Usage (from the repository root)::

    python -m bench.recall                    # 10K and 100K messages
    python -m bench.recall --sizes 10k,100k,1m --latency-queries 50 --grep-queries 20

For every corpus size (synthetic agent conversations from `bench.recall_data`, cached in
`bench/.data/`) it builds a fresh memory directory (the corpus files hard-linked into a
temp dir, the file that receives appends copied), then measures:

* index build: `MemoryStore.reindex()` throughput in messages per second;
* latency: p50/p95 of `MemoryStore.search(question, limit=10)` (each call syncs the
  index first, as every search does), against `rg -i -w -c -e w1 -e w2 ...` and
  `grep -r -i -w -c -E 'w1|w2|...'` over the same files in the same run, using the
  question's non-stopword words, and against `rg -c -F <longest word>` (one literal: the
  cheapest scan rg can do). `-c` keeps their output tiny, so these are bare scan costs,
  a lower bound on grep-based recall;
* incremental: append 1,000 new messages (one holds a new fact) to an indexed store, then
  search for that fact: wall time of append + search, and whether it ranked in the top 5;
* quality: recall@5 and @10 on the labelled questions for tether, for "grep of any query
  word" ranked by how many distinct query words a line holds (`rg -o` over the files,
  ties in file order), and for plain BM25 (`bm25s`, English stopwords, no stemming) over
  the same message texts tether indexes; recall@10 is also printed for the tuning half
  of the questions (even-numbered) and the held-out half (odd-numbered), which no ranking
  change was tuned on.

Not run by the test suite (it takes minutes at 1M).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

if __package__ in (None, ""):  # `python bench/recall.py`
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.recall_data import DATA_DIR, Corpus, _Noise, ensure_corpus, fact_pair
from bench.recall_worker import Worker, check_checkout
from memory import durable
from memory.backends.blocks import message_text
from memory.store import MemoryStore
from memory.text.words import STOPWORDS

_WORD = re.compile(r"[^\W_]+")
_STOP = set(STOPWORDS)


def _parse_sizes(text: str) -> list[int]:
    sizes = []
    for part in text.split(","):
        part = part.strip().lower()
        mult = 1_000_000 if part.endswith("m") else 1_000 if part.endswith("k") else 1
        sizes.append(int(float(part.rstrip("mk")) * mult))
    return sizes


def query_words(question: str) -> list[str]:
    words = [w.lower() for w in _WORD.findall(question)]
    return list(dict.fromkeys(w for w in words if w not in _STOP and len(w) > 1))


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def _stage(corpus: Corpus) -> Path:
    """A temp memory dir holding the corpus (hard links; the last file is a copy)."""
    tmp = Path(tempfile.mkdtemp(prefix="run-", dir=DATA_DIR))
    for i, src in enumerate(corpus.files):
        dest = tmp / "memory" / src.relative_to(corpus.root)
        dest.parent.mkdir(parents=True, exist_ok=True)
        if i == len(corpus.files) - 1:
            shutil.copy2(src, dest)  # same mtime: a reused index finds nothing to sync
        else:
            os.link(src, dest)
    return tmp


def _time_cmd(cmd: list[str]) -> float:
    began = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - began


def _grep_rank(root: Path, words: list[str], k: int) -> list[str]:
    """Citations of the lines holding the most distinct query words (rg -o), top k."""
    if not words:
        return []
    cmd = ["rg", "-i", "-w", "-o", "-n", "--no-heading", "--sort", "path"]
    for w in words:
        cmd += ["-e", w]
    out = subprocess.run(
        cmd + ["working"], cwd=root, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, check=False
    ).stdout
    found: dict[tuple[str, int], set[str]] = defaultdict(set)
    for raw in out.splitlines():
        path, line, word = raw.decode("utf-8", "replace").split(":", 2)
        found[(path, int(line))].add(word.lower())
    order = sorted(found, key=lambda key: (-len(found[key]), key[0], key[1]))
    return [f"{p}#L{n}" for p, n in order[:k]]


class _Bm25:
    """Plain BM25 from `bm25s` over the same message texts tether indexes."""

    def __init__(self, root: Path):
        import bm25s

        self.bm25s = bm25s
        self.ids: list[str] = []
        texts: list[str] = []
        for path in sorted((root / "working").glob("*/messages.jsonl")):
            rel = path.relative_to(root).as_posix()
            with open(path, "rb") as fh:
                for number, raw in enumerate(fh, start=1):
                    text = message_text(raw.rstrip(b"\n"))
                    if text:
                        self.ids.append(f"{rel}#L{number}")
                        texts.append(text)
        began = time.perf_counter()
        self.model = bm25s.BM25()
        self.model.index(
            bm25s.tokenize(texts, stopwords="en", show_progress=False), show_progress=False
        )
        self.build_s = time.perf_counter() - began

    def search(self, question: str, k: int) -> list[str]:
        tokens = self.bm25s.tokenize([question], stopwords="en", show_progress=False)
        if not tokens.vocab:
            return []
        docs, _ = self.model.retrieve(tokens, k=min(k, len(self.ids)), show_progress=False)
        return [self.ids[i] for i in docs[0]]


def _recall(ranked: list[list[str]], gold: list[str], k: int) -> float:
    return sum(1 for r, g in zip(ranked, gold, strict=True) if g in r[:k]) / max(len(gold), 1)


def _halves(ranked: list[list[str]], gold: list[str], k: int = 10) -> tuple[float, float]:
    """recall@k on the tuning half (even-numbered questions) and the held-out half (odd)."""
    return _recall(ranked[0::2], gold[0::2], k), _recall(ranked[1::2], gold[1::2], k)


def run_size(n: int, args: argparse.Namespace) -> dict:
    began = time.perf_counter()
    corpus = ensure_corpus(n, n_facts=args.facts)
    print(
        f"[{n:,}] corpus ready ({time.perf_counter() - began:.1f} s, {len(corpus.files)} files)",
        file=sys.stderr,
    )
    if args.baseline:
        return _compare(corpus, args)
    tmp = _stage(corpus)
    root = tmp / "memory"
    built = None
    if args.reuse_index:
        built = _cached_index(corpus)
        for f in built.glob("memory.db*"):
            shutil.copyfile(f, root / f.name)
    try:
        return _measure(corpus, root, args, built=built)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _cached_index(corpus: Corpus) -> Path:
    """A built index of `corpus` kept in `bench/.data/` (`--reuse-index`), built on first use.

    Its memory dir keeps the corpus files' mtimes and sizes (hard links; the last file, which
    the incremental step appends to, is a copy with the same mtime), so a run that copies its
    `memory.db` next to a fresh staging of the corpus finds nothing to sync.
    """
    cache = corpus.root.parent / "index"
    if (cache / "memory" / "memory.db").exists():
        return cache / "memory"
    partial = corpus.root.parent / "index.partial"
    shutil.rmtree(partial, ignore_errors=True)
    staged = _stage(corpus)
    try:
        store = MemoryStore(staged / "memory")
        report = store.reindex()
        store.close()
        (partial / "memory").mkdir(parents=True)
        for f in (staged / "memory").glob("memory.db*"):
            shutil.copyfile(f, partial / "memory" / f.name)
        (partial / "build.json").write_text(
            json.dumps({"seconds": report.seconds, "messages": corpus.messages})
        )
    finally:
        shutil.rmtree(staged, ignore_errors=True)
    os.replace(partial, cache)
    return cache / "memory"


def _measure(
    corpus: Corpus, root: Path, args: argparse.Namespace, built: Path | None = None
) -> dict:
    row: dict = {
        "messages": corpus.messages,
        "mb": sum(f.stat().st_size for f in corpus.files) / 1e6,
    }
    store = MemoryStore(root)
    if built is None:
        seconds = store.reindex().seconds
    else:  # --reuse-index: the build time recorded when the cached index was built
        seconds = json.loads((built.parent / "build.json").read_text())["seconds"]
    row["build_s"] = seconds
    row["build_rate"] = corpus.messages / seconds
    print(
        f"[{corpus.messages:,}] indexed in {seconds:.1f} s{' (cached)' if built else ''}",
        file=sys.stderr,
    )
    questions = [q["question"] for q in corpus.queries]
    gold = [q["citation"] for q in corpus.queries]
    store.search(questions[0], limit=10)  # warm the page cache and temp tables
    lat, ranked = [], []
    for rep in range(args.repeat):
        for q in questions:
            t0 = time.perf_counter()
            hits = store.search(q, limit=10)
            lat.append(time.perf_counter() - t0)
            if rep == 0:
                ranked.append([h.citation for h in hits])
    row["tether"] = (_pct(lat, 0.5), _pct(lat, 0.95))
    if args.dump_ranked:
        with open(args.dump_ranked, "a") as fh:
            fh.write(json.dumps({"messages": corpus.messages, "ranked": ranked}) + "\n")
    row["index_mb"] = sum(f.stat().st_size for f in root.glob("memory.db*")) / 1e6
    # this process after building and searching (bm25s comes later)
    row["rss_mb"], row["rss_file_mb"] = _rss_mb(), _rss_mb("RssFile:")
    row["tether_r5"], row["tether_r10"] = _recall(ranked, gold, 5), _recall(ranked, gold, 10)
    row["tether_halves"] = _halves(ranked, gold)
    if args.tether_only:
        nan = (float("nan"), float("nan"))
        row["rg"] = row["rg1"] = row["grep"] = nan
        row["grep_r5"] = row["grep_r10"] = None
        row["grep_halves"] = (None, None)
    else:
        _baseline_latency(row, root, questions, args)
        print(f"[{corpus.messages:,}] latency done", file=sys.stderr)
        grep_ranked = [_grep_rank(root, query_words(q), 10) for q in questions]
        row["grep_r5"], row["grep_r10"] = (
            _recall(grep_ranked, gold, 5),
            _recall(grep_ranked, gold, 10),
        )
        row["grep_halves"] = _halves(grep_ranked, gold)
    if not args.skip_bm25s and not args.tether_only:
        bm = _Bm25(root)
        bm_ranked = [bm.search(q, 10) for q in questions]
        row["bm25_r5"], row["bm25_r10"] = _recall(bm_ranked, gold, 5), _recall(bm_ranked, gold, 10)
        row["bm25_halves"] = _halves(bm_ranked, gold)
    row["incr_s"], row["incr_found"] = _incremental(store, corpus, root)
    store.close()
    return row


def _compare(corpus: Corpus, args: argparse.Namespace) -> dict:
    """Latency and recall of this checkout's search beside `args.baseline`'s, in one run.

    Each code searches in its own worker process (`bench.recall_worker`) over its own copy
    of the cached index (a later migration must not touch the baseline's), and the two are
    asked in turn, question by question, the first one alternating: both see the same load.
    """
    built = _cached_index(corpus)
    stages = {name: _stage(corpus) for name in ("baseline", "this")}
    workers = {"baseline": Worker(args.baseline), "this": Worker(None)}
    try:
        for tmp in stages.values():
            for f in built.glob("memory.db*"):
                shutil.copyfile(f, tmp / "memory" / f.name)
        questions = [q["question"] for q in corpus.queries]
        gold = [q["citation"] for q in corpus.queries]
        for name, w in workers.items():  # migrations, page cache, TEMP tables
            w.search(stages[name] / "memory", questions[0], 10)
        lat: dict[str, list[float]] = {name: [] for name in workers}
        ranked: dict[str, list[list[str]]] = {name: [] for name in workers}
        for rep in range(args.repeat):
            for i, q in enumerate(questions):
                order = ["baseline", "this"] if (i + rep) % 2 == 0 else ["this", "baseline"]
                for name in order:
                    got = workers[name].search(stages[name] / "memory", q, 10)
                    lat[name].append(got["s"])
                    if rep == 0:
                        ranked[name].append(got["cites"])
    finally:
        for w in workers.values():
            w.close()
        for tmp in stages.values():
            shutil.rmtree(tmp, ignore_errors=True)
    row: dict = {"messages": corpus.messages, "compare": {}}
    for name in workers:
        row["compare"][name] = {
            "p50": _pct(lat[name], 0.5),
            "p95": _pct(lat[name], 0.95),
            "r10": _recall(ranked[name], gold, 10),
            "halves": _halves(ranked[name], gold),
        }
    return row


def format_compare(rows: list[dict]) -> str:
    """The `--baseline` table: p50/p95 and recall@10 of both codes, and their ratio."""
    lines = [
        "| messages | baseline p50 / p95 ms | this p50 / p95 ms | this / baseline p50 | "
        "recall@10 baseline (tuning / held-out) | this (tuning / held-out) |",
        "|" + "---|" * 6,
    ]
    for r in rows:
        b, t = r["compare"]["baseline"], r["compare"]["this"]

        def cell(c: dict, ms: bool) -> str:
            if ms:
                return f"{c['p50'] * 1000:.2f} / {c['p95'] * 1000:.2f}"
            return f"{c['r10']:.0%} ({c['halves'][0]:.0%} / {c['halves'][1]:.0%})"

        lines.append(
            f"| {r['messages']:,} | {cell(b, True)} | {cell(t, True)} | "
            f"{t['p50'] / b['p50']:.3f} | {cell(b, False)} | {cell(t, False)} |"
        )
    return "\n".join(lines)


def _rss_mb(field: str = "VmRSS:") -> float:
    """This process's resident memory now, in MB (Linux `/proc`; 0 elsewhere); `RssFile:`
    is the part that is mapped files (memory.db is read through a memory map)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def _missing_baselines(args: argparse.Namespace) -> str:
    """What the asked-for baselines need and this machine lacks ("" when nothing)."""
    if args.tether_only:
        return ""
    missing = [f"`{tool}` is not on PATH" for tool in ("rg", "grep") if not shutil.which(tool)]
    if not args.skip_bm25s and importlib.util.find_spec("bm25s") is None:
        missing.append("`bm25s` is not installed")
    return ", ".join(missing)


def _baseline_latency(
    row: dict, root: Path, questions: list[str], args: argparse.Namespace
) -> None:
    rg, rg1, grep = [], [], []
    for i, q in enumerate(questions[: args.latency_queries]):
        words = query_words(q)
        cmd = ["rg", "-i", "-w", "-c"]
        for w in words:
            cmd += ["-e", w]
        rg.append(_time_cmd(cmd + [str(root / "working")]))
        longest = max(words, key=len)  # one literal word: rg's cheapest possible scan
        rg1.append(_time_cmd(["rg", "-c", "-F", longest, str(root / "working")]))
        if i < args.grep_queries:
            grep.append(
                _time_cmd(
                    ["grep", "-r", "-i", "-w", "-c", "-E", "|".join(words), str(root / "working")]
                )
            )
    row["rg"] = (_pct(rg, 0.5), _pct(rg, 0.95))
    row["rg1"] = (_pct(rg1, 0.5), _pct(rg1, 0.95))
    row["grep"] = (_pct(grep, 0.5), _pct(grep, 0.95))


def _incremental(store: MemoryStore, corpus: Corpus, root: Path) -> tuple[float, bool]:
    """Append 1,000 messages (one new fact) to the last file, then search for the fact."""
    rng = random.Random(corpus.messages + 99)
    noise = _Noise(rng)
    fact, question = fact_pair(rng, set())
    fact = fact.replace(".", f" (ticket INC-{rng.randint(10000, 99999)}).", 1)
    records = [noise.message() for _ in range(999)]
    records.insert(rng.randrange(1000), {"role": "assistant", "content": fact})
    target = sorted((root / "working").glob("*/messages.jsonl"))[-1]
    t0 = time.perf_counter()
    durable.append_jsonl(target, records, many=True)
    hits = store.search(question, limit=5)
    elapsed = time.perf_counter() - t0
    return elapsed, any(fact[:60] in h.text.replace("…", "") or fact[:40] in h.text for h in hits)


def format_table(rows: list[dict]) -> str:
    def ms(pair: tuple[float, float]) -> str:
        return f"{pair[0] * 1000:.1f} / {pair[1] * 1000:.1f}"

    def pct(value: float | None) -> str:
        return "-" if value is None else f"{value * 100:.0f}%"

    head = (
        "| messages | MB | build (msg/s) | tether p50/p95 ms | rg p50/p95 ms | "
        "rg 1 literal word p50/p95 ms | grep -i p50/p95 ms | tether/rg p50 | "
        "tether/rg 1 word p50 | tether/grep p50 | +1,000 msgs & search |"
    )
    lines = [head, "|" + "---|" * 11]
    for r in rows:
        lines.append(
            f"| {r['messages']:,} | {r['mb']:.0f} | {r['build_rate']:,.0f} | {ms(r['tether'])} "
            f"| {ms(r['rg'])} | {ms(r['rg1'])} | {ms(r['grep'])} | "
            f"{r['tether'][0] / r['rg'][0]:.3f} | {r['tether'][0] / r['rg1'][0]:.3f} | "
            f"{r['tether'][0] / r['grep'][0]:.3f} | {r['incr_s']:.2f} s "
            f"({'found' if r['incr_found'] else 'NOT found'}) |"
        )
    lines += [
        "",
        "| messages | messages MB | index on disk MB (memory.db) | index / messages "
        "| process RSS after build and search MB | of which mapped files MB |",
        "|" + "---|" * 6,
    ]
    for r in rows:
        lines.append(
            f"| {r['messages']:,} | {r['mb']:.0f} | {r['index_mb']:.0f} | "
            f"{r['index_mb'] / r['mb']:.2f} | {r['rss_mb']:.0f} | {r['rss_file_mb']:.0f} |"
        )
    lines += [
        "",
        "| messages | recall@5 tether | grep | bm25s | recall@10 tether | grep | bm25s |",
        "|" + "---|" * 7,
    ]
    for r in rows:
        lines.append(
            f"| {r['messages']:,} | {pct(r['tether_r5'])} | {pct(r['grep_r5'])} | "
            f"{pct(r.get('bm25_r5'))} | {pct(r['tether_r10'])} | {pct(r['grep_r10'])} | "
            f"{pct(r.get('bm25_r10'))} |"
        )
    lines += [
        "",
        "| messages | recall@10 tuning half (even questions): tether | grep | bm25s "
        "| held-out half (odd questions): tether | grep | bm25s |",
        "|" + "---|" * 7,
    ]
    for r in rows:
        bm = r.get("bm25_halves") or (None, None)
        lines.append(
            f"| {r['messages']:,} | {pct(r['tether_halves'][0])} | {pct(r['grep_halves'][0])} | "
            f"{pct(bm[0])} | {pct(r['tether_halves'][1])} | {pct(r['grep_halves'][1])} | "
            f"{pct(bm[1])} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="10k,100k", help="comma list, e.g. 10k,100k,1m")
    parser.add_argument("--facts", type=int, default=100, help="labelled questions per corpus")
    parser.add_argument("--latency-queries", type=int, default=50)
    parser.add_argument(
        "--grep-queries", type=int, default=20, help="questions timed with grep -i (slow at 1M)"
    )
    parser.add_argument("--skip-bm25s", action="store_true")
    parser.add_argument(
        "--reuse-index",
        action="store_true",
        help="build each size's index once into bench/.data/ and reuse it (build rate is "
        "the cached build's)",
    )
    parser.add_argument(
        "--tether-only", action="store_true", help="skip the rg, grep and bm25s baselines"
    )
    parser.add_argument("--repeat", type=int, default=1, help="time every question this many times")
    parser.add_argument("--dump-ranked", help="append each size's ranked citations (JSON lines)")
    parser.add_argument(
        "--baseline",
        help="a checkout of older code (e.g. `git worktree add ../base <commit>`): time its "
        "search beside this one's, alternating question by question (uses the cached index; "
        "no rg, grep or bm25s)",
    )
    args = parser.parse_args(argv)
    if args.baseline:
        if wrong := check_checkout(args.baseline):
            parser.exit(2, f"bench.recall: {wrong}\n")
        args.tether_only = True
    missing = _missing_baselines(args)
    if missing:
        parser.exit(2, f"bench.recall: {missing} (`pip install -e '.[bench]'` adds rg and "
                    "bm25s); or pass --tether-only\n")  # fmt: skip
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    rows = []
    show = format_compare if args.baseline else format_table
    for n in _parse_sizes(args.sizes):
        rows.append(run_size(n, args))
        print(show(rows[-1:]), file=sys.stderr)
    print(show(rows))


if __name__ == "__main__":
    main()
