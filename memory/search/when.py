"""Days named in a question: "on March 3", "3 March 2026", "2026-03-03", "yesterday", "today".

`question_days(text, today)` returns the ISO days (`YYYY-MM-DD`) a question asks about, so
recall can prefer the messages written on them (each logged message carries its UTC `ts`).
A day without a year is the latest such day not after `today`. Nothing here guesses at
vaguer phrases ("last week", "recently"): a wrong day would push the right turn down.
"""

from __future__ import annotations

import re
from datetime import date, timedelta

MONTHS = {
    name: number
    for number, names in enumerate(
        [
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ],
        start=1,
    )
    for name in names
}
#: Month names that are also English words count only when capitalised.
_ALSO_WORDS = frozenset({"may", "mar"})
_MONTH = "|".join(sorted(MONTHS, key=len, reverse=True))
_DAY = r"(?P<day{n}>[0-3]?\d)(?:st|nd|rd|th)?"
_YEAR = r"(?:,?\s+(?P<year{n}>(?:19|20)\d\d))?"
_PATTERNS = [
    re.compile(r"\b(?P<iso>(?:19|20)\d\d-[01]\d-[0-3]\d)\b"),
    re.compile(rf"\b(?P<month1>{_MONTH})\.?\s+{_DAY.format(n=1)}\b{_YEAR.format(n=1)}", re.I),
    re.compile(
        rf"\b{_DAY.format(n=2)}\s+(?:of\s+)?(?P<month2>{_MONTH})\b{_YEAR.format(n=2)}", re.I
    ),
    re.compile(r"\b(?P<relative>yesterday|today)\b", re.I),
]


def question_days(text: str, today: date) -> set[str]:
    """The ISO days `text` names (see the module docstring); empty when it names none."""
    days: set[str] = set()
    for pattern in _PATTERNS:
        for match in pattern.finditer(text):
            found = _day_of(match.groupdict(), today)
            if found is not None:
                days.add(found.isoformat())
    return days


def _day_of(groups: dict[str, str | None], today: date) -> date | None:
    if groups.get("iso"):
        try:
            return date.fromisoformat(groups["iso"])
        except ValueError:
            return None
    if groups.get("relative"):
        return today if groups["relative"].lower() == "today" else today - timedelta(days=1)
    n = "1" if groups.get("month1") else "2"
    word = groups[f"month{n}"]
    if word.lower() in _ALSO_WORDS and not word[0].isupper():
        return None  # "I may 5 times": only "May 5" is a day
    month = MONTHS[word.lower()]
    day = int(groups[f"day{n}"])
    year = groups.get(f"year{n}")
    try:
        if year:
            return date(int(year), month, day)
        found = date(today.year, month, day)
        return found if found <= today else date(today.year - 1, month, day)
    except ValueError:  # "February 30"
        return None
