"""Ranked recall through the Python API (`MemoryStore.search`, `memory.search.recall`).

A small memory directory with every view (plans, findings, checkpoints, snapshots,
overview, detail notes, messages, facts, episodes, entries) is searched with natural
language questions; results must be ranked sensibly and cite the exact file and line.
"""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from click.testing import CliRunner

from memory import MemoryStore, durable
from memory.cli.app import cli
from memory.errors import InvalidQueryError
from memory.search.recall import SCOPES, SearchResult, format_results, search

AUTH_NOTE = """# Authentication Design

<!--
META:
created: 2024-01-15T10:30:00Z
keywords: ["authentication"]
-->

## Decision

We decided to switch the login flow to JWT tokens with refresh rotation.
Sessions stored on the server are gone.

## Rationale

- Stateless: no server-side session storage needed
"""


def _messages(n: int = 40) -> list[dict]:
    noise = [
        {"role": "user", "content": "please run the test suite again"},
        {"role": "assistant", "content": "running pytest on the api package now"},
        {"role": "tool", "name": "bash", "content": "12 passed, 1 failed in 3.2s"},
        {"role": "assistant", "content": "the flow of the request handler looks fine"},
    ]
    return [noise[i % len(noise)] for i in range(n)]


@pytest.fixture
def store(memory_dir):
    store = MemoryStore(memory_dir)
    layout = store.layout
    durable.atomic_write_text(layout.detail_dir("T1") / "auth-design.md", AUTH_NOTE)
    durable.atomic_write_text(
        layout.overview("T1"),
        "# Working Memory\n\n## Current Task\nPort the zephyr exporter to the new storage API\n",
    )
    durable.append_jsonl(layout.messages("T1"), _messages(), many=True)
    durable.append_jsonl(
        layout.messages("T1"),
        {"role": "user", "content": "ok, switching the auth flow over to JWT is approved"},
    )
    durable.append_jsonl(layout.messages("T1"), _messages(10), many=True)
    durable.atomic_write_text(
        layout.plan("T1"),
        "# Research plan\n\n## Objective\nMake the zephyr exporter stream results\n",
    )
    durable.atomic_write_text(
        layout.findings / "explorer_20260101T000000000000Z.md",
        "# Findings\n\nThe zephyr exporter buffers every row in memory.\n",
    )
    durable.atomic_write_json(
        layout.checkpoints / "cp_exploration_20260101T000000Z.json",
        {
            "checkpoint_id": "cp1",
            "phase": "exploration",
            "context_summary": "zephyr exporter survey finished",
        },
    )
    durable.atomic_write_text(
        layout.context_snapshots / "snap_20260101T000000Z.md",
        "# Snapshot\n\nResume the zephyr exporter rewrite.\n",
    )
    durable.atomic_write_text(
        layout.facts / "exporters.md", "# Exporters\n\n> Summary: zephyr exporter needs streaming\n"
    )
    durable.atomic_write_text(
        layout.episodes / "2026-01.md", "# 2026-01\n\n- Finished the zephyr exporter survey\n"
    )
    yield store
    store.close()


class TestNaturalLanguageRecall:
    def test_question_finds_decision_in_detail_and_messages(self, store):
        hits = store.search("When did we decide to switch the auth flow to JWT?", limit=5)
        citations = [h.citation for h in hits]
        assert "working/T1/detail/auth-design.md#L11" in citations[:2]
        assert "working/T1/messages.jsonl#L41" in citations[:2]
        detail = next(h for h in hits if h.source == "detail")
        assert (detail.path, detail.line) == ("working/T1/detail/auth-design.md", 11)
        assert "switch the login flow to JWT" in detail.text
        message = next(h for h in hits if h.source == "messages")
        assert (message.path, message.line) == ("working/T1/messages.jsonl", 41)
        assert "\n" not in message.text and "{" not in message.text

    def test_common_words_do_not_outrank_the_rare_ones(self, store):
        hits = store.search("which flow did we pick for JWT tokens", limit=3)
        assert hits[0].citation in {
            "working/T1/detail/auth-design.md#L11",
            "working/T1/messages.jsonl#L41",
        }
        assert all("JWT" in h.text for h in hits[:2])
        assert hits[0].score >= hits[1].score >= hits[2].score

    def test_word_forms_are_folded(self, store):
        hits = store.search("switched authentication flows", scope="messages")
        assert hits and hits[0].citation == "working/T1/messages.jsonl#L41"

    def test_not_every_word_has_to_match(self, store):
        hits = store.search("zephyr exporter unicorn rainbow")
        assert len(hits) == 5
        assert all("zephyr" in h.text for h in hits)

    def test_limit_is_respected(self, store):
        assert len(store.search("zephyr", limit=2)) == 2
        assert len(store.search("zephyr", limit=50)) == 7

    def test_query_syntax_is_just_text(self, store):
        hits = store.search('"auth-flow" (JWT) OR * NEAR(x) AND -', scope="messages", limit=1)
        assert hits[0].citation == "working/T1/messages.jsonl#L41"
        assert store.search("*** ???") == []

    def test_unicode_and_diacritics_fold(self, store):
        durable.atomic_write_text(store.layout.facts / "cafe.md", "# Café\n\nLe café est prêt.\n")
        assert [h.citation for h in store.search("cafe pret")] == ["facts/cafe.md#L3"]
        assert [h.citation for h in store.search("CAFÉ PRÊT")] == ["facts/cafe.md#L3"]

    def test_nothing_found_is_an_empty_list(self, store):
        assert store.search("xylophone quasar") == []

    def test_result_fields_and_json(self, store):
        hit = store.search("JWT", scope="messages", limit=1)[0]
        assert isinstance(hit, SearchResult)
        data = hit.to_dict()
        assert set(data) == {"source", "path", "line", "citation", "text", "score"}
        assert json.loads(json.dumps(data))["line"] == 41


class TestScopes:
    EXPECTED = {
        "plans": "research_plans/T1.md#L4",
        "findings": "findings/explorer_20260101T000000000000Z.md#L3",
        "checkpoints": "checkpoints/cp_exploration_20260101T000000Z.json#L4",
        "snapshots": "context_snapshots/snap_20260101T000000Z.md#L3",
        "overview": "working/T1/overview.md#L4",
        "facts": "facts/exporters.md#L3",
        "episodes": "episodes/2026-01.md#L3",
    }

    @pytest.mark.parametrize("scope", sorted(EXPECTED))
    def test_each_scope_returns_only_its_view(self, store, scope):
        hits = store.search("zephyr exporter", scope=scope, limit=10)
        assert [h.citation for h in hits] == [self.EXPECTED[scope]]
        assert hits[0].source == scope

    def test_all_scopes_are_known(self):
        assert SCOPES == (
            "all",
            "plans",
            "findings",
            "checkpoints",
            "snapshots",
            "overview",
            "detail",
            "messages",
            "entries",
            "facts",
            "episodes",
        )

    def test_list_and_comma_scopes(self, store):
        by_list = store.search("zephyr exporter", scope=["facts", "episodes"], limit=10)
        by_comma = store.search("zephyr exporter", scope="facts,episodes", limit=10)
        assert {h.source for h in by_list} == {"facts", "episodes"}
        assert [h.citation for h in by_list] == [h.citation for h in by_comma]

    def test_all_covers_every_file_view(self, store):
        hits = store.search("zephyr exporter", scope="all", limit=20)
        assert {h.source for h in hits} == set(self.EXPECTED)


class TestEntries:
    def test_inline_entry_is_found_with_its_id(self, store):
        entry = store.log(
            "pytest: 2 failed, 156 passed; FAILED test_refresh_rotation", tags=["pytest"]
        )
        hits = store.search("why did the refresh rotation test fail?", scope="entries")
        assert [h.citation for h in hits] == [entry.id]
        assert hits[0].source == "entries" and hits[0].line is None

    def test_chunk_citation_points_at_the_chunk_holding_the_text(self, store):
        filler = "\n".join(f"step {i}: copied shard {i} to the archive" for i in range(2500))
        entry = store.log(filler + "\nthe quokka backfill finished with exit code 0\n")
        assert entry.tier == "chunked" and entry.chunks >= 2
        hits = store.search("quokka backfill exit code", limit=1)
        last = entry.chunks - 1
        assert hits[0].citation == f"{entry.id}#chunk-{last}"
        assert "quokka backfill" in hits[0].text
        assert store.fetch(entry.id, chunk=last).count("quokka") == 1

    def test_pruned_entry_disappears(self, store):
        old = store.log("the walrus cache warmed up in 3 seconds")
        store.search("walrus cache")  # indexed now
        store.log("unrelated second entry")
        removed = store.prune(keep_entries=1)
        assert [e.id for e in removed] == [old.id]
        assert store.search("walrus cache") == []


class TestInvalidQueries:
    @pytest.mark.parametrize(
        ("kwargs", "message"),
        [
            ({"query": ""}, "empty query '': give words to search for, e.g. 'auth flow decision'"),
            (
                {"query": "   "},
                "empty query '   ': give words to search for, e.g. 'auth flow decision'",
            ),
            (
                {"query": "jwt", "scope": "notes"},
                "unknown scope 'notes': use one of all, plans, "
                "findings, checkpoints, snapshots, overview, detail, messages, entries, facts, "
                "episodes",
            ),
            ({"query": "jwt", "limit": 0}, "invalid limit 0: give a number of results >= 1"),
            ({"query": "jwt", "limit": -3}, "invalid limit -3: give a number of results >= 1"),
        ],
    )
    def test_bad_input_raises_one_line_error(self, store, kwargs, message):
        with pytest.raises(InvalidQueryError) as info:
            search(store, **kwargs)
        assert str(info.value) == message


def test_format_results_matches_seed_000(store):
    query = "switch the auth flow to JWT"
    hits = store.search(query, scope="detail", limit=1)
    assert format_results(query, hits) == "\n".join(
        [
            'Found 1 result(s) for: "switch the auth flow to JWT"',
            "",
            "[1] Source: detail",
            "    File: working/T1/detail/auth-design.md:11",
            f"    Content: {hits[0].text}",
            "    Citation: working/T1/detail/auth-design.md#L11",
        ]
    )
    assert format_results("nothing", []) == 'Found 0 result(s) for: "nothing"'


class TestCommonWords:
    """Words held by thousands of rows must neither drown nor hide the right one."""

    def test_rows_where_common_words_meet_are_found(self, memory_dir):
        store = MemoryStore(memory_dir)
        noise = [
            {"role": "tool", "content": f"{word} shard {i} ok"}
            for i in range(3000)
            for word in ("alpha", "beta", "gamma")
        ]
        durable.append_jsonl(store.layout.messages("T1"), noise, many=True)
        line = durable.append_jsonl(
            store.layout.messages("T1"),
            {"role": "assistant", "content": "alpha beta gamma are all degraded right now"},
        )
        durable.append_jsonl(store.layout.messages("T1"), noise[:300], many=True)
        hits = store.search("are alpha, beta and gamma degraded?", limit=3)
        assert hits[0].citation == f"working/T1/messages.jsonl#L{line}"
        hits = store.search("alpha beta gamma", limit=3)
        assert hits[0].citation == f"working/T1/messages.jsonl#L{line}"
        store.close()

    def test_rare_word_wins_over_common_ones(self, memory_dir):
        store = MemoryStore(memory_dir)
        noise = [{"role": "tool", "content": f"test {i} failed with an error"} for i in range(6000)]
        durable.append_jsonl(store.layout.messages("T1"), noise, many=True)
        line = durable.append_jsonl(
            store.layout.messages("T1"),
            {"role": "tool", "content": "test_quokka failed with an error: quokka not found"},
        )
        hits = store.search("why did the quokka test fail with an error?", limit=1)
        assert hits[0].citation == f"working/T1/messages.jsonl#L{line}"
        store.close()


class TestRanking:
    """What a question relies on: its own word forms, its topic words, its rows."""

    @staticmethod
    def _log(store, rows):
        lines = {}
        for key, record in rows:
            lines[key] = durable.append_jsonl(store.layout.messages("T1"), record)
        return lines

    def test_the_question_s_own_word_form_outranks_a_stemmed_only_match(self, memory_dir):
        store = MemoryStore(memory_dir)
        noise = [{"role": "tool", "content": f"error {i} in the worker"} for i in range(300)]
        durable.append_jsonl(store.layout.messages("T1"), noise, many=True)
        lines = self._log(
            store,
            [
                ("stem", {"role": "assistant", "content": "the exporter error is logged"}),
                ("exact", {"role": "assistant", "content": "the exporter errors are logged"}),
            ],
        )
        hits = store.search("where do exporter errors go?", limit=2)
        assert [h.citation for h in hits] == [
            f"working/T1/messages.jsonl#L{lines['exact']}",
            f"working/T1/messages.jsonl#L{lines['stem']}",
        ]
        store.close()

    def test_the_role_label_is_not_the_message_s_text(self, memory_dir):
        store = MemoryStore(memory_dir)
        lines = self._log(
            store,
            [
                ("label", {"role": "user", "content": "billing exports"}),
                (
                    "text",
                    {
                        "role": "assistant",
                        "content": "the user owns billing exports and the monthly finance report",
                    },
                ),
            ],
        )
        hits = store.search("which user owns the billing exports", limit=2)
        assert hits[0].citation == f"working/T1/messages.jsonl#L{lines['text']}"
        store.close()

    def test_words_that_frame_a_question_count_less_than_its_topic(self, memory_dir):
        store = MemoryStore(memory_dir)
        noise = [
            {"role": "tool", "content": f"request {i} was {'slow' if i % 10 == 0 else 'ok'}"}
            for i in range(200)
        ]
        durable.append_jsonl(store.layout.messages("T1"), noise, many=True)
        lines = self._log(
            store,
            [
                ("frame", {"role": "assistant", "content": "made the exporter config tidy"}),
                ("topic", {"role": "assistant", "content": "the exporter was slow: a lock"}),
            ],
        )
        hits = store.search("what made the exporter slow?", limit=2)
        assert hits[0].citation == f"working/T1/messages.jsonl#L{lines['topic']}"
        # not a question: every word is a topic word
        hits = store.search("made exporter", limit=1)
        assert hits[0].citation == f"working/T1/messages.jsonl#L{lines['frame']}"
        store.close()

    def test_a_word_in_one_row_does_not_hide_rows_where_common_words_meet(self, memory_dir):
        store = MemoryStore(memory_dir)
        words = ("alpha", "beta", "gamma", "delta", "epsilon")
        noise = [
            {"role": "tool", "content": f"{word} shard {i} ok"}
            for i in range(1500)
            for word in words
        ]
        durable.append_jsonl(store.layout.messages("T1"), noise, many=True)
        lines = self._log(
            store,
            [
                ("rare", {"role": "tool", "content": "zeta handled once"}),
                ("meet", {"role": "assistant", "content": "gamma delta epsilon all degraded"}),
            ],
        )
        durable.append_jsonl(store.layout.messages("T1"), noise[:500], many=True)
        hits = store.search("zeta alpha beta gamma delta epsilon", limit=3)
        assert f"working/T1/messages.jsonl#L{lines['meet']}" in [h.citation for h in hits]
        store.close()


def _log_days(store, records):
    durable.append_jsonl(store.layout.messages("T1"), records, many=True)


def test_a_day_named_in_the_question_prefers_that_days_messages(store):
    _log_days(
        store,
        [
            {"ts": "2026-03-03T10:00:00Z", "role": "assistant",
             "content": "We decided to keep the cache in Redis for now."},
            {"ts": "2026-03-05T10:00:00Z", "role": "assistant",
             "content": "We decided the cache moves to memcached; the cache decision is final."},
        ],
    )  # fmt: skip
    assert "memcached" in store.search("What did we decide about the cache?")[0].text
    for asked in ("on March 3", "on 3 March 2026", "on 2026-03-03"):
        dated = store.search(f"What did we decide about the cache {asked}?")
        assert "Redis" in dated[0].text, asked


def test_yesterday_means_the_utc_day_before_today(store):
    from memory.clock import today_utc

    yesterday = (today_utc() - timedelta(days=1)).isoformat()
    _log_days(
        store,
        [
            {"ts": f"{yesterday}T09:00:00Z", "role": "user", "content": "The warmup failed."},
            {"ts": "2025-01-02T09:00:00Z", "role": "user",
             "content": "Warmup failed: the cache warmup failed during deploy, warmup failed."},
        ],
    )  # fmt: skip
    assert "during deploy" in store.search("why did the warmup fail")[0].text
    assert store.search("why did the warmup fail yesterday")[0].text == "user: The warmup failed."


def test_near_copies_in_one_view_are_one_result_and_the_search_goes_on(memory_dir):
    # every checkpoint of a task quotes its objective; a search for its words must not
    # fill the results with copies of that line, and what else matches still comes
    (memory_dir / "checkpoints").mkdir(parents=True, exist_ok=True)
    objective = "How does the finder skip hidden files and gitignore rules?"
    for i in range(12):
        body = {"objective": objective, "workdir": "/w", "phase_index": i % 4, "step": i}
        durable.atomic_write_text(
            memory_dir / "checkpoints" / f"cp_exploration_2026{i:02d}.json",
            json.dumps(body, indent=0),
        )
    (memory_dir / "findings").mkdir(parents=True, exist_ok=True)
    durable.atomic_write_text(
        memory_dir / "findings" / "researcher_1.md",
        "# Findings\n\nsrc/walk.rs: build_walker sets hidden(opts.ignore_hidden) and the "
        "gitignore rules of the walk.\n",
    )
    with MemoryStore(memory_dir) as store:
        results = store.search("hidden files gitignore rules", limit=3)
    quoted = [r for r in results if r.source == "checkpoints"]
    assert len(quoted) == 1 and objective in quoted[0].text
    assert any("build_walker" in r.text for r in results)
    # a context builder asks once: fewer results, no copies, and no cost
    # growing with a memory of many alike tasks (the finding first: checkpoints weigh less)
    with MemoryStore(memory_dir) as store:
        once = store.search("hidden files gitignore rules", limit=3, widen=False)
    assert [r.source for r in once] == ["findings", "checkpoints"]
    # messages are turns: two saying the same are both kept
    with MemoryStore(memory_dir) as store:
        said = {"role": "user", "content": "the gitignore rules hide dotfiles"}
        _log_days(store, [said, said])
        found = store.search("gitignore rules hide dotfiles", scope="messages", limit=5)
    assert sorted(r.line for r in found) == [1, 2]


def test_a_passage_other_views_repeat_comes_once_before_what_else_matches(memory_dir):
    """The objective is quoted by the plan, a snapshot, checkpoints and the lead's messages;
    asked in its words, search shows it once, then the findings, then the other quotes."""
    objective = "How does the client decide to follow a redirect, and where can a user disable it?"
    files = {
        "research_plans/t1.md": f"# Plan\n\n## Objective\n{objective}\n",
        "context_snapshots/snap_1.md": f"# Snapshot\n\nObjective: {objective}\nPhase: review\n",
        "checkpoints/cp_review_1.json": json.dumps({"objective": objective, "phase": "review"}),
        "findings/researcher_1.md": (
            "# Findings\n\nBy default the client does not follow a redirect; "
            "`follow_redirects=True` turns it on per request.\n"
        ),
        "findings/researcher_2.md": "# Findings\n\nA user can disable retries with `retries=0`.\n",
    }
    for name, text in files.items():
        (memory_dir / name).parent.mkdir(parents=True, exist_ok=True)
        durable.atomic_write_text(memory_dir / name, text)
    with MemoryStore(memory_dir) as store:
        _log_days(store, [{"role": "user", "content": f"Objective: {objective} Phase: review"}])
        results = store.search("where can a user disable a redirect", limit=5)
    quoting = [i for i, r in enumerate(results) if "where can a user disable it" in r.text]
    answers = [i for i, r in enumerate(results) if r.source == "findings"]
    assert len(results) == 5 and len(answers) == 2
    assert quoting[0] < answers[0]  # the best match first, as ranked
    assert max(answers) < quoting[1]  # its repeats after everything else


def test_copies_of_a_passage_already_shown_are_one_copy(memory_dir):
    """A long run's checkpoints all quote the objective its plan states: they echo the plan,
    and they are near-repeats of each other too, so they come as one copy, after what else
    matches (the finding that answers the question), not as five."""
    objective = "How does express match a request path, and where are route parameters parsed?"
    durable.atomic_write_text(
        memory_dir / "research_plans/t1.md", f"# Plan\n\n## Objective\n{objective}\n"
    )
    for i in range(30):
        checkpoint = {"objective": objective, "workdir": "/src/express", "phase_index": i % 4}
        durable.atomic_write_text(
            memory_dir / f"checkpoints/cp_review_{i}.json", json.dumps(checkpoint, indent=1)
        )
    durable.atomic_write_text(
        memory_dir / "findings/researcher_1.md",
        "# Findings\n\nRoute parameters such as `:id` are parsed by `app.param` in "
        "lib/application.js:322.\n",
    )
    with MemoryStore(memory_dir) as store:
        results = store.search("where are route parameters parsed", limit=5)
    assert [r.source for r in results] == ["plans", "findings", "checkpoints"]


def test_copies_of_the_objective_filling_the_first_hits_make_search_look_further(memory_dir):
    """The lead's prompts of a long run all quote the objective, as its checkpoint does:
    more copies than a search first asks for do not hide the finding that answers it from
    a person or an agent (`past_echoes`)."""
    objective = "How does express match a request path, and where are route parameters parsed?"
    durable.atomic_write_text(
        memory_dir / "checkpoints/cp_review_1.json", json.dumps({"objective": objective})
    )
    durable.atomic_write_text(
        memory_dir / "findings/researcher_1.md",
        "# Findings\n\nThe parameters of a route (`:id`) are read when `app.param` callbacks run; "
        "the router matched the path before.\n",
    )  # fewer of the question's words than the prompts: a finding outweighs a prompt's copy

    prompts = [
        {"role": "user", "content": f"Objective: {objective} Phase {i}: plan area {i * 7}."}
        for i in range(30)
    ]
    question = "where are route parameters parsed"
    with MemoryStore(memory_dir) as store:
        _log_days(store, prompts)
        asked = store.search(question, limit=3)  # a program's search: no further queries
        results = store.search(question, limit=3, past_echoes=True)
    assert not any(r.source == "findings" for r in asked)
    assert len(results) == 3
    assert [r.path for r in results if r.source == "findings"] == ["findings/researcher_1.md"]
    # `memory search`, the command a person reads, looks past them
    shown = CliRunner().invoke(
        cli, ["--memory-dir", str(memory_dir), "search", question, "--limit", "3", "--json"]
    )
    assert shown.exit_code == 0, shown.output
    found = json.loads(shown.output)
    assert "findings/researcher_1.md" in [r["path"] for r in found]
