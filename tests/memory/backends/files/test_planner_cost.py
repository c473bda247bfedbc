"""What the query planner (`files.Query`) spends on a search: the AND queries it runs and
the SQL it leaves to SQLite. Ranking itself is pinned in `test_search.py`."""

from __future__ import annotations

import sqlite3

import pytest

from memory import MemoryStore, durable
from memory.backends.files import (
    TEMP_SETUP,
    Query,
    ascii_words,
    fill_tok,
    fts_totals,
    tokenize_query,
)


@pytest.fixture
def store(memory_dir):
    store = MemoryStore(memory_dir)
    yield store
    store.close()


def test_shortest_rows_order_matches_token_counts(tmp_path):
    """Tied AND rows are sorted by their FTS5 docsize blob in SQL (`length(sz), sz`): that
    must be the numeric order of token counts, across varint widths."""
    conn = sqlite3.connect(tmp_path / "t.db")
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(body)")
    counts = [3, 200, 127, 16384, 128, 1, 16383, 20000, 129, 0, 2_100_000]
    for i, n in enumerate(counts, start=1):
        conn.execute("INSERT INTO t(rowid, body) VALUES (?, ?)", (i, " ".join(["w"] * n)))
    got = [row[0] for row in conn.execute("SELECT id FROM t_docsize ORDER BY length(sz), sz, id")]
    assert [counts[i - 1] for i in got] == sorted(counts)
    conn.close()


def test_lighter_and_combinations_are_not_queried_once_enough_rows_are_found(store, monkeypatch):
    """AND combinations run heaviest first; once `k` rows are found, a lighter one's rows
    could only be cut, so it is not run."""
    rows = [{"role": "tool", "content": f"alpha beta gamma delta item{i}"} for i in range(150)]
    for word, n in (("gamma", 10), ("beta", 20), ("alpha", 30)):  # distinct frequencies
        rows += [{"role": "tool", "content": f"{word} other{i}"} for i in range(n)]
    durable.append_jsonl(store.layout.messages("T1"), rows, many=True)
    monkeypatch.setattr(Query, "CANDIDATE_BUDGET", 10)  # every word counts as common
    queries = []
    real = Query._match

    def counting(self, table, expr, *, limit, ranked):
        found = real(self, table, expr, limit=limit, ranked=ranked)
        queries.append((expr, len(found)))
        return found

    monkeypatch.setattr(Query, "_match", counting)
    hits = store.search("alpha beta gamma delta", limit=3)
    # The heaviest triple (or the pair it is answered from: `Query._and`) and nothing
    # lighter: its 150 rows are more than k = 100.
    heaviest = {'"delta"', '"gamma"', '"beta"'}
    assert queries and all(set(expr.split(" AND ")) <= heaviest for expr, _ in queries)
    assert queries[-1][1] == 150
    assert all("alpha beta gamma delta" in h.text for h in hits)


def test_ascii_rows_are_split_as_unicode61_splits_them():
    """Re-ranking splits ASCII rows in Python (`ascii_words`) instead of through FTS5: the
    tokens must be unicode61's, byte for byte, for every ASCII character."""
    conn = sqlite3.connect(":memory:")
    for sql in TEMP_SETUP:
        conn.execute(sql)
    sample = "".join(chr(c) for c in range(128)) + " Hello_World x9Y a-b café's 3.14 can't"
    ascii_text = sample.encode("ascii", "replace").decode("ascii")
    fill_tok(conn, [(1, ascii_text)], raw=True)
    got = [r[0] for r in conn.execute("SELECT term FROM temp.rq_raw_inst ORDER BY offset")]
    assert ascii_words(ascii_text) == got
    conn.close()


def test_ascii_queries_tokenize_as_the_index_does():
    """An ASCII query is split and stemmed in Python: the same (stem, word) pairs and
    unstemmed forms as the TEMP FTS5 tables give (a non-ASCII word at the end takes the
    query down that path)."""
    conn = sqlite3.connect(":memory:")
    for sql in TEMP_SETUP:
        conn.execute(sql)
    sample = (
        "".join(chr(c) for c in range(32, 127))
        + " Why were KeyErrors hidden in merge_record's 3.14 handling-x9Y? can't"
    )
    pairs, raw = tokenize_query(conn, sample)
    slow_pairs, slow_raw = tokenize_query(conn, sample + " café")
    assert slow_pairs[-1][1] == "café"
    assert (pairs, raw) == (slow_pairs[:-1], slow_raw[:-1])
    assert ("keyerror", "KeyErrors") in pairs and "keyerrors" in raw
    conn.close()


def test_ascii_and_other_rows_rank_alike(store):
    """A row with non-ASCII text takes the FTS5 path, an ASCII one the Python path: the same
    words score the same."""
    rows = [
        {"role": "user", "content": "the deploy errors came from the cache"},
        {"role": "user", "content": "the deploy errors came from the cache (café)"},
        {"role": "user", "content": "unrelated text about lunch"},
    ]
    durable.append_jsonl(store.layout.messages("T1"), rows, many=True)
    hits = store.search("deploy errors", limit=5)
    assert len(hits) == 2
    assert {h.line for h in hits} == {1, 2}
    assert hits[0].score > hits[1].score  # the shorter row, as BM25 ranks it
    assert hits[0].line == 1


def test_a_triple_is_answered_from_an_empty_or_small_pair(store, monkeypatch):
    """A triple whose pair holds no rows is empty without a query, and one whose pair holds
    a few rows is answered by looking those rows up: the rows are those of the AND."""
    rows = [{"role": "tool", "content": f"alpha beta filler{i}"} for i in range(3)]
    rows += [{"role": "tool", "content": "alpha beta gamma"}]
    rows += [
        {"role": "tool", "content": f"{w} x{i}"} for w in ("gamma", "delta") for i in range(40)
    ]
    rows += [{"role": "tool", "content": f"alpha delta y{i}"} for i in range(40)]
    durable.append_jsonl(store.layout.messages("T1"), rows, many=True)
    store.sync_index()
    query = Query(store.backend.connect(), "alpha beta gamma delta", None, 10)
    for sql in TEMP_SETUP:
        query.conn.execute(sql)
    query.surface, query.totals = {}, {"idx_msg": fts_totals(query.conn, "idx_msg")}
    query.df = {("idx_msg", t): 50 for t in ("alpha", "beta", "gamma", "delta")}
    asked = []
    real = Query._match

    def counting(self, table, expr, *, limit, ranked):
        asked.append(expr)
        return real(self, table, expr, limit=limit, ranked=ranked)

    monkeypatch.setattr(Query, "_match", counting)
    known = {frozenset(("beta", "delta")): []}
    assert query._and("idx_msg", ("beta", "gamma", "delta"), known) == []
    assert asked == []
    known[frozenset(("alpha", "beta"))] = real(
        query, "idx_msg", '"alpha" AND "beta"', limit=400, ranked=False
    )
    both = query._and("idx_msg", ("alpha", "beta", "gamma"), known)
    assert both == real(query, "idx_msg", '"alpha" AND "beta" AND "gamma"', limit=400, ranked=False)
    assert len(both) == 1 and asked == []


@pytest.mark.parametrize(
    ("full_rows", "ored"), [(1_000, {'"ocelot"', '"lynx"'}), (100, {'"ocelot"'})]
)
def test_a_big_table_ranks_fewer_rare_words_and_still_finds_them(
    store, monkeypatch, full_rows, ored
):
    """FTS5 scores every posting of the ranked OR; past `BUDGET_FULL_ROWS` rows its budget
    shrinks in proportion (here 40 postings, halved at 200 rows against 100), and the words
    it leaves out are found where they meet the others (the ANDs)."""
    rows = [{"role": "tool", "content": f"ocelot filler{i}"} for i in range(4)]
    rows += [{"role": "tool", "content": f"lynx filler{i}"} for i in range(30)]
    rows += [{"role": "tool", "content": f"puma filler{i}"} for i in range(150)]
    rows += [{"role": "tool", "content": f"unrelated {i}"} for i in range(15)]
    rows.append({"role": "tool", "content": "ocelot lynx puma sighting"})
    durable.append_jsonl(store.layout.messages("T1"), rows, many=True)
    monkeypatch.setattr(Query, "CANDIDATE_BUDGET", 40)
    monkeypatch.setattr(Query, "BUDGET_FULL_ROWS", full_rows)
    ors = []
    real = Query._match

    def recording(self, table, expr, *, limit, ranked):
        if ranked:
            ors.append(set(expr.split(" OR ")))
        return real(self, table, expr, limit=limit, ranked=ranked)

    monkeypatch.setattr(Query, "_match", recording)
    hits = store.search("ocelot lynx puma", limit=3)
    assert ors == [ored]
    assert hits[0].text == "tool: ocelot lynx puma sighting"


def test_document_frequencies_are_exact_below_the_sample_and_estimated_above(store, monkeypatch):
    """A term's document frequency is counted from at most `DF_SAMPLE` postings: exact below
    it, extrapolated from how far into the rowids they reach above it."""
    rows = [
        {"role": "tool", "content": f"row{i} {'common' if i % 2 else 'other'}"
         + (" rare" if i % 20 == 0 else "")}
        for i in range(2_000)
    ]  # fmt: skip
    durable.append_jsonl(store.layout.messages("T1"), rows, many=True)
    monkeypatch.setattr(Query, "DF_SAMPLE", 300)
    seen = {}
    real = Query._rerank

    def spying(self, candidates, terms):
        seen.update({term: df for (table, term), df in self.df.items() if table == "idx_msg"})
        return real(self, candidates, terms)

    monkeypatch.setattr(Query, "_rerank", spying)
    store.search("common rare", limit=3)
    assert seen["rare"] == 100  # 100 rows, under the sample: counted
    assert 900 <= seen["common"] <= 1_100  # 1,000 rows, over it: estimated
