"""Recall on real conversations: LoCoMo's turns, tether's search, one table.

Usage (from the repository root)::

    python -m bench.locomo                          # this checkout's search
    python -m bench.locomo --baseline ../main       # and a baseline checkout's, same run
    python -m bench.locomo --dates text             # variant: each turn carries its date
    python -m bench.locomo --dates ts               # variant: ... as a timestamp (`ts`)

**Data.** LoCoMo (snap-research/LoCoMo, `data/locomo10.json`, CC BY-NC 4.0) is never part of
this repository (its licence forbids commercial use): put the file at
`bench/.data/locomo/locomo10.json` (git ignores `bench/.data/`), e.g. from a clone of
https://github.com/snap-research/LoCoMo. Without it the command says so and exits with 2.

**Protocol** (issue 34, so figures compare across rounds): each conversation's turns, in
session order, become one `messages.jsonl`, one line a turn, `{"role": "user", "name":
SPEAKER, "content": TEXT}` (no dates). Questions of categories 1-4 whose evidence ids
resolve to turns (1,536; ids such as `D8:6; D9:17` or `D30:05` are split and normalised).
A question's score is the share of its evidence turns found in the top k of
`MemoryStore(root).search(q, scope="messages", limit=k)`, averaged over questions, for
k = 5 and 10. Halves by conversation: the first five in file order to tune on, the last
five held out.

Dates are separate variants: `--dates text` adds `"date": "<session date>"` as LoCoMo
writes it ("1:56 pm on 8 May, 2023", searched as text); `--dates ts` adds `"ts":
"2023-05-08T13:56:00Z"` (not text: a day the question names, "on 8 May, 2023", ranks that
day's messages higher, see `memory/search/when.py`).

Categories (LoCoMo's numbering): 1 multi-hop, 2 temporal, 3 open-domain / inference,
4 single-hop.

`--baseline DIR` runs the same questions through the `memory` package of another checkout
(e.g. `git worktree add ../base <commit>`) in a worker process, so before/after come from
one run.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

if __package__ in (None, ""):  # `python bench/locomo.py`
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.recall_worker import Worker, check_checkout

DATA = Path(__file__).resolve().parent / ".data" / "locomo" / "locomo10.json"
HOW_TO_GET = (
    "LoCoMo is missing: put data/locomo10.json of https://github.com/snap-research/LoCoMo "
    "(CC BY-NC 4.0, never committed) at {path}, e.g. `git clone --depth 1 "
    "https://github.com/snap-research/LoCoMo /tmp/locomo && mkdir -p bench/.data/locomo && "
    "cp /tmp/locomo/data/locomo10.json bench/.data/locomo/`"
)
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "inference", 4: "single-hop"}
KS = (5, 10)
TASK = "locomo"
_EVIDENCE = re.compile(r"D:?(\d+):0*(\d+)")
_SESSION = re.compile(r"session_(\d+)$")


@dataclass
class Conversation:
    sample_id: str
    turns: list[dict]
    """`{"id": "D1:3", "speaker": ..., "text": ..., "date": ...}` in session order."""
    questions: list[dict] = field(default_factory=list)
    """`{"question", "category", "evidence": [line numbers, 1-based]}`."""


def load(path: Path = DATA) -> list[Conversation]:
    """LoCoMo's conversations, turns in session order, questions whose evidence resolves."""
    conversations = []
    for sample in json.loads(path.read_text()):
        conv = sample["conversation"]
        sessions = sorted((int(m.group(1)), key) for key in conv if (m := _SESSION.match(key)))
        turns = []
        for _, key in sessions:
            for turn in conv[key]:
                turns.append(
                    {
                        "id": turn["dia_id"],
                        "speaker": turn["speaker"],
                        "text": turn["text"],
                        "date": conv.get(f"{key}_date_time", ""),
                    }
                )
        line_of = {t["id"]: n for n, t in enumerate(turns, start=1)}
        item = Conversation(sample["sample_id"], turns)
        for qa in sample["qa"]:
            if qa.get("category") not in CATEGORIES:
                continue
            lines = []
            for ev in qa.get("evidence", []):
                for part in re.split(r"[;,\s]+", ev):
                    m = _EVIDENCE.fullmatch(part)
                    if m and (n := line_of.get(f"D{m.group(1)}:{m.group(2)}")):
                        lines.append(n)
            if lines:
                item.questions.append(
                    {
                        "question": qa["question"],
                        "category": qa["category"],
                        "evidence": sorted(set(lines)),
                    }
                )
        conversations.append(item)
    return conversations


def write_memory(conv: Conversation, root: Path, *, dates: str | None = None) -> Path:
    """The conversation as one `working/locomo/messages.jsonl` under `root`."""
    path = root / "working" / TASK / "messages.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        for t in conv.turns:
            line = {"role": "user", "name": t["speaker"], "content": t["text"]}
            if dates == "text":
                line["date"] = t["date"]
            elif dates == "ts":
                when = datetime.strptime(t["date"], "%I:%M %p on %d %B, %Y")
                line["ts"] = when.strftime("%Y-%m-%dT%H:%M:00Z")
            fh.write(json.dumps(line) + "\n")
    return path


# -- scoring -----------------------------------------------------------------------------------
def evaluate(
    conversations: list[Conversation], workers: dict[str, Worker], tmp: Path, dates: str | None
) -> dict[str, list]:
    """`{name: [(conversation index, category, {k: score}, seconds, lines)]}` for every
    question (`lines`: the turns of its top 10)."""
    out: dict[str, list] = {name: [] for name in workers}
    for ci, conv in enumerate(conversations):
        roots = {}
        for name in workers:  # one memory each: the checkouts may index differently
            roots[name] = tmp / name / conv.sample_id
            write_memory(conv, roots[name], dates=dates)
        for q in conv.questions:
            gold = set(q["evidence"])
            for name, w in workers.items():
                scores, took, lines = {}, 0.0, []
                for k in KS:
                    got = w.search(roots[name], q["question"], k, scope="messages")
                    scores[k] = len(gold & set(got["lines"][:k])) / len(gold)
                    if k == max(KS):
                        took, lines = got["s"], got["lines"]
                out[name].append((ci, q["category"], scores, took, lines))
    return out


def table(results: dict[str, list], n_conv: int) -> str:
    half = n_conv // 2
    names = list(results)
    head = (
        "| category | half | questions | " + " | ".join(f"{n} R@5 | {n} R@10" for n in names) + " |"
    )
    lines = [head, "|" + "---|" * (3 + 2 * len(names))]
    groups = [(c, CATEGORIES[c]) for c in CATEGORIES] + [(None, "all")]
    for cat, label in groups:
        for hname, keep in (("tuning", lambda i: i < half), ("held-out", lambda i: i >= half),
                            ("both", lambda i: True)):  # fmt: skip
            cells = []
            count = 0
            for name in names:
                rows = [r for r in results[name] if keep(r[0]) and (cat is None or r[1] == cat)]
                count = len(rows)
                for k in KS:
                    cells.append(f"{sum(r[2][k] for r in rows) / max(count, 1):.3f}")
            lines.append(f"| {label} | {hname} | {count} | " + " | ".join(cells) + " |")
    lines.append("")
    lines.append("| code | search p50 ms (limit 10) | p95 ms |")
    lines.append("|---|---|---|")
    for name in names:
        lat = sorted(r[3] for r in results[name])
        p50, p95 = lat[len(lat) // 2], lat[int(0.95 * (len(lat) - 1))]
        lines.append(f"| {name} | {p50 * 1000:.2f} | {p95 * 1000:.2f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=DATA, help="path to locomo10.json")
    parser.add_argument("--baseline", help="another checkout whose search to run beside this one")
    parser.add_argument(
        "--dates", choices=("text", "ts"), help="variant: each turn carries its session's date"
    )
    parser.add_argument("--dump-ranked", help="write each question's top-10 turns (JSON)")
    args = parser.parse_args(argv)
    if not args.data.exists():
        parser.exit(2, f"bench.locomo: {HOW_TO_GET.format(path=args.data)}\n")
    if args.baseline and (wrong := check_checkout(args.baseline)):
        parser.exit(2, f"bench.locomo: {wrong}\n")
    conversations = load(args.data)
    workers = {}
    if args.baseline:
        workers["baseline"] = Worker(args.baseline)
    workers["this"] = Worker(None)
    tmp = Path(tempfile.mkdtemp(prefix="locomo-"))
    try:
        results = evaluate(conversations, workers, tmp, args.dates)
    finally:
        for w in workers.values():
            w.close()
        shutil.rmtree(tmp, ignore_errors=True)
    if args.dump_ranked:
        ranked = {name: [r[4] for r in rows] for name, rows in results.items()}
        Path(args.dump_ranked).write_text(json.dumps(ranked))
    print(table(results, len(conversations)))


if __name__ == "__main__":
    main()
