"""The files backend's query planner: BM25 over the FTS5 index, fast at a million rows.

Query plan (what keeps a question fast at a million rows):

1. The query is tokenized exactly as the index is (`porter unicode61`, through a TEMP
   FTS5 table and its `fts5vocab` 'instance' view) and stopwords are dropped.
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
   pair's rows are all known is answered from them (`Query._and`): the walk of three
   posting lists that meet nowhere is the costliest query a search makes.
4. The candidates are re-ranked with BM25 over *all* query terms in two fields: the stem
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

import itertools
import math
import sqlite3
from dataclasses import dataclass

from memory.backends.files._index_schema import FILE_TABLE, TABLES, table_for
from memory.backends.files._text import (
    RERANK_MAX_CHARS,
    TEMP_SETUP,
    ascii_words,
    fill_tok,
    fts_totals,
    near,
    snippet,
    stem_words,
    stopword_stems,
    tokenize_query,
    tuples,
    varints,
)
from memory.base import SearchHit
from memory.clock import today_utc
from memory.when import question_days
from memory.words import QUESTION_WORDS

#: Every source `memory search` knows (files that are none of these are not indexed).
SOURCES = ("plans", "findings", "checkpoints", "snapshots", "overview", "detail", "messages",
           "entries", "facts", "episodes")  # fmt: skip

CANDIDATE_BUDGET = 5_000
#: Above this many rows in a table the OR's budget shrinks in proportion, to a fifth of
#: `CANDIDATE_BUDGET` at most: FTS5 scores every posting of the OR (about 1.4 us each, most
#: of a 100K-row search), and in a big table the rows that hold several query words, which
#: the ANDs find, are the ones the moderately rare words would have added.
BUDGET_FULL_ROWS = 25_000
MIN_BUDGET_SHARE = 0.2
#: Rows one AND query contributes (stepping an FTS5 cursor over more cost half a 1M search).
AND_CAP = 400
MAX_AND_QUERIES = 16
MAX_AND_ANSWERED = 8
MIN_AND_QUERIES = 8
AND_POSTING_BUDGET = 100_000
#: A triple's cheapest pair is asked first when, were its terms independent, fewer rows than
#: this would hold both: all of its rows are then likely to be known (`Query._and`).
PROBE_ROWS = AND_CAP
#: Postings read per (table, term) for its document frequency: exact below it, estimated
#: above (the first question with a term pays it; 4,000 cost ~0.3 ms a question at 1M
#: rows, recall@10 was the same at 1,000 on both halves of the bench's questions).
DF_SAMPLE = 1_000
DF_CACHE_SIZE = 20_000
AND_TERMS = 4
AND_MAX_SIZE = 3
RERANK_K = 100
MAX_TERMS = 32
K1, B = 1.2, 0.75
COVERAGE_WEIGHT = 0.5
STEM_WEIGHT = 0.5
EXACT_WEIGHT = 0.5
PROXIMITY_TOKENS = 8
PROXIMITY_WEIGHT = 0.15
QUESTION_WORD_WEIGHT = 0.3
#: A message written on a day the question names ("on March 3", "yesterday") scores this
#: much more, and up to `DAY_CANDIDATES` of that day's rows holding a query word are ranked.
DAY_WEIGHT = 1.0
DAY_CANDIDATES = 200

_ASKING = frozenset(
    "what when where which who whom whose why how did do does is are was were can could "
    "should remind".split()
)
_ROLE_LABELS = ("user:", "assistant:", "tool:", "system:")


# -- the query ---------------------------------------------------------------------------
@dataclass
class _Candidate:
    rowid: int
    table: str


class Query:
    """One search: plan per table, gather candidates, re-rank, cut snippets."""

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
        candidates: list[_Candidate] = []
        for table in tables:
            candidates.extend(self._candidates(table, terms))
            if self.days and table == table_for("messages"):
                candidates.extend(self._on_days(table, terms))
        return self._rerank(candidates, terms)

    def _on_days(self, table: str, terms: list[str]) -> list[_Candidate]:
        """Messages of the days the question names that hold any query word."""
        marks = ",".join("?" * len(self.days))
        sql = (
            f"SELECT {table}.rowid FROM {table} WHERE {table} MATCH ? AND {table}.rowid IN "
            f"(SELECT id FROM idx_docs WHERE day IN ({marks})) ORDER BY bm25({table}) LIMIT ?"
        )
        args = (self._or(terms), *self.days, DAY_CANDIDATES)
        return [_Candidate(row[0], table) for row in self.conn.execute(sql, args)]

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
            (self._quote(term), DF_SAMPLE),
        ).fetchone()
        if rows < DF_SAMPLE:
            return int(rows)
        low, high = self.span[table]
        estimate = DF_SAMPLE * (high - low + 1) / max(last - low + 1, 1)
        return int(min(estimate, self.totals[table][0]))

    # -- candidates -------------------------------------------------------------------
    def _candidates(self, table: str, terms: list[str]) -> list[_Candidate]:
        """Rows worth re-ranking: BM25 over the rare terms, plus rows where several query
        terms occur together (which the rare terms alone would miss)."""
        present = sorted((self.df[(table, t)], t) for t in terms if self.df[(table, t)] > 0)
        rows_in_table = max(self.totals[table][0], 1)
        share = max(MIN_BUDGET_SHARE, min(1.0, BUDGET_FULL_ROWS / rows_in_table))
        budget = CANDIDATE_BUDGET * share
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
        return [_Candidate(r, table) for r in rows]

    def _together(self, table: str, present: list[str]) -> list[int]:
        """Rows holding the most query terms at once: AND over every combination of the
        terms, largest combinations first, rarest first, until enough rows are found.

        Each AND is an intersection of posting lists (cheap even for common words, unlike
        scoring every row that holds one of them). Rows are ordered by how many terms they
        hold, then by those terms' summed idf, then by length (shorter first, as BM25 would).
        """
        found: dict[int, tuple[int, float]] = {}
        known: dict[frozenset[str], list[int]] = {}
        queries = answered = spent = 0
        cut: tuple[int, float] | None = None  # the weight at which `k` rows were found
        present = sorted(present, key=lambda t: -self.idf[t])[:AND_TERMS]
        top = min(len(present), AND_MAX_SIZE)
        for size in range(top, 1 if top > 1 else 0, -1):
            combos = sorted(
                itertools.combinations(present, size), key=lambda c: -sum(self.idf[t] for t in c)
            )
            for combo in combos:
                if queries >= MAX_AND_QUERIES or answered >= MAX_AND_ANSWERED:
                    break
                weight = (size, sum(self.idf[t] for t in combo))
                if cut is not None and weight < cut:
                    # Combinations run in falling weight, so `k` rows at least as heavy are
                    # found already: this one's rows (and every later one's) would be cut.
                    break
                cost = min(self.df[(table, t)] for t in combo)  # the shortest posting list
                if queries >= MIN_AND_QUERIES and spent + cost > AND_POSTING_BUDGET:
                    continue
                spent += cost
                queries += 1
                rows = self._and(table, combo, known)
                answered += bool(rows)
                for rowid in rows:
                    if rowid not in found or found[rowid] < weight:
                        found[rowid] = weight
                if cut is None and len(found) >= self.k:
                    cut = weight
            if len(found) >= self.k or queries >= MAX_AND_QUERIES or answered >= MAX_AND_ANSWERED:
                break
        if len(found) <= self.k:
            return list(found)
        ids = sorted(found, key=lambda r: (-found[r][0], -found[r][1]))
        # Lengths decide only among the rows tied at the cut (reading every row's length
        # costs milliseconds when thousands of rows hold two common words).
        cut = found[ids[self.k - 1]]
        head = [r for r in ids if found[r] > cut]
        tied = [r for r in ids if found[r] == cut]
        # Shortest first, in SQL: a length is one varint, and of two canonical varints the
        # longer encoding is the larger number, and equal-length encodings sort bytewise.
        marks = ",".join("?" * len(tied))
        shortest = tuples(
            self.conn,
            f"SELECT id FROM {table}_docsize WHERE id IN ({marks}) "
            "ORDER BY length(sz), sz, id LIMIT ?",
            (*tied, self.k - len(head)),
        )
        return head + [row[0] for row in shortest]

    def _and(self, table: str, combo: tuple[str, ...], known: dict) -> list[int]:
        """The first `AND_CAP` rows (by rowid) holding every term of `combo`, as one AND
        query gives them; `known` keeps the combinations answered so far in this search.

        A triple is answered from one of its pairs when that pair's rows are all known
        (fewer than `AND_CAP`): an empty pair means an empty triple, at no cost, and a few
        rows are read and checked for the third term (`_holding`). When a triple's cheapest
        pair is expected to be small (`PROBE_ROWS`), that pair is asked first: walking two
        posting lists costs about two thirds of walking three, and the pair usually serves
        the other triples and the pair step too.
        """
        key = frozenset(combo)
        rows = known.get(key)
        if rows is None:
            rows = self._from_pair(table, combo, known) if len(combo) == 3 else None
            if rows is None:
                expr = " AND ".join(self._quote(t) for t in combo)
                rows = self._match(table, expr, limit=AND_CAP, ranked=False)
            known[key] = rows
        return rows

    def _from_pair(self, table: str, combo: tuple[str, ...], known: dict) -> list[int] | None:
        pairs = list(itertools.combinations(combo, 2))
        done = [(known[frozenset(p)], p) for p in pairs if frozenset(p) in known]
        if not done:
            pair = min(pairs, key=lambda p: sum(self.df[(table, t)] for t in p))
            if self._expected(table, pair) < PROBE_ROWS:
                done = [(self._and(table, pair, known), pair)]
        if not done:
            return None
        rows, pair = min(done, key=lambda d: len(d[0]))
        if len(rows) >= AND_CAP:  # maybe a cut: the pair's rows are not all known
            return None
        (third,) = set(combo) - set(pair)
        return self._holding(table, rows, third) if rows else []

    def _holding(self, table: str, rows: list[int], term: str) -> list[int]:
        """Those of `rows` that hold `term`, in rowid order: ASCII rows are read and split
        (`ascii_words`, stems from `stem_words`; ~2 us a row), others asked of FTS5 one rowid
        at a time (~9 us a row)."""
        marks = ",".join("?" * len(rows))
        split: dict[int, list[str]] = {}
        other: list[int] = []
        for rowid, body in tuples(
            self.conn, f"SELECT id, c0 FROM {table}_content WHERE id IN ({marks})", rows
        ):
            if body is None or body.isascii():
                split[rowid] = ascii_words(body or "")
            else:
                other.append(rowid)
        forms = stem_words(self.conn, set().union(*split.values()), keep={term})
        held = [r for r, words in split.items() if not forms.keys().isdisjoint(words)]
        if other:
            marks = ",".join("?" * len(other))
            sql = f"SELECT rowid FROM {table} WHERE {table} MATCH ? AND rowid IN ({marks})"
            held += [row[0] for row in tuples(self.conn, sql, (self._quote(term), *other))]
        return sorted(held)

    def _expected(self, table: str, combo: tuple[str, ...]) -> float:
        """Rows holding all of `combo` if its terms were independent."""
        rows = max(self.totals[table][0], 1)
        return rows * math.prod(self.df[(table, t)] / rows for t in combo)

    def _quote(self, stem: str) -> str:
        return '"' + self.surface.get(stem, stem).replace('"', '""') + '"'

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

    # -- re-ranking -------------------------------------------------------------------
    def _rerank(self, candidates: list[_Candidate], terms: list[str]) -> list[SearchHit]:
        if not candidates:
            return []
        docs = self._load(candidates)
        hits, exact = self._term_hits(docs, terms)
        self._lengths(docs)
        for doc_id, offsets in exact.items():
            docs[doc_id]["exact"] = offsets
        self._exact_idf(docs, hits)
        self._factors()
        scored = []
        for doc_id, doc in docs.items():
            positions = sorted(hits.get(doc_id, []))
            if positions and positions[0][0] == 0 and doc["body"].startswith(_ROLE_LABELS):
                positions = positions[1:]  # "user:" labels a message; it is not its text
            if positions:
                scored.append((self._score(doc, positions, terms), doc_id, positions))
        scored.sort(key=lambda s: (-s[0], -s[1]))
        results: list[SearchHit] = []
        at = 0
        while len(results) < self.limit and at < len(scored):
            # Metadata only for the rows returned (more if one lost its idx_docs row).
            batch = scored[at : at + self.limit - len(results)]
            at += len(batch)
            self._describe(docs, [d for _, d, _ in batch])
            results += [
                self._result(docs[d], score, pos) for score, d, pos in batch if "source" in docs[d]
            ]
        return results

    def _term_hits(
        self, docs: dict[int, dict], terms: list[str]
    ) -> tuple[dict[int, list[tuple[int, str]]], dict[int, set[int]]]:
        """Where the query terms occur in each candidate: `{doc: [(token offset, stem)]}`, and
        `{doc: offsets}` of the matches in the query's own word form.

        An ASCII row is split in Python (`ascii_words`: unicode61's split and case folding
        on ASCII) and its words stemmed through `stem_words`; other rows go through the TEMP FTS5
        tables, stemmed and unstemmed (costlier: ~0.5 ms more per 100 rows).
        """
        wanted = set(terms)
        texts = {i: d["body"][:RERANK_MAX_CHARS] for i, d in docs.items()}
        split = {i: ascii_words(t) for i, t in texts.items() if t.isascii()}
        forms = stem_words(self.conn, set().union(*split.values()), keep=wanted)
        raw = self.surface_raw
        own = {w for w, stem in forms.items() if w == raw[stem]}  # the query's own forms
        hits: dict[int, list[tuple[int, str]]] = {}
        exact: dict[int, set[int]] = {}
        for doc, words in split.items():
            if len(texts[doc]) == len(docs[doc]["body"]):  # the whole row: its token count
                docs[doc]["length"] = len(words)
            found = [(o, w) for o, w in enumerate(words) if w in forms]
            if found:
                hits[doc] = [(o, forms[w]) for o, w in found]
                same = {o for o, w in found if w in own}
                if same:
                    exact[doc] = same
        rest = [(i, t) for i, t in texts.items() if i not in split]
        if not rest:
            return hits, exact
        conn = self.conn
        fill_tok(conn, rest, raw=True)
        marks = ",".join("?" * len(terms))
        for doc, term, offset in tuples(
            conn, f"SELECT doc, term, offset FROM temp.rq_inst WHERE term IN ({marks})", terms
        ):
            hits.setdefault(doc, []).append((offset, term))
        forms_raw = list(dict.fromkeys(raw[t] for t in terms))
        marks = ",".join("?" * len(forms_raw))
        for doc, offset in tuples(
            conn, f"SELECT doc, offset FROM temp.rq_raw_inst WHERE term IN ({marks})", forms_raw
        ):
            exact.setdefault(doc, set()).add(offset)
        return hits, exact

    def _exact_idf(self, docs: dict[int, dict], hits: dict[int, list[tuple[int, str]]]) -> None:
        """idf of each query word in its own form (an unstemmed second field, estimated).

        The index holds stems only; the share of the candidates holding a stem that also
        hold the query's exact form scales the stem's document frequency ("errors" is much
        rarer than "error"). Candidates are the rows most like the query, so the estimate
        leans towards the query's own forms and never exceeds the stem's frequency.
        """
        n_rows = sum(rows for rows, _ in self.totals.values())
        stem_docs: dict[str, int] = {}
        exact_docs: dict[str, int] = {}
        for doc_id, found in hits.items():
            for term in {term for _, term in found}:
                stem_docs[term] = stem_docs.get(term, 0) + 1
            exact = docs[doc_id].get("exact")  # offsets holding the query's own form
            if exact:
                for term in {term for offset, term in found if offset in exact}:
                    exact_docs[term] = exact_docs.get(term, 0) + 1
        self.exact_idf = {}
        for term, weight in self.weight.items():
            ratio = (exact_docs.get(term, 0) + 0.5) / (stem_docs.get(term, 0) + 1)
            df = sum(self.df[(t, term)] for t in self.totals) * min(ratio, 1.0)
            self.exact_idf[term] = weight * math.log(1 + (n_rows - df + 0.5) / (df + 0.5))

    def _factors(self) -> None:
        """What `_score` multiplies by, once per search: each term's weighted idf (stem and
        own form), each table's average row length, the summed weight of the terms."""
        self.stem_factor = {term: STEM_WEIGHT * idf for term, idf in self.idf.items()}
        self.exact_factor = {term: EXACT_WEIGHT * idf for term, idf in self.exact_idf.items()}
        self.avgdl = {
            table: max(tokens / rows if rows else 1.0, 1.0)
            for table, (rows, tokens) in self.totals.items()
        }
        self.all_weight = max(sum(self.weight.values()) - 1, 1)

    def _score(self, doc: dict, positions: list[tuple[int, str]], terms: list[str]) -> float:
        dl = doc.get("length") or len(positions)
        exact = doc.get("exact", ())
        tf: dict[str, float] = {}
        tf_exact: dict[str, float] = {}
        for offset, term in positions:
            # Two fields, as engines that index both forms do: every match counts for the
            # stem, and a match in the query's own word form also counts for that form,
            # with its own (rarer) frequency: "handling" ranks "handling" first.
            tf[term] = tf.get(term, 0.0) + 1.0
            if offset in exact:
                tf_exact[term] = tf_exact.get(term, 0.0) + 1.0
        score = 0.0
        lengths = K1 * (1 - B + B * dl / self.avgdl[doc["table"]])
        stem_factor, exact_factor = self.stem_factor, self.exact_factor
        for term, count in tf.items():
            score += stem_factor[term] * count * (K1 + 1) / (count + lengths)
        for term, count in tf_exact.items():
            score += exact_factor[term] * count * (K1 + 1) / (count + lengths)
        if self.days and doc.get("day") in self.days:
            score *= 1 + DAY_WEIGHT
        if len(terms) > 1:
            weight = self.weight
            held = sum(weight[t] for t in tf) - 1
            score *= 1 + COVERAGE_WEIGHT * max(held, 0) / self.all_weight
            if len(tf) > 1 and near(positions, PROXIMITY_TOKENS):
                score *= 1 + PROXIMITY_WEIGHT
        return score

    def _load(self, candidates: list[_Candidate]) -> dict[int, dict]:
        """Each candidate's text (and, when the question names days, its day); `length`
        (tokens) is set by `_term_hits` or, for the rows it cannot count, by `_lengths`."""
        docs: dict[int, dict] = {}
        by_table: dict[str, list[int]] = {}
        for cand in candidates:
            by_table.setdefault(cand.table, []).append(cand.rowid)
        for table, ids in by_table.items():
            marks = ",".join("?" * len(ids))
            sql = f"SELECT id, c0 FROM {table}_content WHERE id IN ({marks})"
            for rowid, body in tuples(self.conn, sql, ids):
                docs[rowid] = {"table": table, "body": body or ""}
            if self.days:
                sql = f"SELECT id, day FROM idx_docs WHERE id IN ({marks})"
                for rowid, day in tuples(self.conn, sql, ids):
                    if rowid in docs:
                        docs[rowid]["day"] = day
        return docs

    def _lengths(self, docs: dict[int, dict]) -> None:
        """Token counts from FTS5's docsize records, for the rows `_term_hits` did not count."""
        by_table: dict[str, list[int]] = {}
        for rowid, doc in docs.items():
            if "length" not in doc:
                by_table.setdefault(doc["table"], []).append(rowid)
        for table, ids in by_table.items():
            marks = ",".join("?" * len(ids))
            sql = f"SELECT id, sz FROM {table}_docsize WHERE id IN ({marks})"
            for rowid, size in tuples(self.conn, sql, ids):
                docs[rowid]["length"] = varints(size)[0] if size else 0

    def _describe(self, docs: dict[int, dict], ids: list[int]) -> None:
        """Add where each row comes from (source, line, citation, path); a row without its
        idx_docs metadata gets none and is not returned."""
        marks = ",".join("?" * len(ids))
        for rowid, source, line, cite, path, file_path in tuples(
            self.conn,
            "SELECT d.id, d.source, d.line, d.cite, d.path, f.path FROM idx_docs d "
            f"LEFT JOIN idx_files f ON f.id = d.file_id WHERE d.id IN ({marks})",
            ids,
        ):
            docs[rowid].update(source=source, line=line, cite=cite, path=file_path or path)

    def _result(self, doc: dict, score: float, positions: list[tuple[int, str]]) -> SearchHit:
        body = doc["body"]
        text, best_char = snippet(body, positions, self.idf)
        first = line = doc["line"]
        if doc["source"] != "messages" and line is not None:
            line += body.count("\n", 0, best_char)
        if doc["source"] == "entries" or (doc["cite"] and (line is None or not doc["path"])):
            citation = doc_id = doc["cite"] or ""
        else:
            citation = f"{doc['path']}#L{line}"
            doc_id = doc["cite"] or f"{doc['path']}#L{first}"
        path = doc["path"] or ""
        return SearchHit(doc_id, doc["source"], path, round(score, 4), text, line, citation)


def _file_source_count() -> int:
    return sum(1 for s in SOURCES if table_for(s) == FILE_TABLE)
