"""The files backend's query planner: BM25 over the FTS5 index, fast at a million rows.

Query plan (what keeps a question fast at a million rows):

1. The query is tokenized exactly as the index is (`porter unicode61`, through a TEMP
   FTS5 table and its `fts5vocab` 'instance' view) and stopwords are dropped. An irregular
   verb's other forms ("went", "gone" for "go": `memory.text.words.verb_forms`) count as its
   term everywhere below (an OR in each FTS5 query, the same term in the re-rank).
2. Each term's document frequency is taken per FTS table from the first `DF_SAMPLE`
   postings (exact below that, else estimated from how far into the rowid range they
   reach): FTS5 stores no document frequencies and counting a common word's postings
   costs milliseconds.
3. Candidates, per table: `bm25()` over an OR of the rarest terms while their summed
   document frequencies stay within `CANDIDATE_BUDGET` (so FTS5 never scores every row
   holding "error" or "test"; less in a table of more than `BUDGET_FULL_ROWS` rows),
   plus rows where several terms meet: a few ANDs of the best 3- and 2-term combinations of
   the terms the OR did not fully cover (8, or up to 16 while their shortest posting lists
   sum to under `AND_POSTING_BUDGET`); intersecting posting lists is cheap even for common
   words. An OR of all words ranked by `bm25()` costs ~800 ms at 1M rows. A triple whose
   pair's rows are all known is answered from them (`_intersect`): the walk of three
   posting lists that meet nowhere is the costliest query a search makes.
4. The candidates are re-ranked (`_rerank`) with BM25 over *all* query terms in two fields: the stem
   (global document frequencies, each table's average length) and the query's own word
   form, whose rarer frequency is estimated from the candidates ("errors" against
   "error"). A bonus goes to rows holding more of the distinct query terms and holding them
   close together. In a question, words that frame it ("what made", "why didn't we go")
   weigh less than its topic words, and a message's role label ("user:") is not its text.
   Term positions come from tokenizing the candidates as the index does (`_text`), which
   also gives the snippet (~300 characters from the best line, on one line) and the best
   line to cite inside a block.

Invariant: every search first calls `Index.sync()`, so what is on disk is what is found.
"""

from __future__ import annotations

import math
import sqlite3

from memory.backends.files._index_schema import FILE_TABLE, TABLES, table_for
from memory.backends.files._intersect import Intersect
from memory.backends.files._rerank import Candidate, Rerank
from memory.backends.files._text import (
    TEMP_SETUP,
    fts_totals,
    stem_words,
    stopword_stems,
    tokenize_query,
    tuples,
)
from memory.clock import today_utc
from memory.contract.base import SearchHit
from memory.search.when import question_days
from memory.text.words import QUESTION_WORDS, verb_forms

#: Every source `memory search` knows (files that are none of these are not indexed).
SOURCES = ("plans", "findings", "checkpoints", "snapshots", "overview", "detail", "messages",
           "entries", "facts", "episodes")  # fmt: skip

MIN_BUDGET_SHARE = 0.2
DF_CACHE_SIZE = 20_000
RERANK_K = 100
MAX_TERMS = 32
QUESTION_WORD_WEIGHT = 0.3
#: Up to this many rows of a day the question names ("on March 3", "yesterday") that hold a
#: query word are ranked (and score more: `_rerank.DAY_WEIGHT`).
DAY_CANDIDATES = 200

_ASKING = frozenset(
    "what when where which who whom whose why how did do does is are was were can could "
    "should remind".split()
)


# -- the query ---------------------------------------------------------------------------
class Query(Intersect, Rerank):
    """One search: plan per table, gather candidates, re-rank, cut snippets."""

    CANDIDATE_BUDGET = 5_000
    #: Above this many rows in a table the OR's budget shrinks in proportion, to a fifth of
    #: `CANDIDATE_BUDGET` at most: FTS5 scores every posting of the OR (about 1.4 us each,
    #: most of a 100K-row search), and in a big table the rows that hold several query
    #: words, which the ANDs find, are the ones the moderately rare words would have added.
    BUDGET_FULL_ROWS = 25_000
    #: Postings read per (table, term) for its document frequency: exact below it, estimated
    #: above (the first question with a term pays it; 4,000 cost ~0.3 ms a question at 1M
    #: rows, recall@10 was the same at 1,000 on both halves of the bench's questions).
    DF_SAMPLE = 1_000

    def __init__(
        self,
        conn: sqlite3.Connection,
        query: str,
        sources: tuple[str, ...] | None,
        limit: int,
        *,
        df_cache: dict | None = None,
    ):
        """`sources=None` searches every row, whatever its source. `df_cache` keeps document
        frequencies between the queries of one connection (keyed by the table's row and
        token totals and rowid range, so any change to the table misses it)."""
        self.conn, self.query, self.sources, self.limit = conn, query, sources, limit
        self.df_cache = {} if df_cache is None else df_cache
        self.k = max(RERANK_K, 2 * limit)
        self.alternatives: dict[str, tuple[str, ...]] = {}  # see `_verbs`
        self.term_of: dict[str, str] = {}

    def run(self) -> list[SearchHit]:
        for sql in TEMP_SETUP:
            self.conn.execute(sql)
        tokens, raw = tokenize_query(self.conn, self.query)
        stops = stopword_stems(self.conn)
        terms = list(dict.fromkeys(stem for stem, _ in tokens if stem not in stops))
        if not terms:
            terms = list(dict.fromkeys(stem for stem, _ in tokens))
        terms = terms[:MAX_TERMS]  # a pasted page is not a question; bound the planning
        if not terms:
            return []
        self.surface = {}
        for stem, word in tokens:
            self.surface.setdefault(stem, word)
        self.surface_lower = {stem: word.lower() for stem, word in self.surface.items()}
        self.surface_raw: dict[str, str] = {}  # the query's own form, as unicode61 gives it
        for (stem, _), form in zip(tokens, raw, strict=True):
            self.surface_raw.setdefault(stem, form)
        self._verbs(terms)
        # In a question, words that frame it ("what made", "why didn't we go") weigh less.
        asking = "?" in self.query or (tokens and tokens[0][1].lower() in _ASKING)
        self.weight = {
            t: QUESTION_WORD_WEIGHT if asking and self.surface_lower[t] in QUESTION_WORDS else 1.0
            for t in terms
        }
        if self.sources is None:
            tables = list(TABLES)
        else:
            tables = list(dict.fromkeys(table_for(s) for s in self.sources))
        self.totals = {t: fts_totals(self.conn, t) for t in tables}
        self.span = {
            t: tuple(
                self.conn.execute(
                    f"SELECT coalesce((SELECT min(id) FROM {t}_content), 0), "
                    f"coalesce((SELECT max(id) FROM {t}_content), 0)"
                ).fetchone()
            )
            for t in tables
        }
        self.df = {
            (t, term): self._df(t, term) if self.totals[t][0] else 0
            for t in tables
            for term in terms
        }
        n_rows = sum(rows for rows, _ in self.totals.values())
        self.idf = {}
        for term in terms:
            df = sum(self.df[(t, term)] for t in tables)
            self.idf[term] = self.weight[term] * math.log(1 + (n_rows - df + 0.5) / (df + 0.5))
        self.days = sorted(question_days(self.query, today_utc()))
        candidates: list[Candidate] = []
        for table in tables:
            candidates.extend(self._candidates(table, terms))
            if self.days and table == table_for("messages"):
                candidates.extend(self._on_days(table, terms))
        return self._rerank(candidates, terms)

    def _verbs(self, terms: list[str]) -> None:
        """The other forms of the query's irregular verbs ("went", "gone" for "go"): each
        counts as its term wherever the term is matched (`alternatives`: term -> forms,
        `term_of`: stem of a form -> term)."""
        for term in terms:
            forms = verb_forms(self.surface_lower[term])
            if not forms:
                continue
            stems = stem_words(self.conn, set(forms))
            others = {stems[f]: f for f in forms if stems[f] != term and stems[f] not in terms}
            if others:
                self.alternatives[term] = tuple(others.values())
                self.term_of.update(dict.fromkeys(others, term))

    def _on_days(self, table: str, terms: list[str]) -> list[Candidate]:
        """Messages of the days the question names that hold any query word."""
        marks = ",".join("?" * len(self.days))
        sql = (
            f"SELECT {table}.rowid FROM {table} WHERE {table} MATCH ? AND {table}.rowid IN "
            f"(SELECT id FROM idx_docs WHERE day IN ({marks})) ORDER BY bm25({table}) LIMIT ?"
        )
        args = (self._or(terms), *self.days, DAY_CANDIDATES)
        return [Candidate(row[0], table) for row in self.conn.execute(sql, args)]

    def _df(self, table: str, term: str) -> int:
        """Rows holding `term`: exact up to `DF_SAMPLE`, else estimated from how far into
        the rowid range the first `DF_SAMPLE` of them reach (FTS5 stores no document
        frequencies; counting a common word's postings would cost milliseconds)."""
        key = (table, term, self.totals[table], self.span[table])
        found = self.df_cache.get(key)
        if found is None:
            if len(self.df_cache) >= DF_CACHE_SIZE:
                self.df_cache.clear()
            found = self.df_cache[key] = self._count_df(table, term)
        return found

    def _count_df(self, table: str, term: str) -> int:
        rows, last = self.conn.execute(
            f"SELECT count(*), max(rowid) FROM (SELECT rowid FROM {table} WHERE {table} "
            "MATCH ? ORDER BY rowid LIMIT ?)",
            (self._quote(term), self.DF_SAMPLE),
        ).fetchone()
        if rows < self.DF_SAMPLE:
            return int(rows)
        low, high = self.span[table]
        estimate = self.DF_SAMPLE * (high - low + 1) / max(last - low + 1, 1)
        return int(min(estimate, self.totals[table][0]))

    # -- candidates -------------------------------------------------------------------
    def _candidates(self, table: str, terms: list[str]) -> list[Candidate]:
        """Rows worth re-ranking: BM25 over the rare terms, plus rows where several query
        terms occur together (which the rare terms alone would miss)."""
        present = sorted((self.df[(table, t)], t) for t in terms if self.df[(table, t)] > 0)
        rows_in_table = max(self.totals[table][0], 1)
        share = max(MIN_BUDGET_SHARE, min(1.0, self.BUDGET_FULL_ROWS / rows_in_table))
        budget = self.CANDIDATE_BUDGET * share
        rare, total = [], 0
        for df, term in present:
            if total + df > budget:
                break
            rare.append(term)
            total += df
        rows: list[int] = []
        if rare:
            rows = self._match(table, self._or(rare), limit=self.k, ranked=True)
        if len(rare) < len(present):
            # Terms so rare that the OR above returned every row holding them add nothing
            # to an AND but would take its query slots ("handling" in 1 row of 100K).
            covered, summed = set(), 0
            for df, term in present:
                summed += df
                if summed > self.k or len(present) - len(covered) <= 2:
                    break
                covered.add(term)
            common = [t for _, t in present if t not in covered]
            seen = set(rows)
            rows += [r for r in self._together(table, common) if r not in seen]
        return [Candidate(r, table) for r in rows]

    def _quote(self, stem: str) -> str:
        """`stem` as an FTS5 query: its word in the query, or any form of that verb."""
        word = '"' + self.surface.get(stem, stem).replace('"', '""') + '"'
        others = self.alternatives.get(stem)
        if not others:
            return word
        return "(" + " OR ".join([word, *(f'"{form}"' for form in others)]) + ")"

    def _or(self, stems: list[str]) -> str:
        return " OR ".join(self._quote(s) for s in stems)

    def _match(self, table: str, expr: str, *, limit: int, ranked: bool) -> list[int]:
        order = f"bm25({table})" if ranked else f"{table}.rowid"
        filt, args = "", [expr]
        wanted = [s for s in self.sources or () if table_for(s) == table]
        if self.sources is not None and table == FILE_TABLE and len(wanted) < _file_source_count():
            filt = f" AND idx_docs.source IN ({','.join('?' * len(wanted))})"
            args.extend(wanted)
        join = f" JOIN idx_docs ON idx_docs.id = {table}.rowid" if filt else ""
        sql = (
            f"SELECT {table}.rowid FROM {table}{join} WHERE {table} MATCH ?{filt} "
            f"ORDER BY {order} LIMIT ?"
        )
        return [row[0] for row in tuples(self.conn, sql, (*args, limit))]


def _file_source_count() -> int:
    return sum(1 for s in SOURCES if table_for(s) == FILE_TABLE)
