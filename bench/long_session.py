"""Long-session benchmark: context size per lead call and recall of early facts, late.

Simulates one task's conversation (default 10,000 user turns) through tether's working
memory, archive and `ContextBuilder`, and compares, at turns 10, 100, 1,000 and 10,000,
the tokens of one lead call's context for:

* tether: system prompt + overview + active summaries + recalled snippets + recent turns,
  built by `memory.window.context.ContextBuilder` with its default budgets (8,000 total);
* full history: system prompt + every message so far;
* rolling summary: system prompt + one summary re-made every 10 user turns from the previous
  summary and the new turns (extractive, capped at 2,000 tokens) + the last 4 turns.

Facts are planted early (turns 5-200). Half are stated in one line ("the <codename> service
listens on port <n>"); in the other half the user asks "which port should <codename> listen
on?" and the answer is the assistant's reply, which names no service ("Going with <n>").
Late in the session (after 90% of the turns) each is asked about in other words ("which port
did we pick for <codename>?", five phrasings). Reported:

* recall@10: the planted line naming the service is among the top 10 of
  `store.search(question)`;
* answer line in context: the line holding the port number, cited (`messages.jsonl#L<n>`),
  is in the context tether builds for that question, with the fill of unused budget (the
  default) and without it (`fill_limit=0`), vs the port being in the rolling summary;
* tokens used by those contexts against the 8,000-token budget (mean and max);
* build latency: ms of the build at each checkpoint (with recall for that turn's message),
  and the median over all calls (including archive work; recall only when asked).

Usage: `python -m bench.long_session [--turns 10000] [--facts 20] [--no-fsync]`.
`--no-fsync` skips fsync (numbers of tokens and recall are unchanged; only time differs).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
import time
from pathlib import Path

from memory.store import MemoryStore
from memory.task.archive import Archive
from memory.task.working import WorkingMemory
from memory.text.summarize import extractive_summary
from memory.window.context import ContextBudgets, ContextBuilder, count_tokens

SYSTEM = "You are the lead agent of a long software task. Use recall_memory when unsure."
CHECKPOINTS = (10, 100, 1_000, 10_000)
CODENAMES = (
    "zephyr",
    "kestrel",
    "obsidian",
    "marlin",
    "quasar",
    "juniper",
    "tundra",
    "halcyon",
    "saffron",
    "vortex",
    "lumen",
    "basalt",
    "cinder",
    "fjord",
    "gossamer",
    "ember",
    "nimbus",
    "orchid",
    "pylon",
    "raptor",
    "sable",
    "talon",
    "umber",
    "wren",
)
QUESTIONS = (
    "Which port did we pick for {name} again?",
    "What port number does {name} listen on?",
    "Remind me: {name} runs on which port?",
    "{name} port?",
    "Where does the {name} service listen?",
)
TOPICS = (
    "parser",
    "scheduler",
    "cache layer",
    "auth middleware",
    "billing export",
    "retry policy",
    "CLI flags",
    "log rotation",
    "test fixtures",
    "search ranking",
    "port mapping",
    "service mesh",
    "gateway config",
    "deploy script",
)


def user_text(turn: int, rng: random.Random) -> str:
    topic = rng.choice(TOPICS)
    return (
        f"Turn {turn}: please review the {topic}, check the service and port settings, "
        f"and report issue #{rng.randrange(1000)}."
    )


def assistant_text(turn: int, rng: random.Random) -> str:
    topic = rng.choice(TOPICS)
    other = rng.choice(CODENAMES)
    body = " ".join(
        rng.choice(
            (
                "Checked the code paths.",
                "Ran the unit tests.",
                "Looked at the logs.",
                f"The {other} dashboard loads.",
                "No regression found.",
                "Updated the docs.",
            )
        )
        for _ in range(1 + turn % 6)
    )
    return f"Reviewed the {topic} for turn {turn}. {body}"


class RollingSummary:
    """Baseline (b): one summary, re-made from itself plus the new turns every N turns."""

    def __init__(self, every: int = 10, budget: int = 2000):
        self.every, self.budget, self.text, self.pending = every, budget, "", []

    def add_turn(self, user: str, assistant: str) -> None:
        self.pending.append(f"user: {user}\nassistant: {assistant}")
        if len(self.pending) >= self.every:
            self.text = extractive_summary(self.text + "\n" + "\n".join(self.pending), self.budget)
            self.pending = []

    def tokens(self, recent: list[dict]) -> int:
        return count_tokens([{"role": "system", "content": SYSTEM + "\n\n" + self.text}, *recent])


def run(turns: int, n_facts: int, fsync: bool) -> dict:
    if not fsync:
        os.fsync = lambda fd: None  # type: ignore[assignment]
    rng = random.Random(7)
    root = Path(tempfile.mkdtemp(prefix="tether-long-")) / "memory"
    store = MemoryStore(root)
    wm = WorkingMemory(store, "bench").ensure(objective="Maintain the platform services")
    builder = ContextBuilder(store, "bench", ContextBudgets(), archive=Archive(wm))
    rolling = RollingSummary()
    plant_turns = sorted(rng.sample(range(5, 201), n_facts))
    facts = {
        t: (CODENAMES[i], str(20000 + rng.randrange(40000))) for i, t in enumerate(plant_turns)
    }
    ask_from = int(turns * 0.9)
    asks = {ask_from + 7 * i: t for i, t in enumerate(plant_turns)}
    full_tokens = count_tokens([{"role": "system", "content": SYSTEM}])
    rows, latencies, recall_ms, planted_line = [], [], [], {}
    nofill = ContextBuilder(
        store, "bench", ContextBudgets(fill_limit=0), archive=Archive(wm), memory_index=False
    )
    split = set(plant_turns[1::2])  # asked by the user, answered in the next message
    hits10 = in_ctx = in_ctx_nofill = in_rolling = asks_seen = 0
    ask_tokens: list[int] = []
    ask_tokens_nofill: list[int] = []
    for turn in range(1, turns + 1):
        if turn in split:
            name, port = facts[turn]
            user = f"Which port should the {name} service listen on?"
        elif turn in facts:
            name, port = facts[turn]
            user = f"Decision: the {name} service listens on port {port} behind the gateway."
        elif turn in asks:
            name, port = facts[asks[turn]]
            user = QUESTIONS[asks_seen % len(QUESTIONS)].format(name=name)
            asks_seen += 1
        else:
            user = user_text(turn, rng)
        assistant = assistant_text(turn, rng)
        if turn in split:
            assistant = f"Going with {facts[turn][1]}, behind the gateway."
        line = wm.append_messages(
            [{"role": "user", "content": user}, {"role": "assistant", "content": assistant}]
        )
        if turn in facts:
            planted_line[turn] = line
        rolling.add_turn(user, assistant)
        full_tokens += count_tokens(
            [{"role": "user", "content": user}, {"role": "assistant", "content": assistant}]
        )
        query = user if (turn in asks or turn in CHECKPOINTS) else ""
        start = time.perf_counter()
        built = builder.build(SYSTEM, query=query)
        latencies.append((time.perf_counter() - start) * 1000)
        if query:
            recall_ms.append(latencies[-1])
        if turn in asks:
            name, port = facts[asks[turn]]
            cite = f"messages.jsonl#L{planted_line[asks[turn]]}"
            # the question's own line is the query itself (and in context): not a hit or a slot
            results = [
                r
                for r in store.search(user, limit=11)
                if not r.citation.endswith(f"messages.jsonl#L{line}")
            ][:10]
            hits10 += any(r.citation.endswith(cite) for r in results)
            answer = planted_line[asks[turn]] + (1 if asks[turn] in split else 0)
            without = nofill.build(SYSTEM, query=query)
            in_ctx += _holds(built.messages, answer, port)
            in_ctx_nofill += _holds(without.messages, answer, port)
            ask_tokens.append(built.tokens)
            ask_tokens_nofill.append(without.tokens)
            in_rolling += port in rolling.text
        if turn in CHECKPOINTS:
            recent = built.messages[1:]
            rows.append((turn, built.tokens, full_tokens, rolling.tokens(recent), latencies[-1]))
    status = Archive(WorkingMemory(store, "bench")).status()
    return {
        "rows": rows,
        "facts": n_facts,
        "asked": len(asks),
        "hits10": hits10,
        "in_ctx": in_ctx,
        "in_ctx_nofill": in_ctx_nofill,
        "ask_tokens": ask_tokens,
        "ask_tokens_nofill": ask_tokens_nofill,
        "in_rolling": in_rolling,
        "status": status,
        "root": root,
        "recall_ms": statistics.median(recall_ms) if recall_ms else 0.0,
        "all_ms": statistics.median(latencies),
        "max_ms": max(latencies),
    }


def _holds(messages: list[dict], line: int, port: str) -> bool:
    """The answer line, cited and with its port number, is in the built context."""
    return any(
        f"messages.jsonl#L{line}]" in text and port in text
        for text in (str(m.get("content", "")) for m in messages)
    ) or any(port in str(m.get("content", "")) for m in messages[1:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=10_000)
    parser.add_argument("--facts", type=int, default=20)
    parser.add_argument("--no-fsync", action="store_true")
    args = parser.parse_args()
    started = time.perf_counter()
    result = run(args.turns, min(args.facts, len(CODENAMES)), fsync=not args.no_fsync)
    print(f"long session: {args.turns} user turns, default budgets (total 8000 tokens)")
    print(f"{'turn':>7} {'tether':>8} {'full history':>13} {'rolling summary':>16} {'build ms':>9}")
    for turn, ours, full, rolling, ms in result["rows"]:
        print(f"{turn:>7} {ours:>8} {full:>13} {rolling:>16} {ms:>9.1f}")
    asked = result["asked"] or 1
    print(
        f"facts planted at turns 5-200, asked after turn {int(args.turns * 0.9)}: {result['asked']}"
    )
    print(f"  tether recall@10 (planted line in top 10): {result['hits10'] / asked:.2f}")
    print(f"  tether answer line in built context:       {result['in_ctx'] / asked:.2f}")
    print(f"    without the fill (fill_limit=0):         {result['in_ctx_nofill'] / asked:.2f}")
    print(f"  rolling summary still holds the answer:    {result['in_rolling'] / asked:.2f}")
    budget = ContextBudgets().total
    for label, key in (("with the fill", "ask_tokens"), ("without the fill", "ask_tokens_nofill")):
        used = result[key] or [0]
        print(
            f"  tokens of those contexts, {label}: mean {statistics.mean(used):,.0f}, "
            f"max {max(used):,} of {budget:,} ({max(used) / budget:.2f} of the budget)"
        )
    print(
        f"build latency: median {result['all_ms']:.1f} ms per call, "
        f"{result['recall_ms']:.1f} ms with recall, max {result['max_ms']:.0f} ms"
    )
    s = result["status"]
    levels = " ".join(f"L{k}={v}" for k, v in s.active_per_level.items())
    print(
        f"archive: {s.total_messages} messages, {s.archived_messages} archived, active "
        f"summaries {levels}, highest level {s.highest_level}"
    )
    fsync = "off" if args.no_fsync else "on"
    print(f"wall time {time.perf_counter() - started:.1f}s (fsync {fsync})")


if __name__ == "__main__":
    main()
