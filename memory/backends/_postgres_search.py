"""Search on PostgreSQL: which rows to rank, and the row counts that weigh the words.

Helpers of `PostgresBackend.index_query` (`memory.backends.postgres`).
"""

from __future__ import annotations

import re
import threading
import time
from typing import Any

#: Words as the index splits them: runs of letters and digits (`auth_service` is two words).
ALNUM = re.compile(r"[^\W_]+")
#: A word in more rows than this is common: its rows are candidates only beside another word.
COMMON_DF = 5000
#: A search row of a part of a long text (`search_parts`): `...#p2#L12` is `...#L12`.
PART_ID = re.compile(r"#p\d+(?=#L\d+$|$)")
#: Rows fetched beyond the limit, so parts of one text collapsing into one hit leave enough.
PARTS_SLACK = 8
#: Seconds a common word's row count (and the table's) is reused (`CountCache`).
COUNT_TTL_S = 10.0
#: Common words paired with each other among the candidates (the rarest of them first).
MAX_PAIRED = 4


def candidate_query(lexemes: list[str], dfs: list[int]) -> str:
    """The `to_tsquery` text of the rows worth ranking for `lexemes` (rarest first, with
    their document counts): any of the rare words, taken while their counts add up to at
    most `COMMON_DF`, or any two of the next words together. Ranking every row holding a
    common word is what made a search cost seconds on a large table; a row holding only one
    common word ranks below these anyway."""
    rare, budget = [], 0
    for lexeme, df in zip(lexemes, dfs, strict=True):
        if rare and budget + df > COMMON_DF:
            break
        rare.append(lexeme)
        budget += df
    common = lexemes[len(rare) :][:MAX_PAIRED]
    pairs = [f"({a} & {b})" for i, a in enumerate(common) for b in common[i + 1 :]]
    return " | ".join(rare + pairs)


class CountCache:
    """Row counts of common words (and of the whole table) for `COUNT_TTL_S` seconds.

    Counting the rows of a word in thousands of them walks every one (a GIN index cannot
    answer a count from the index alone): 5 ms of a 10 ms search at 16K messages. A common
    word's count, and so its weight, hardly moves in seconds; a rare word is counted at
    every search (it is cheap, and a new row changes its weight).
    """

    def __init__(self) -> None:
        self._items: dict[Any, tuple[float, Any]] = {}
        self._lock = threading.Lock()

    def get(self, key: Any) -> Any:
        with self._lock:
            item = self._items.get(key)
        if item is None or time.monotonic() - item[0] > COUNT_TTL_S:
            return None
        return item[1]

    def put(self, key: Any, value: Any, *, large: bool) -> None:
        if not large:
            return
        with self._lock:
            if len(self._items) > 10_000:
                self._items.clear()
            self._items[key] = (time.monotonic(), value)
