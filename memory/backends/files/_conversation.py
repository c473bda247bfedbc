"""Messages are turns of conversations: the re-rank reads a turn with the turns around it
and with its speaker (for the query planner, `_planner`).

* **Context.** An answer often shares no word with the question its neighbour asked
  ("What kind of jobs are you thinking of?" / "Counseling or mental health, I'd love to
  support people"), and a conversation stays on one topic for a few turns. A message's
  score therefore combines its own (BM25 of its text) with its context's: the own scores of
  the `CONTEXT_TURNS` messages before and after it in the same log, halved per turn of
  distance (`CONTEXT_DECAY`). The two combine as `hypot(own, context)`: either alone
  counts in full, both together count more than either but less than their sum, so a
  turn that merely sits beside matches does not outrank the matches themselves by much,
  and isolated matches (a fact logged between unrelated tool output) keep their rank.
* **Speakers.** A message whose speaker (its `name`: a person in a chat log, an agent, a
  tool) the question names scores `1 + SPEAKER_WEIGHT` times as much, as a message of a
  day the question names does (`_rerank.DAY_WEIGHT`).

What it costs: the turns around the `CONTEXT_OF` best messages only (the rows that can
reach the results), found with one statement over `idx_docs` (a file's rows are in line
order by rowid, so "the rows of the same file just before and after" is a seek in
`idx_docs_file`, right even when appends to several logs interleave); the speakers are read
once per connection while the messages table is unchanged (`speakers`), and looked up for
rows only when the question names one.
"""

from __future__ import annotations

import heapq
import math
import sqlite3

from memory.backends.files._index_schema import json_array
from memory.backends.files._text import fold_words, tuples

CONTEXT_TURNS = 2
CONTEXT_DECAY = 0.5
#: The turns around this many of the best messages are looked up.
CONTEXT_OF = 10
_WEIGHTS = tuple(CONTEXT_DECAY**k for k in range(1, CONTEXT_TURNS + 1))
SPEAKER_WEIGHT = 1.0
#: Names of up to this many words are matched, in the first `NAME_SCAN_WORDS` of a query.
NAME_WORDS = 3
NAME_SCAN_WORDS = 200

_AROUND_SQL = """
SELECT top.value, d.file_id,
  (SELECT group_concat(id) FROM (SELECT id FROM idx_docs WHERE file_id = d.file_id
     AND id < top.value ORDER BY id DESC LIMIT :n)),
  (SELECT group_concat(id) FROM (SELECT id FROM idx_docs WHERE file_id = d.file_id
     AND id > top.value ORDER BY id LIMIT :n))
FROM json_each(:rows) AS top JOIN idx_docs d ON d.id = top.value
"""
#: Every speaker, one index seek each (a skip-scan of `idx_docs_speaker`).
_SPEAKERS_SQL = """
WITH RECURSIVE s(name) AS (
  SELECT min(speaker) FROM idx_docs WHERE speaker IS NOT NULL
  UNION ALL
  SELECT (SELECT min(speaker) FROM idx_docs WHERE speaker > s.name) FROM s
  WHERE s.name IS NOT NULL
) SELECT name FROM s WHERE name IS NOT NULL LIMIT ?
"""
_NAMED_SQL = "SELECT DISTINCT speaker FROM idx_docs WHERE speaker IN ({marks})"
_SPOKEN_SQL = (
    "SELECT id FROM idx_docs WHERE id IN (SELECT value FROM json_each(?)) AND speaker IN ({marks})"
)
#: Up to this many distinct speakers are kept per connection; a log with more (a name per
#: message?) is asked each time instead.
MAX_SPEAKERS = 4_096


def speakers(conn: sqlite3.Connection) -> frozenset[str] | None:
    """Every speaker of the indexed messages, or None when there are more than
    `MAX_SPEAKERS` (the caller keeps it while the messages table is unchanged). None are
    known in an index older than `m104_message_speakers` opened read-only (not migrated)."""
    if not any(row[1] == "speaker" for row in tuples(conn, "PRAGMA table_info(idx_docs)")):
        return frozenset()
    names = [row[0] for row in tuples(conn, _SPEAKERS_SQL, (MAX_SPEAKERS + 1,))]
    return frozenset(names) if len(names) <= MAX_SPEAKERS else None


def named_speakers(conn: sqlite3.Connection, query: str, known: frozenset[str] | None) -> list[str]:
    """The speakers whose whole name the query holds, word for word (folded as
    `speaker_key` folds names); `known` is `speakers(conn)`."""
    if known is not None and not known:
        return []
    longest = NAME_WORDS if known is None else max(name.count(" ") + 1 for name in known)
    words = fold_words(query)[:NAME_SCAN_WORDS]
    grams = {
        " ".join(words[i : i + n])
        for n in range(1, min(longest, NAME_WORDS) + 1)
        for i in range(len(words))
    }
    if known is not None:
        return sorted(grams & known)
    if not grams:
        return []
    sql = _NAMED_SQL.format(marks=",".join("?" * len(grams)))
    return [row[0] for row in tuples(conn, sql, sorted(grams))]


def rescore(
    conn: sqlite3.Connection,
    own: dict[int, float],
    top: list[int],
    speakers: list[str],
    limit: int,
) -> dict[int, float]:
    """New scores of message rows: `own` maps each candidate message to its own score,
    `top` lists the best of them (their first `CONTEXT_OF` are read with their context),
    `speakers` are the ones the question names, `limit` the rows the search returns.

    Returns the rescored rows, among them turns that were no candidate (own score 0) next
    to the best ones; a candidate left out keeps its own score (times the speaker factor).
    """
    scores = dict(own)
    args = {"rows": json_array(top[:CONTEXT_OF]), "n": 2 * CONTEXT_TURNS}
    for row, _, earlier, later in tuples(conn, _AROUND_SQL, args):
        # the rows of this log around `row`, 2 * CONTEXT_TURNS each side: the context of
        # every row within CONTEXT_TURNS of it is among them
        chain = [*_ids(earlier), row, *_ids(later)]
        values = [own.get(r, 0.0) for r in chain]
        at, n = chain.index(row), len(chain)
        for i in range(max(0, at - CONTEXT_TURNS), min(n, at + CONTEXT_TURNS + 1)):
            context = 0.0
            for k, weight in enumerate(_WEIGHTS, start=1):
                if i >= k:
                    context += weight * values[i - k]
                if i + k < n:
                    context += weight * values[i + k]
            scores[chain[i]] = math.hypot(values[i], context)
    if speakers:
        # Only rows that could reach the first `limit` once boosted are looked up: at
        # least `limit` rows already score more than any other row could (in a chat
        # between two people, half the rows are by the named one).
        best = heapq.nlargest(limit, scores.values())
        bar = best[-1] / (1 + SPEAKER_WEIGHT) if len(best) == limit else 0.0
        rows = [row for row, score in scores.items() if score >= bar]
        sql = _SPOKEN_SQL.format(marks=",".join("?" * len(speakers)))
        for (row,) in tuples(conn, sql, (json_array(rows), *speakers)):
            scores[row] *= 1 + SPEAKER_WEIGHT
    return scores


def _ids(text: str | None) -> list[int]:
    """Row ids from `group_concat`, in rowid (= line) order."""
    return sorted(int(x) for x in text.split(",")) if text else []
