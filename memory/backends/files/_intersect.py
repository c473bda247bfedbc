"""Rows where several query terms meet, for the query planner (`_planner.Query`, step 3).

The terms that the ranked OR leaves out are too common to score row by row, but the rows
holding several of them at once are few: a search asks ANDs of their best combinations
(intersections of posting lists, cheap even for common words) within a budget of queries and
postings, and answers a triple from a pair whose rows it already knows where it can.
"""

from __future__ import annotations

import itertools
import math
import sqlite3
from collections.abc import Callable

from memory.backends.files._text import ascii_words, stem_words, tuples

#: Rows one AND query contributes (stepping an FTS5 cursor over more cost half a 1M search).
AND_CAP = 400
MAX_AND_QUERIES = 16
MAX_AND_ANSWERED = 8
MIN_AND_QUERIES = 8
AND_POSTING_BUDGET = 100_000
#: A triple's cheapest pair is asked first when, were its terms independent, fewer rows than
#: this would hold both: all of its rows are then likely to be known (`Intersect._and`).
PROBE_ROWS = AND_CAP
AND_TERMS = 4
AND_MAX_SIZE = 3


class Intersect:
    """The AND queries of `_planner.Query`: they read the query's fields and ask FTS5
    through its `_match` and `_quote`."""

    conn: sqlite3.Connection
    k: int
    idf: dict[str, float]
    df: dict[tuple[str, str], int]
    totals: dict[str, tuple[int, int]]
    term_of: dict[str, str]
    _match: Callable[..., list[int]]
    _quote: Callable[[str], str]

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
        keep = {term, *(s for s, t in self.term_of.items() if t == term)}
        forms = stem_words(self.conn, set().union(*split.values()), keep=keep)
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
