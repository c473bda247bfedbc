"""The offline model's words: the content words of an objective or a title (stop words,
question framing and the lead's area marks dropped) and the crude stems that both its
searches (`gitignor|overrid|hidden`) and its comparisons of names and paths use.

Pure functions of their text, shared by `evidence`, `planning`, `policy` and `wording`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

_WORD_RE = re.compile(r"[a-z0-9]+")
#: A name with its version after a slash is one word, as code spells it: `HTTP/2` -> `http2`.
_VERSIONED_RE = re.compile(r"\b([a-z]+)/(\d)\b")
_STOPWORDS = frozenset(
    """a an and are as at be by can do does for from has have how in into is it its of on or
    the this that these those to was what when where which who why will with without all any
    each about should could would may might must not no yes our your their them they we you
    survey explore exploration map find check review plan planning implement implementation
    code project repo repository package module modules file files folder folders work task
    look make use using used write read describe explain understand main new add get set
    tether workdir
    fit fits fitting together overall whole part parts piece pieces thing things stuff also
    just like well one ones other others more most some such than then there here over
    give tell show identify change changes study
    handle handled handles handling decide decides decided determine determines determined
    choose chooses chose chosen risk risks win wins won same break breaks called defined
    passed passes passing support supports supported supporting
    take takes taking took taken given
    happen happens happened
    whether either neither although though unless whereas whom whose however therefore
    instead rather really actually mainly mostly usually often very even still shall upon
    onto within through during across between below above""".split()
)
#: What the lead adds to an area's name (`gson (top level)`, `top-level files 11-20`,
#: `hooks (other than slog)`): words of the plan, not of the objective.
_AREA_MARKS_RE = re.compile(
    r"\s*\((?:top level|other than)[^)]*\)|\btop-level files(?: \d+-\d+)?", re.IGNORECASE
)
#: `route-level middleware` is middleware of a route: its `level` names no level.
_LEVEL_OF_RE = re.compile(r"(?<=\w)-level\b", re.IGNORECASE)


def area_subject(name: str) -> str:
    """An area's name or a text naming areas without the lead's marks (`gson (top level)`
    is `gson`)."""
    return _AREA_MARKS_RE.sub("", name)


def words(text: str) -> list[str]:
    """Lower-case content words of `text` (stop words, their other forms such as
    `implemented`, short words and the marks of area names dropped), in order."""
    seen: dict[str, None] = {}
    text = _LEVEL_OF_RE.sub("", area_subject(text))
    for w in _WORD_RE.findall(_VERSIONED_RE.sub(r"\1\2", text.lower())):
        if len(w) >= 3 and w not in _STOPWORDS and not w.isdigit() and stem(w) not in _STOP_STEMS:
            seen.setdefault(w, None)
    return list(seen)


def named_in(goal: set[str], path_words: set[str]) -> set[str]:
    """The goal stems a path's words name: the same stem, or (for stems of five letters or
    more) a longer word it begins (`import` names `importlib`, `schedul` `scheduler`)."""
    return {
        g
        for g in goal
        if g in path_words or (len(g) >= 5 and any(w.startswith(g) for w in path_words))
    }


def stem(word: str) -> str:
    """A crude suffix stripper so `invoices`, `invoice` and `taxed`, `tax` meet. A final
    `e`/`es` stays on a short word: `tree` and `trees` are `tree` (a search for `tre`
    finds "street" and "retrieve"); see `_verb_base` for `-ed` and `-ing`."""
    for suffix in ("ing", "ed", "es", "s", "e"):
        keep = 4 if suffix in ("es", "e") else 3
        if word.endswith(suffix) and len(word) - len(suffix) >= keep:
            base = word[: -len(suffix)]
            if suffix in ("ing", "ed"):
                return _verb_base(word, base)
            return base
    return word


def _verb_base(word: str, base: str) -> str:
    """What is left of `word` without its `-ed`/`-ing`: `string` stays (no vowel in
    `str`), a doubled consonant is one (`logged`: `log`; `called`: `call`), and a short
    consonant-vowel-consonant base gets its `e` back (`fired`: `fire`, not `fir`)."""
    if not re.search("[aeiouy]", base):
        return word
    if len(base) >= 4 and base[-1] == base[-2] in "bdgmnprt":
        return base[:-1]
    if len(base) == 3 and re.fullmatch("[^aeiou][aeiou][^aeiouwxy]", base):
        return base + "e"
    return base


#: Stems of the stop words: `implemented` and `described` are as empty as `implement`.
_STOP_STEMS = frozenset(stem(w) for w in _STOPWORDS if len(w) >= 5)


def stems(text: str) -> set[str]:
    """Stems of the content words of `text`."""
    return {stem(w) for w in words(text)}


#: A short word searched as a word of its own: no letter on either side (`res.location`,
#: `is_nan`, `NaN` hold one; "express" and "response" do not).
_WHOLE_RE = re.compile(r"^\(\?<!\[a-z\]\)(.+)\(\?!\[a-z\]\)$")


def whole(word: str) -> str:
    """`word` as a search term for itself alone (`(?<![a-z])res(?![a-z])`, the grep being
    case-insensitive): a short word said in the objective (`res`, `NaN`) is no part of
    "express" or "response", though it is of the name `is_nan`; a stem (`invoic`, `tax`
    of "taxed") is searched anywhere, to find its other forms."""
    return rf"(?<![a-z]){re.escape(word)}(?![a-z])"


def is_whole(term: str) -> bool:
    """Is `term` a `whole` word (not a stem searched anywhere)?"""
    return _WHOLE_RE.match(term) is not None


def bare(term: str) -> str:
    """The word of a search term (`res` of a `whole` word, `invoic` of `invoic`)."""
    m = _WHOLE_RE.match(term)
    return re.sub(r"\\(.)", r"\1", m.group(1)) if m else term


def terms_pattern(terms: Sequence[str]) -> str:
    """One grep for any of `terms` (stems: `gitignor|overrid|hidden`; `whole` words as
    they are)."""
    return "|".join(t if is_whole(t) else re.escape(t) for t in terms)


def pattern_terms(pattern: str) -> list[str]:
    """The terms of a `terms_pattern` grep, as they were given."""
    return [p if is_whole(p) else re.sub(r"\\(.)", r"\1", p) for p in pattern.split("|")]


def shown(pattern: str) -> str:
    """A `terms_pattern` grep as findings quote it: its words, with the ones searched as
    words of their own named (`'location|res|redirect' (res as a word)`)."""
    terms = pattern_terms(pattern)
    alone = [bare(t) for t in terms if is_whole(t)]
    if not alone:
        return f"'{pattern}'"
    note = f" ({', '.join(alone)} as {'a word' if len(alone) == 1 else 'words'})"
    return "'" + "|".join(bare(t) if is_whole(t) else t for t in terms) + "'" + note


def holds(term: str, text: str) -> bool:
    """Does lower-case `text` hold `term` as the grep for it finds it?"""
    if is_whole(term):
        return re.search(term, text) is not None
    return term in text


def _path_words(path: str) -> set[str]:
    """Stems of every word of a path (no stop-word filtering: `core`, `cli` count)."""
    return {stem(w) for w in _WORD_RE.findall(path.lower())}
