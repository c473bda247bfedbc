"""Days a question names (`memory.search.when.question_days`), as recall reads them."""

from __future__ import annotations

from datetime import date

import pytest

from memory.search.when import question_days

TODAY = date(2026, 11, 23)


@pytest.mark.parametrize(
    "text,days",
    [
        ("What did we decide on March 3?", {"2026-03-03"}),
        ("the 3rd of March 2025", {"2025-03-03"}),
        ("Sept 9th", {"2026-09-09"}),
        ("logs from 2026-01-05", {"2026-01-05"}),
        ("what broke yesterday", {"2026-11-22"}),
        ("what broke today", {"2026-11-23"}),
        ("on December 25", {"2025-12-25"}),  # no year: the latest one not after today
        ("May 5 and Jun 1", {"2026-05-05", "2026-06-01"}),
        ("I may 5 times retry", set()),  # "may" the verb is no month
        ("on February 30", set()),
        ("in March", set()),  # a month alone names no day
        ("error 2026-13-45", set()),
    ],
)
def test_question_days(text, days):
    assert question_days(text, TODAY) == days
