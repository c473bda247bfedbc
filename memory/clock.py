"""The one home of memory's UTC time helpers (names, records and file stamps are all UTC).

`utc_now()` is the clock, `iso()` the record form (`2026-11-22T10:30:00.123456Z`, sortable),
`now_iso()` both at once, `today_utc()` the date that episodes and superseded facts carry.
"""

from __future__ import annotations

from datetime import UTC, date, datetime

ISO_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"


def utc_now() -> datetime:
    """The current time, timezone-aware UTC."""
    return datetime.now(UTC)


def iso(moment: datetime) -> str:
    """`moment` as `2026-11-22T10:30:00.123456Z` (converted to UTC first)."""
    return moment.astimezone(UTC).strftime(ISO_FORMAT)


def now_iso() -> str:
    """The current UTC time as `2026-11-22T10:30:00.123456Z`."""
    return iso(utc_now())


def today_utc() -> date:
    """Today's date in UTC."""
    return utc_now().date()
