"""Synthetic but realistic agent conversations for the recall benchmark, with labels.

A corpus is `N` messages spread over `working/T####/messages.jsonl` files of
`MESSAGES_PER_FILE` lines each: user requests, assistant reasoning and tool calls, tool
outputs (pytest runs, tracebacks, diffs, listings, grep hits, JSON configs) and decisions.
The noise deliberately reuses the vocabulary of the planted facts (components, libraries,
"decided", "cache", "timeout", "latency", ...), so no single word gives a fact away.

Into this noise `n_facts` facts are planted at random lines. Each fact comes with a
question worded differently from it (other word forms, synonyms, reordering, question
words) whose answer is that line: the label is the fact's citation
`working/T####/messages.jsonl#L<n>`. Everything is seeded, so a corpus is reproducible;
`ensure_corpus()` caches it under `bench/.data/` (git-ignored).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path

VERSION = 2
MESSAGES_PER_FILE = 5_000
DATA_DIR = Path(__file__).resolve().parent / ".data"

COMPONENTS = [
    "billing",
    "search",
    "scheduler",
    "gateway",
    "payments",
    "notifications",
    "ingest",
    "exporter",
    "session",
    "webhook",
    "reporting",
    "indexer",
    "uploader",
    "metrics",
    "inventory",
    "mailer",
    "router",
    "profile",
    "checkout",
    "analytics",
]
LIBS = [
    "redis",
    "postgres",
    "sqlite",
    "kafka",
    "celery",
    "fastapi",
    "flask",
    "django",
    "pydantic",
    "httpx",
    "requests",
    "boto3",
    "grpc",
    "nginx",
    "rabbitmq",
    "memcached",
    "sqlalchemy",
    "alembic",
    "uvicorn",
    "gunicorn",
]
VERBS = [
    "load",
    "parse",
    "refresh",
    "validate",
    "render",
    "fetch",
    "merge",
    "flush",
    "encode",
    "resolve",
    "schedule",
    "compute",
    "normalize",
    "serialize",
    "dispatch",
]
NOUNS = [
    "config",
    "user",
    "token",
    "invoice",
    "batch",
    "payload",
    "record",
    "order",
    "report",
    "event",
    "query",
    "schema",
    "profile",
    "chunk",
    "message",
]
PEOPLE = [
    "Alice",
    "Bob",
    "Carmen",
    "Deepak",
    "Elena",
    "Farid",
    "Grace",
    "Hiro",
    "Ines",
    "Jonas",
    "Kemal",
    "Lena",
    "Mateo",
    "Nadia",
    "Oskar",
    "Priya",
]
ENVS = ["staging", "production", "canary", "qa", "dev"]
ERRORS = [
    "KeyError",
    "TimeoutError",
    "ValueError",
    "ConnectionResetError",
    "AssertionError",
    "PermissionError",
    "IntegrityError",
    "JSONDecodeError",
]
WORDS = (
    "the request handler retries the call when the upstream times out and logs a "
    "warning with the payload size cache layer returns stale data after deploy config "
    "value is read from the environment at startup latency spikes under load when the "
    "pool is small decided to keep the current approach for now switch later if needed "
    "port number migration script index rebuild flaky test timeout"
).split()

# (fact, paraphrased questions). Slots: comp comp2 lib lib2 func module person env err
# num num2 ver flag hour.
FACTS = [
    (
        "After benchmarking, we decided to replace {lib} with {lib2} in the {comp} service; "
        "{lib} kept dropping connections under heavy load.",
        [
            "Why was {lib} swapped out of {comp}? Something about connection drops?",
            "What made us abandon {lib} in favour of {lib2} for {comp}?",
        ],
    ),
    (
        "Configured the {comp} cache to expire keys after {num} seconds so stale sessions "
        "get evicted.",
        [
            "How long do keys live in the {comp} cache before expiring?",
            "What expiration did we set on {comp} cached keys?",
        ],
    ),
    (
        "The flaky failure in test_{func} was caused by a race between the {comp} worker and "
        "the retry timer; fixed by adding a lock around {func}.",
        [
            "What was the root cause of the intermittent test_{func} failures?",
            "Why was test_{func} flaky, and how did we fix the race condition?",
        ],
    ),
    (
        "We agreed to pin {lib} to version {ver} because the newer release broke the {comp} "
        "serializer.",
        [
            "Which {lib} version are we pinned at, and why?",
            "Why is {lib} held back at an older release for {comp} serialization?",
        ],
    ),
    (
        "{person} asked that all {comp} endpoints return errors as JSON problem details "
        "instead of HTML pages.",
        [
            "What format should {comp} endpoint errors be returned in?",
            "Who requested problem-details JSON for {comp} error responses?",
        ],
    ),
    (
        "Deployment note: the {comp} job runs nightly at {hour}:00 UTC on the {env} cluster.",
        [
            "What time is the nightly {comp} job scheduled on {env}?",
            "When does the {comp} batch job run each night?",
        ],
    ),
    (
        "Root cause of the {comp} outage: the connection pool was capped at {num} "
        "connections and exhausted during the traffic spike.",
        [
            "Why did {comp} go down during the spike in traffic?",
            "What pool size limit caused the {comp} outage?",
        ],
    ),
    (
        "We switched the {comp} authentication flow to signed JWT tokens with refresh "
        "rotation every {num} minutes.",
        [
            "When did we decide to switch the {comp} login flow to JWT?",
            "How often are the {comp} refresh tokens rotated?",
        ],
    ),
    (
        "Benchmark result: {func} in {module} now processes {num} records per second after "
        "batching the inserts.",
        [
            "How fast is {func} after we batched the inserts?",
            "What throughput did {func} reach once inserts were batched?",
        ],
    ),
    (
        "Reminder: the {comp} migrations must run before the {comp2} service starts, "
        "otherwise the schema check fails.",
        [
            "In what order do the {comp} migrations and the {comp2} startup have to happen?",
            "Why does {comp2} fail its schema check on start?",
        ],
    ),
    (
        "The {env} database password rotation for {comp} is handled by the operator, not by "
        "hand; never commit credentials.",
        [
            "Who rotates the {comp} database password on {env}?",
            "How are {env} database credentials for {comp} rotated?",
        ],
    ),
    (
        "We measured p95 latency of {num} ms for the {comp} search endpoint after adding the "
        "trigram index.",
        [
            "What p95 latency does {comp} search have with the trigram indexing?",
            "How slow is the {comp} search endpoint since we added trigram indexes?",
        ],
    ),
    (
        "Logging decision: {comp} logs go to stdout as JSON lines and are shipped by the "
        "sidecar; no log files on disk.",
        ["Where do {comp} logs end up, do we write log files?", "How are the {comp} logs shipped?"],
    ),
    (
        "{person} prefers small pull requests: keep each {comp} change under {num} lines of diff.",
        [
            "How big may a {comp} pull request be according to {person}?",
            "What diff size limit does {person} want for {comp} changes?",
        ],
    ),
    (
        "The {func} helper silently swallowed {err}; it now re-raises with the offending key "
        "in the message.",
        [
            "Why were {err} exceptions hidden in {func}?",
            "What changed in the error handling of {func} for {err}?",
        ],
    ),
    (
        "Feature flag {flag} enables the new {comp} pipeline; it is off by default in {env}.",
        [
            "Which flag turns on the new {comp} pipeline?",
            "Is the new {comp} pipeline enabled by default on {env}?",
        ],
    ),
    (
        "Rate limit for the {comp} API is {num} requests per minute per token, enforced in "
        "the gateway.",
        [
            "How many requests per minute can one token make against the {comp} API?",
            "Where is rate limiting for the {comp} API enforced?",
        ],
    ),
    (
        "We rejected {lib} for the {comp} queue because it has no delayed message support.",
        [
            "Why didn't we go with {lib} for the {comp} queue?",
            "Which {comp} queue option was rejected for lacking delayed messages?",
        ],
    ),
    (
        "Retention policy: {comp} audit records are kept for {num} days, then archived to "
        "cold storage.",
        [
            "How many days are {comp} audit records kept?",
            "When are {comp} audit records moved to cold storage?",
        ],
    ),
    (
        "The {comp} healthcheck was timing out because it called {func}, which hits the "
        "database; it now uses a cached status.",
        [
            "Why did the {comp} healthcheck time out?",
            "What made the {comp} healthchecks slow, and what does it use now?",
        ],
    ),
]


@dataclass
class Corpus:
    """A generated corpus on disk: its memory dir and labelled queries."""

    root: Path
    """The memory directory (contains `working/T####/messages.jsonl`)."""
    messages: int
    files: list[Path]
    queries: list[dict]
    """Each: {"question", "fact", "citation"}."""


def ensure_corpus(messages: int, n_facts: int = 100, seed: int = 7) -> Corpus:
    """The cached corpus of `messages` messages (generated on first use)."""
    base = DATA_DIR / f"recall-v{VERSION}-{messages}-{n_facts}-{seed}"
    labels = base / "labels.json"
    if not labels.exists():
        _generate(base, messages, n_facts, seed)
    meta = json.loads(labels.read_text())
    files = sorted((base / "memory" / "working").glob("*/messages.jsonl"))
    return Corpus(base / "memory", meta["messages"], files, meta["queries"])


def _generate(base: Path, messages: int, n_facts: int, seed: int) -> None:
    rng = random.Random(seed)
    gen = _Noise(rng)
    n_files = max(1, -(-messages // MESSAGES_PER_FILE))
    positions = sorted(rng.sample(range(messages), min(n_facts, messages)))
    facts = _facts(rng, len(positions))
    planted = dict(zip(positions, facts, strict=True))
    queries = []
    tmp = base.with_name(base.name + ".partial")
    counter = 0
    for f in range(n_files):
        task = f"T{f:04d}"
        folder = tmp / "memory" / "working" / task
        folder.mkdir(parents=True, exist_ok=True)
        count = min(MESSAGES_PER_FILE, messages - counter)
        with open(folder / "messages.jsonl", "w", encoding="utf-8") as fh:
            for line in range(1, count + 1):
                if counter in planted:
                    fact, question = planted[counter]
                    record = {"role": rng.choice(["assistant", "user"]), "content": fact}
                    queries.append(
                        {
                            "question": question,
                            "fact": fact,
                            "citation": f"working/{task}/messages.jsonl#L{line}",
                        }
                    )
                else:
                    record = gen.message()
                fh.write(json.dumps(record, ensure_ascii=False) + "\n")
                counter += 1
    (tmp / "labels.json").write_text(
        json.dumps({"messages": messages, "queries": queries}, indent=1)
    )
    tmp.rename(base)


def fact_pair(rng: random.Random, used: set) -> tuple[str, str]:
    """One planted fact and a paraphrased question about it, unique per (template, comp)."""
    while True:
        index = rng.randrange(len(FACTS))
        comp = rng.choice(COMPONENTS)
        if (index, comp) not in used:
            used.add((index, comp))
            break
    slots = _slots(rng, comp)
    fact, questions = FACTS[index]
    return fact.format(**slots), rng.choice(questions).format(**slots)


def _facts(rng: random.Random, n: int) -> list[tuple[str, str]]:
    used: set = set()
    return [fact_pair(rng, used) for _ in range(n)]


def _slots(rng: random.Random, comp: str) -> dict[str, str]:
    lib, lib2 = rng.sample(LIBS, 2)
    func = f"{rng.choice(VERBS)}_{rng.choice(NOUNS)}"
    return {
        "comp": comp,
        "comp2": rng.choice([c for c in COMPONENTS if c != comp]),
        "lib": lib,
        "lib2": lib2,
        "func": func,
        "module": f"{comp}/{func.split('_')[1]}.py",
        "person": rng.choice(PEOPLE),
        "env": rng.choice(ENVS),
        "err": rng.choice(ERRORS),
        "num": str(rng.choice([5, 15, 30, 45, 60, 90, 120, 250, 400, 500, 750, 1200])),
        "ver": f"{rng.randint(1, 5)}.{rng.randint(0, 20)}.{rng.randint(0, 9)}",
        "flag": f"{comp}_{rng.choice(NOUNS)}_v{rng.randint(2, 9)}",
        "hour": f"{rng.randint(0, 23):02d}",
    }


class _Noise:
    """Random plausible agent-conversation messages (the haystack)."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.call = 0

    def message(self) -> dict:
        kind = self.rng.random()
        if kind < 0.2:
            return {"role": "user", "content": self._user()}
        if kind < 0.45:
            return {"role": "assistant", "content": self._assistant()}
        if kind < 0.65:
            self.call += 1
            return {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {"id": f"call_{self.call}", "name": "bash", "args": {"command": self._cmd()}}
                ],
            }
        return {
            "role": "tool",
            "name": "bash",
            "tool_call_id": f"call_{self.call}",
            "content": self._output(),
        }

    def _s(self) -> dict[str, str]:
        return _slots(self.rng, self.rng.choice(COMPONENTS))

    def _user(self) -> str:
        s, r = self._s(), self.rng
        return r.choice(
            [
                "Can you look at why test_{func} is failing in {module}?",
                "Please refactor {func} in {module} to use {lib} instead of {lib2}.",
                "Run the {comp} tests again and tell me what breaks.",
                "The {comp} service is slow on {env} again, latency is way up. Any idea?",
                "Let's not switch {comp} to {lib} yet; we decided to wait for the release.",
                "What does {func} do with an empty {err} payload?",
                "Check the cache settings for {comp}, keys seem to expire too early.",
                "Open a pull request for the {comp} change when the tests pass.",
            ]
        ).format(**s)

    def _assistant(self) -> str:
        s, r = self._s(), self.rng
        text = r.choice(
            [
                "I'll start by reading {module} to understand how {func} works.",
                "The failure comes from {func} returning None when the {comp} record is missing.",
                "I think the timeout is in the {lib} client; the default is {num} seconds.",
                "Decided to keep {lib} for {comp} for now; we can switch to {lib2} later.",
                "The {comp} cache hit rate looks fine, {num} percent over the last hour.",
                "Next I'll add a regression test for {err} in {func} and rerun the suite.",
                "The migration for {comp} adds an index on the {lib} table; it ran in {num} ms.",
                "Latency on {env} is back to normal after restarting the {comp} workers.",
                "{person} mentioned the {comp} port should stay on the default for {lib}.",
                "The rotation job for {comp} tokens ran at {hour}:00 and finished cleanly.",
                # Near misses: the vocabulary of the planted facts in unrelated statements.
                "The {comp} endpoint returns a 500 error when the request format is wrong.",
                "Bumped {lib} to version {ver}; the changelog mentions a serializer fix.",
                "The {comp} pipeline logs show a connection pool warning at startup.",
                "I checked the audit records for {comp}: nothing unusual in the last {num} days.",
                "The {comp} API returned 429 too many requests during the load test.",
                "The healthcheck for {comp} on {env} is green again after the restart.",
                "Root cause analysis for the {comp} flaky test is still open, {person} is on it.",
                "Queue depth for {comp} is {num} messages; workers keep up with the load.",
                "The database migration for {comp} changed the schema of the {lib} table.",
                "Feature flags are read from the {env} config at startup, not per request.",
                "Storage usage for {comp} grew by {num} MB this week, mostly logs.",
                "Pull request for the {comp} handler is ready; diff is about {num} lines.",
                "Latency of the {comp} search endpoint looks stable; p95 is fine on {env}.",
                "The nightly {comp} job failed on {env} with {err}; rerunning it by hand.",
                "Password reset emails for {comp} go through the {lib} queue.",
            ]
        ).format(**s)
        return text + " " + " ".join(r.choice(WORDS) for _ in range(r.randint(0, 25)))

    def _cmd(self) -> str:
        s = self._s()
        return self.rng.choice(
            [
                "pytest tests/{comp}/test_{func}.py -q",
                "rg -n '{func}' {comp}/",
                "git diff {module}",
                "cat {module}",
                "ls {comp}/",
                "python -m {comp}.cli --help",
                "docker compose logs {comp} --tail 50",
                "pip show {lib}",
            ]
        ).format(**s)

    def _output(self) -> str:
        r, s = self.rng, self._s()
        pick = r.random()
        if pick < 0.3:
            passed, failed = r.randint(10, 400), r.randint(0, 5)
            lines = [
                f"tests/{s['comp']}/test_{s['func']}.py::test_{r.choice(NOUNS)}_"
                f"{r.choice(VERBS)} {'FAILED' if i < failed else 'PASSED'}"
                for i in range(r.randint(2, 6))
            ]
            if failed:
                lines += [
                    f"E   {s['err']}: '{r.choice(NOUNS)}'",
                    f"{s['module']}:{r.randint(10, 400)}: in {s['func']}",
                ]
            return "\n".join(
                lines + [f"{failed} failed, {passed} passed in {r.uniform(0.5, 40):.2f}s"]
            )
        if pick < 0.5:
            return "\n".join(
                [
                    "Traceback (most recent call last):",
                    f'  File "{s["module"]}", line {r.randint(5, 300)}, in {s["func"]}',
                    f"    return self.{r.choice(NOUNS)}[{r.choice(NOUNS)}_id]",
                    f"{s['err']}: {r.choice(NOUNS)} not found in {s['lib']} response",
                ]
            )
        if pick < 0.7:
            return "\n".join(
                [
                    f"diff --git a/{s['module']} b/{s['module']}",
                    f"@@ -{r.randint(1, 200)},7 +{r.randint(1, 200)},9 @@",
                    f"-    timeout = {s['num']}",
                    f"+    timeout = settings.{s['comp']}_timeout",
                    f"+    # {r.choice(WORDS)} {r.choice(WORDS)} {r.choice(WORDS)}",
                ]
            )
        if pick < 0.85:
            return "\n".join(
                f"{s['comp']}/{r.choice(NOUNS)}_{r.choice(VERBS)}.py:"
                f"{r.randint(1, 500)}: {r.choice(VERBS)}_{r.choice(NOUNS)}("
                f"{r.choice(NOUNS)})"
                for _ in range(r.randint(2, 8))
            )
        return json.dumps(
            {
                "service": s["comp"],
                "backend": s["lib"],
                "env": s["env"],
                "port": r.randint(1024, 65000),
                "timeout_s": int(s["num"]),
                "cache": {"ttl": r.randint(5, 900), "max_keys": 10000},
            }
        )
