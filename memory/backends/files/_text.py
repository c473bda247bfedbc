"""Text as the index sees it, for the query planner (`_planner`): tokens, stems, snippets.

* `TEMP_SETUP` makes per-connection TEMP FTS5 tables (`porter unicode61`, and plain
  `unicode61` for the unstemmed forms) whose `fts5vocab` 'instance' views tokenize any text
  exactly like the index: the query (`tokenize_query`) and rows that are not ASCII.
* ASCII rows are split in Python (`ascii_words`, unicode61's split and case folding on
  ASCII) and their words stemmed through a process-wide cache (`stem_words`), ~5x cheaper than
  filling the TEMP tables.
* `fts_totals` and `varints` read FTS5's own records (row and token totals, docsizes).
* `snippet` cuts ~`SNIPPET_CHARS` around the densest matches, on one line.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import math
import re
import sqlite3
import unicodedata
from collections.abc import Collection

from memory.backends.files._index_schema import indexable, json_array
from memory.text.words import STOPWORDS

#: A row longer than this is tokenized by the TEMP FTS5 tables (in C, whole) rather than
#: split in Python; its snippet then centres on one of its first `SNIPPET_HITS` matches.
SPLIT_MAX_CHARS = 20_000
SNIPPET_HITS = 64
SNIPPET_CHARS = 300
_CHUNK_CHARS = 1 << 20
CLEAR_TOK = "INSERT INTO temp.rq_tok(rq_tok) VALUES ('delete-all')"
CLEAR_RAW = "INSERT INTO temp.rq_raw(rq_raw) VALUES ('delete-all')"
_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_NEWLINE = re.compile("\n")
_GAP = re.compile(r"[\W_]")  # a character no token holds

TEMP_SETUP = (
    "PRAGMA temp_store = MEMORY",
    "CREATE VIRTUAL TABLE IF NOT EXISTS temp.rq_tok USING fts5(body, content = '', "
    "columnsize = 0, tokenize = 'porter unicode61')",
    "CREATE VIRTUAL TABLE IF NOT EXISTS temp.rq_inst USING fts5vocab(temp, rq_tok, instance)",
    # The same rows unstemmed, token for token (porter only rewrites unicode61's tokens):
    # which matches are in the query's own word form.
    "CREATE VIRTUAL TABLE IF NOT EXISTS temp.rq_raw USING fts5(body, content = '', "
    "columnsize = 0, tokenize = 'unicode61')",
    "CREATE VIRTUAL TABLE IF NOT EXISTS temp.rq_raw_inst USING fts5vocab(temp, rq_raw, instance)",
)


def tuples(conn: sqlite3.Connection, sql: str, args=()) -> sqlite3.Cursor:
    """`conn.execute` with plain tuples for rows (the connection makes `sqlite3.Row`s)."""
    cur = conn.cursor()
    cur.row_factory = None
    return cur.execute(sql, args)


def tokenize(conn: sqlite3.Connection, text: str, *, filled: bool = False) -> list[tuple[str, str]]:
    """`(stem, surface word)` pairs of `text`, tokenized exactly like the index."""
    if not filled:
        fill_tok(conn, [(1, text)])
    stems = [
        row[0]
        for row in conn.execute("SELECT term FROM temp.rq_inst WHERE doc = 1 ORDER BY offset")
    ]
    words = _WORD.findall(text)
    if len(words) != len(stems):
        words = stems
    return list(zip(stems, words, strict=True))


def tokenize_query(conn: sqlite3.Connection, text: str) -> tuple[list[tuple[str, str]], list[str]]:
    """`tokenize(text)`, and each token unstemmed as unicode61 gives it (case-folded).

    An ASCII query is split in Python and its words stemmed through `stem_words`' cache,
    as ASCII rows are in a re-rank; other text goes through the TEMP tables.
    """
    if text.isascii():
        words = ascii_words(text, fold=False)
        raw = [word.lower() for word in words]
        stems = stem_words(conn, set(raw))
        return [(stems[form], word) for form, word in zip(raw, words, strict=True)], raw
    fill_tok(conn, [(1, text)], raw=True)
    pairs = tokenize(conn, text, filled=True)
    raw = [
        row[0]
        for row in tuples(conn, "SELECT term FROM temp.rq_raw_inst WHERE doc = 1 ORDER BY offset")
    ]
    if len(raw) != len(pairs):  # cannot happen (same tokenizer); keep the words then
        raw = [word.lower() for _, word in pairs]
    return pairs, raw


_FILL = (  # `[[rowid, text], ...]` as one JSON array (see `json_array`)
    "INSERT INTO {table}(rowid, body) "
    "SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]') FROM json_each(?)"
)


def fill_tok(
    conn: sqlite3.Connection,
    rows: list[tuple[int, str]],
    *,
    raw: bool = False,
    stems_only: Collection[int] = (),
) -> None:
    """Replace the TEMP tokenizer table's rows (one transaction: FTS5 flushes once); `raw`
    fills the unstemmed table with the same rows too, but those whose id is in
    `stems_only`."""
    conn.execute("SAVEPOINT rq_fill")
    try:
        conn.execute(CLEAR_TOK)
        pairs = json_array([[rowid, indexable(text)] for rowid, text in rows])
        conn.execute(_FILL.format(table="temp.rq_tok"), (pairs,))
        if raw:
            if stems_only:
                kept = [[rowid, indexable(text)] for rowid, text in rows if rowid not in stems_only]
                pairs = json_array(kept)
            conn.execute(CLEAR_RAW)
            conn.execute(_FILL.format(table="temp.rq_raw"), (pairs,))
        conn.execute("RELEASE rq_fill")
    except BaseException:
        conn.execute("ROLLBACK TO rq_fill")
        conn.execute("RELEASE rq_fill")
        raise


_STOP_STEMS: frozenset[str] | None = None


def stopword_stems(conn: sqlite3.Connection) -> frozenset[str]:
    global _STOP_STEMS
    if _STOP_STEMS is None:
        _STOP_STEMS = frozenset(stem for stem, _ in tokenize(conn, " ".join(STOPWORDS)))
    return _STOP_STEMS


#: Stem of each lowercased ASCII word seen in a re-rank (porter is a pure function of the
#: word, so this holds across databases); cleared when it reaches `STEM_CACHE_SIZE`.
_STEMS: dict[str, str] = {}
STEM_CACHE_SIZE = 200_000


#: unicode61 on ASCII: letters and digits are token characters (folded to lower case),
#: every other byte separates tokens.
_ASCII_SPLIT = bytes(c if chr(c).isalnum() else 32 for c in range(128)) + bytes(128)
_ASCII_FOLD = _ASCII_SPLIT.lower()


def ascii_words(text: str, *, fold: bool = True) -> list[str]:
    """The tokens unicode61 makes of an ASCII `text`, case-folded (5x `_WORD.findall`);
    `fold=False` keeps their case (the surface words `tokenize` pairs with stems)."""
    table = _ASCII_FOLD if fold else _ASCII_SPLIT
    return text.encode("ascii").translate(table).decode("ascii").split()


@functools.lru_cache(maxsize=4096)
def speaker_key(name: str) -> str | None:
    """How a message's speaker (its `name`) is stored and matched: its words folded (lower
    case, no diacritics, as unicode61 folds them) joined by one space; None without words.

    A chat log repeats a few names, hence the cache."""
    return " ".join(fold_words(name)) or None


def fold_words(text: str) -> list[str]:
    """`text`'s words, lower case and without diacritics ("José" -> "jose")."""
    if text.isascii():
        return ascii_words(text)
    plain = "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))
    return _WORD.findall(plain.lower())


#: Every ASCII byte as `a` (a token character: a letter or a digit) or a space.
_ASCII_MARK = bytes(ord("a") if chr(c).isalnum() else 32 for c in range(128)) + bytes(128)


def count_words(text: str) -> int:
    """How many tokens `text` holds, as `_WORD` finds them (unicode61's split on ASCII): in
    C for ASCII (the starts of runs of token characters), without a list of the words."""
    if not text.isascii():
        return sum(1 for _ in _WORD.finditer(text))
    marks = b" " + text.encode("ascii").translate(_ASCII_MARK)
    return marks.count(b" a")


def stem_words(
    conn: sqlite3.Connection, words: set[str], keep: set[str] | None = None
) -> dict[str, str]:
    """`{word: stem}` for lowercased ASCII words (`[a-z0-9]+`), unknown ones stemmed in one
    pass through the TEMP tokenizer table (one token per word); with `keep`, only the words
    whose stem is in it."""
    cache = _STEMS
    new = [w for w in words if w not in cache]
    if new:
        if len(cache) + len(new) > STEM_CACHE_SIZE:
            cache.clear()
        fill_tok(conn, [(1, " ".join(new))])
        got = [row[0] for row in tuples(conn, "SELECT term FROM temp.rq_inst ORDER BY offset")]
        if len(got) != len(new):  # cannot happen (one token per word); keep the words then
            got = new
        cache.update(zip(new, got, strict=True))
    if keep is not None:
        return {w: stem for w in words if (stem := cache[w]) in keep}
    return {w: cache[w] for w in words}


def fts_totals(conn: sqlite3.Connection, table: str) -> tuple[int, int]:
    """`(rows, tokens)` of an FTS5 table, read from its 'averages' record (no scan)."""
    row = conn.execute(f"SELECT block FROM {table}_data WHERE id = 1").fetchone()
    if not row or not row[0]:
        return 0, 0
    values = varints(row[0])
    return values[0], (values[1] if len(values) > 1 else 0)


def varints(blob: bytes) -> list[int]:
    """Decode SQLite's big-endian varints (as used by FTS5's shadow tables)."""
    out, i = [], 0
    while i < len(blob):
        value = 0
        for n in range(9):
            byte = blob[i]
            i += 1
            if n == 8:
                value = (value << 8) | byte
                break
            value = (value << 7) | (byte & 0x7F)
            if not byte & 0x80:
                break
        out.append(value)
    return out


def near(positions: list[tuple[int, str]], tokens: int) -> bool:
    """Whether two different query terms occur within `tokens` tokens of each other
    (`positions` in offset order)."""
    last: dict[str, int] = {}
    for offset, term in positions:
        for other, where in last.items():
            if other != term and offset - where <= tokens:
                return True
        last[term] = offset
    return False


def snippet(body: str, positions: list[tuple[int, str]], idf: dict[str, float]) -> tuple[str, int]:
    """About `SNIPPET_CHARS` of `body` around the densest matches, on one line.

    Returns the snippet and the character offset of the first match it centres on.
    """
    hits = _hit_starts(body, positions)
    if not hits:
        return _one_line(body[:SNIPPET_CHARS], False, len(body) > SNIPPET_CHARS), 0
    # The best line holds the most (rarest) distinct terms; the snippet starts near it.
    reach = max(start for start, _ in hits) + 1
    newlines = [m.start() for m in _NEWLINE.finditer(body, 0, reach)]
    by_line: dict[int, tuple[int, set[str]]] = {}
    for start, term in hits:
        line = bisect.bisect_left(newlines, start)
        first, seen = by_line.get(line, (start, set()))
        seen.add(term)
        by_line[line] = (first, seen)
    if len(by_line) == 1:
        (best_line,) = by_line
    else:
        best_line = max(
            by_line, key=lambda n: (math.fsum(idf.get(t, 1.0) for t in by_line[n][1]), -n)
        )
    best_at = by_line[best_line][0]
    # Start at the cited line, so the snippet reads from where the citation points.
    lo = newlines[best_line - 1] + 1 if best_line > 0 else 0
    if best_at - lo > SNIPPET_CHARS // 2:
        lo = best_at - SNIPPET_CHARS // 5
    hi = min(len(body), lo + SNIPPET_CHARS)
    return _one_line(body[lo:hi], lo > 0 and body[lo - 1] != "\n", hi < len(body)), best_at


def _hit_starts(body: str, positions: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """`(character offset, term)` of the matches at `positions` (token offsets); in a body
    longer than `SPLIT_MAX_CHARS`, of its first `SNIPPET_HITS` matches."""
    if not positions:
        return []
    if len(body) <= SPLIT_MAX_CHARS:
        words = _WORD.finditer(body)  # up to the last match only
        spans = [m.start() for m in itertools.islice(words, max(o for o, _ in positions) + 1)]
        return [(spans[o], t) for o, t in positions if o < len(spans)]
    first = sorted(positions)[:SNIPPET_HITS]
    starts = token_starts(body, {o for o, _ in first})
    return [(starts[o], t) for o, t in first if o in starts]


def token_starts(body: str, offsets: set[int]) -> dict[int, int]:
    """`{token offset: character offset}` for `offsets`, reading `body` in chunks of
    `_CHUNK_CHARS` (each cut where no word goes on) whose tokens are counted in C: only
    the chunks holding a wanted token are walked word by word (a match at the end of a
    100 MB message costs a count of its words, not a Python step for each)."""
    wanted = sorted(offsets)
    starts: dict[int, int] = {}
    at = seen = pos = 0
    while at < len(wanted) and pos < len(body):
        end = pos + _CHUNK_CHARS
        if end < len(body):
            gap = _GAP.search(body, end)
            end = gap.start() if gap else len(body)
        chunk = body[pos:end]
        count = count_words(chunk)
        if wanted[at] < seen + count:
            for n, m in enumerate(_WORD.finditer(chunk), start=seen):
                if n == wanted[at]:
                    starts[n] = pos + m.start()
                    at += 1
                    if at == len(wanted) or wanted[at] >= seen + count:
                        break
        seen += count
        pos = end
    return starts


def _one_line(text: str, cut_left: bool, cut_right: bool) -> str:
    text = " ".join(text.split())  # runs of whitespace (str.isspace, as `\s` matches) as one space
    return ("…" if cut_left else "") + text + ("…" if cut_right else "")
