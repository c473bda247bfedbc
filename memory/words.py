"""Words that carry no topic: the one stopword list, and the keywords of a text.

`STOPWORDS` (English function words and contraction tails) is what recall drops from a query,
what `keywords()` skips, and what an episode summary trims from the end of a phrase.
`LOG_WORDS` are words every conversation log is full of, so they name no topic of one.
"""

from __future__ import annotations

import re

STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be because been
before being below between both but by can could did do does doing down during each few for
from further had has have having he her here hers herself him himself his how i if in into is
it its itself just me more most my myself no nor not now of off on once only or other our ours
ourselves out over own same she should so some such than that the their theirs them
themselves then there these they this those through to too under until up very was we were
what when where which while who whom why will with would you your yours yourself yourselves
also get got let lets us ever whether there's what's anything something
didn doesn don isn wasn weren aren won wouldn couldn shouldn hasn haven hadn
t s d ll m re ve""".split()
)
#: Words that frame a question about a conversation ("what made ...", "why didn't we go with
#: ...", "remind me ...") rather than name its topic; recall weighs them less in a question.
QUESTION_WORDS = frozenset(
    """made make makes go goes went gone happen happened happens remind remember recall tell
told say said mention mentioned know think thought again ever exactly really actually anyone
someone kind thing things way wonder""".split()
)
LOG_WORDS = frozenset("user assistant tool please turn summary messages jsonl".split())

_KEYWORD_RE = re.compile(r"[A-Za-z][A-Za-z0-9_./-]{3,}")


def keywords(text: str, count: int = 6) -> list[str]:
    """The most frequent significant words of `text` (for a note's or summary's META block)."""
    tally: dict[str, int] = {}
    for word in _KEYWORD_RE.findall(text):
        word = word.lower().strip("./-")
        if (
            len(word) > 3
            and word not in STOPWORDS
            and word not in LOG_WORDS
            and not word.startswith("summary-")
        ):
            tally[word] = tally.get(word, 0) + 1
    return [w for w, _ in sorted(tally.items(), key=lambda kv: -kv[1])[:count]]
