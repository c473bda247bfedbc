"""Words that carry no topic: the one stopword list, and the keywords of a text.

`STOPWORDS` (English function words and contraction tails) is what recall drops from a query,
what `keywords()` skips, and what an episode summary trims from the end of a phrase.
`LOG_WORDS` are words every conversation log is full of, so they name no topic of one.
`verb_forms()` gives the forms of an English irregular verb ("meet" / "met"), which no
stemmer brings together.
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

#: English irregular verbs, present, past and past participle, whose forms the porter
#: stemmer leaves apart ("went" is no form of "go" to it): a question asks "did he go",
#: the log says "he went". Left out: verbs that are stopwords (be, have, do, get), forms
#: spelled alike (cut, put, read), and verbs whose forms are as often other words
#: ("lay", "lie", "ring", "wound", "ground", "bear", "mean", "lead", "spring", "rose",
#: "won" as in "won't").
_IRREGULAR_VERBS = """
arise arose arisen; awake awoke awoken; become became; begin began begun; bend bent;
bite bit bitten; bleed bled; blow blew blown; break broke broken; breed bred;
bring brought; build built; burn burnt; buy bought; catch caught; choose chose chosen;
cling clung; come came; creep crept; deal dealt; dig dug; draw drew drawn; dream dreamt;
drink drank drunk; drive drove driven; eat ate eaten; fall fell fallen; feed fed;
feel felt; fight fought; find found; flee fled; fly flew flown; forbid forbade forbidden;
forget forgot forgotten; forgive forgave forgiven; freeze froze frozen; give gave given;
go went gone; grow grew grown; hang hung; hear heard; hide hid hidden; hold held;
keep kept; kneel knelt; know knew known; leap leapt; learn learnt; leave left; lend lent;
lose lost; make made; meet met; pay paid; ride rode ridden; rise risen; run ran; say said;
see saw seen; seek sought; sell sold; send sent; shake shook shaken; shine shone;
shoot shot; show shown; shrink shrank shrunk; sing sang sung; sit sat; sleep slept;
slide slid; speak spoke spoken; speed sped; spend spent; spin spun; stand stood;
steal stole stolen; strike struck; strive strove striven; swear swore sworn; sweep swept;
swim swam swum; swing swung; take took taken; teach taught; tell told; think thought;
throw threw thrown; understand understood; wake woke woken; wear wore worn;
weave wove woven; weep wept; write wrote written
"""
_VERB_FORMS = {
    form: tuple(forms)
    for forms in (group.split() for group in _IRREGULAR_VERBS.split(";"))
    for form in forms
}


def verb_forms(word: str) -> tuple[str, ...]:
    """Every form of the irregular verb `word` is one of (lower case, `word` among them),
    or `()`: `verb_forms("met") == ("meet", "met")`."""
    return _VERB_FORMS.get(word.lower(), ())


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
