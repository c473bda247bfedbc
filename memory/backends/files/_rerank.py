"""The files backend's re-rank: BM25 in two fields over a search's candidates, snippets.

The second half of a `_planner.Query` (which gathers the candidates): each candidate's text
is read and tokenized as the index tokenizes (`_text`), scored with BM25 over all query
terms in two fields (the stem, with global document frequencies and each table's average
length, and the query's own word form, whose rarer frequency is estimated from the
candidates), with a bonus for rows holding more of the distinct terms and holding them
close together; messages are then read as turns of their conversations (`_conversation`),
and every score is weighed by the kind of record (`memory.search.recall.SOURCE_WEIGHTS`, per FTS
table: raw output, messages and entries, after the agents' distilled records); only the
rows returned get their metadata and snippet.
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass

from memory.backends.files._conversation import named_speakers, rescore, speakers
from memory.backends.files._index_schema import FILE_TABLE, table_for
from memory.backends.files._text import (
    SPLIT_MAX_CHARS,
    ascii_words,
    fill_tok,
    near,
    snippet,
    stem_words,
    tuples,
    varints,
)
from memory.contract.base import SearchHit
from memory.search.recall import SOURCES, source_weight

K1, B = 1.2, 0.75
COVERAGE_WEIGHT = 0.5
STEM_WEIGHT = 0.5
EXACT_WEIGHT = 0.5
PROXIMITY_TOKENS = 8
PROXIMITY_WEIGHT = 0.15
#: A message written on a day the question names ("on March 3", "yesterday") scores this
#: much more.
DAY_WEIGHT = 1.0
_ROLE_LABELS = ("user:", "assistant:", "tool:", "system:")
MESSAGE_TABLE = table_for("messages")
_BEST_FIRST = operator.itemgetter(0, 1)
#: What a row's score is multiplied by, per FTS table: the weight its views share
#: (`memory.search.recall.SOURCE_WEIGHTS`).
TABLE_WEIGHT = {table_for(source): source_weight(source) for source in SOURCES}


#: A term's matches read per row, in a row longer than `SPLIT_MAX_CHARS`.
MAX_POSITIONS = 1_000
_FIRST_HITS_SQL = "SELECT offset FROM temp.rq_inst WHERE term = ? LIMIT ?"  # in offset order


@dataclass
class Candidate:
    rowid: int
    table: str


class Rerank:
    """The re-ranking methods of `_planner.Query`: they read the query's fields (`conn`,
    `query`, `limit`, `idf`, `weight`, `totals`, `span`, `df`, `df_cache`, `days`,
    `surface_raw`, `term_of`)."""

    def _rerank(self, candidates: list[Candidate], terms: list[str]) -> list[SearchHit]:
        if not candidates:
            return []
        docs = self._load(candidates)
        hits, exact = self._term_hits(docs, terms)
        self._lengths(docs)
        counted = self._count(docs, hits, exact)
        self._factors()
        scored = [
            (self._score(docs[doc_id], positions, tf, tf_exact, terms), doc_id, positions)
            for doc_id, positions, tf, tf_exact in counted
        ]
        scored.sort(key=_BEST_FIRST, reverse=True)  # `_as_turns` reads the best first
        self._as_turns(docs, scored)
        # distilled records before raw output (after `_as_turns`, which reads messages alone)
        files = [d for _, d, _ in scored if d in docs and docs[d]["table"] == FILE_TABLE]
        if files:  # which of the files' views a row is in (a checkpoint weighs less)
            self._describe(docs, files)
        scored = [(score * self._weight(docs, d), d, pos) for score, d, pos in scored]
        scored.sort(key=_BEST_FIRST, reverse=True)  # score, then newest first
        results: list[SearchHit] = []
        at = 0
        while len(results) < self.limit and at < len(scored):
            # Metadata only for the rows returned (more if one lost its idx_docs row).
            batch = scored[at : at + self.limit - len(results)]
            at += len(batch)
            batch = self._with_text(docs, batch)
            self._describe(docs, [d for _, d, _ in batch])
            results += [
                self._result(docs[d], score, pos) for score, d, pos in batch if "source" in docs[d]
            ]
        return results

    @staticmethod
    def _weight(docs: dict[int, dict], doc_id: int) -> float:
        """The weight of a row's view and file where it is known, else of its table (a
        turn `_as_turns` added is a message)."""
        doc = docs.get(doc_id)
        if doc is not None and "source" in doc:
            return source_weight(doc["source"], doc.get("path"))
        return TABLE_WEIGHT[doc["table"] if doc else MESSAGE_TABLE]

    def _as_turns(self, docs: dict[int, dict], scored: list) -> bool:
        """Rescore the messages of `scored` (best first) as turns of their conversations
        (`_conversation`), in place; False when there are none.

        Turns beside the best ones that hold no query word join only when more rows match
        than the search returns: they may take the place of weaker matches, but a search
        never returns more rows than match it, nor leaves out a match to make room for them
        when every match fits. They come with no positions (their text is read only if they
        are returned)."""
        own = {d: score for score, d, _ in scored if docs[d]["table"] == MESSAGE_TABLE}
        if not own:
            return False
        key = ("speakers", self.totals[MESSAGE_TABLE], self.span[MESSAGE_TABLE])
        known = self.df_cache.get(key, False)
        if known is False:
            known = self.df_cache[key] = speakers(self.conn)
        named = named_speakers(self.conn, self.query, known)
        scores = rescore(self.conn, own, list(own), named, self.limit)  # `own`: best first
        matched = len(scored)
        scored[:] = [(scores.get(d, score), d, positions) for score, d, positions in scored]
        if matched > self.limit:
            scored += [(score, d, []) for d, score in scores.items() if d not in docs]
        return True

    def _with_text(self, docs: dict[int, dict], batch: list) -> list:
        """`batch` with the text of the turns `_as_turns` added (their snippet is their
        start: they were no candidate, so they hold few query words if any)."""
        new = [Candidate(d, MESSAGE_TABLE) for _, d, _ in batch if d not in docs]
        if not new:
            return batch
        docs.update(self._load(new))
        return [item for item in batch if item[1] in docs]

    def _term_hits(
        self, docs: dict[int, dict], terms: list[str]
    ) -> tuple[dict[int, list[tuple[int, str]]], dict[int, set[int]]]:
        """Where the query terms occur in each candidate: `{doc: [(token offset, stem)]}`, and
        `{doc: offsets}` of the matches in the query's own word form.

        An ASCII row of up to `SPLIT_MAX_CHARS` is split in Python (`ascii_words`:
        unicode61's split and case folding on ASCII) and its words stemmed through
        `stem_words`; other rows, whole, go through the TEMP FTS5 tables, stemmed and
        unstemmed (costlier: ~0.5 ms more per 100 rows, but in C and without a word list
        in memory: a word at the end of a 100 MB message is found as the index found it).
        """
        wanted = {*terms, *self.term_of}
        texts = {i: d["body"] for i, d in docs.items()}
        split = {
            i: ascii_words(t) for i, t in texts.items() if len(t) <= SPLIT_MAX_CHARS and t.isascii()
        }
        forms = stem_words(self.conn, set().union(*split.values()), keep=wanted)
        raw = self.surface_raw
        own = {w for w, stem in forms.items() if w == raw.get(stem)}  # the query's own forms
        if self.term_of:  # another form of a verb counts as the verb
            forms = {w: self.term_of.get(stem, stem) for w, stem in forms.items()}
        hits: dict[int, list[tuple[int, str]]] = {}
        exact: dict[int, set[int]] = {}
        for doc, words in split.items():
            docs[doc]["length"] = len(words)
            found = [(o, w) for o, w in enumerate(words) if w in forms]
            if found:
                hits[doc] = [(o, forms[w]) for o, w in found]
                same = {o for o, w in found if w in own}
                if same:
                    exact[doc] = same
        rest = [(i, t) for i, t in texts.items() if i not in split]
        if rest:
            self._tokenized_hits(rest, terms, hits, exact)
        return hits, exact

    def _tokenized_hits(
        self, rows: list[tuple[int, str]], terms: list[str], hits: dict, exact: dict
    ) -> None:
        """`_term_hits` of `rows` through the TEMP FTS5 tables, added to `hits` and `exact`.

        A row longer than `SPLIT_MAX_CHARS` is tokenized on its own and stemmed only (no
        own-form matches: half the work), and only a term's first `MAX_POSITIONS` matches
        in it are read (a row with more is one long output, whose length outweighs its
        term counts; reading a million matches would cost seconds).
        """
        conn, raw = self.conn, self.surface_raw
        short = [(i, t) for i, t in rows if len(t) <= SPLIT_MAX_CHARS]
        if short:
            fill_tok(conn, short, raw=True)
            stems = [*terms, *self.term_of]
            marks = ",".join("?" * len(stems))
            sql = f"SELECT doc, term, offset FROM temp.rq_inst WHERE term IN ({marks})"
            for doc, stem, offset in tuples(conn, sql, stems):
                hits.setdefault(doc, []).append((offset, self.term_of.get(stem, stem)))
            forms_raw = list(dict.fromkeys(raw[t] for t in terms))
            marks = ",".join("?" * len(forms_raw))
            sql = f"SELECT doc, offset FROM temp.rq_raw_inst WHERE term IN ({marks})"
            for doc, offset in tuples(conn, sql, forms_raw):
                exact.setdefault(doc, set()).add(offset)
        for doc, text in rows:
            if len(text) > SPLIT_MAX_CHARS:
                fill_tok(conn, [(doc, text)])
                for stem in [*terms, *self.term_of]:
                    term = self.term_of.get(stem, stem)
                    for (offset,) in tuples(conn, _FIRST_HITS_SQL, (stem, MAX_POSITIONS)):
                        hits.setdefault(doc, []).append((offset, term))

    def _count(self, docs: dict[int, dict], hits: dict, exact: dict) -> list[tuple]:
        """Each candidate's `(doc, positions, tf, tf_exact)` in one pass, and the idf of
        each query word in its own form (`exact_idf`: an unstemmed second field, estimated).

        Two fields, as engines that index both forms do: every match counts for the stem,
        and a match in the query's own word form also counts for that form, with its own
        (rarer) frequency: "handling" ranks "handling" first. The index holds stems only;
        the share of the candidates holding a stem that also hold the query's exact form
        scales the stem's document frequency ("errors" is much rarer than "error").
        Candidates are the rows most like the query, so the estimate leans towards the
        query's own forms and never exceeds the stem's frequency. A message's role label
        ("user:", which the index holds) is not its text: it counts for the estimate, as
        the index counts it, but not for the row's score.
        """
        counted = []
        stem_docs: dict[str, int] = {}
        exact_docs: dict[str, int] = {}
        for doc_id, found in hits.items():
            same = exact.get(doc_id, ())
            tf: dict[str, float] = {}
            tf_exact: dict[str, float] = {}
            for offset, term in found:
                tf[term] = tf.get(term, 0.0) + 1.0
                if offset in same:
                    tf_exact[term] = tf_exact.get(term, 0.0) + 1.0
            for term in tf:
                stem_docs[term] = stem_docs.get(term, 0) + 1
            for term in tf_exact:
                exact_docs[term] = exact_docs.get(term, 0) + 1
            positions = sorted(found)
            if positions[0][0] == 0 and docs[doc_id]["body"].startswith(_ROLE_LABELS):
                label = positions.pop(0)[1]
                for counts in (tf, tf_exact) if 0 in same else (tf,):
                    counts[label] -= 1.0
                    if not counts[label]:
                        del counts[label]
            if positions:
                counted.append((doc_id, positions, tf, tf_exact))
        n_rows = sum(rows for rows, _ in self.totals.values())
        self.exact_idf = {}
        for term, weight in self.weight.items():
            ratio = (exact_docs.get(term, 0) + 0.5) / (stem_docs.get(term, 0) + 1)
            df = sum(self.df[(t, term)] for t in self.totals) * min(ratio, 1.0)
            self.exact_idf[term] = weight * math.log(1 + (n_rows - df + 0.5) / (df + 0.5))
        return counted

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

    def _score(
        self,
        doc: dict,
        positions: list[tuple[int, str]],
        tf: dict[str, float],
        tf_exact: dict[str, float],
        terms: list[str],
    ) -> float:
        """BM25 of one row in the two fields (`_count`), times its bonuses."""
        dl = doc.get("length") or len(positions)
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

    def _load(self, candidates: list[Candidate]) -> dict[int, dict]:
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
