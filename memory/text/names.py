"""The one home of the slug made from prose: file names from titles, ids from objectives."""

from __future__ import annotations

import re

_SLUG_RE = re.compile(r"[^a-z0-9]+")


def slugify(
    text: str, max_len: int = 60, *, fallback: str = "note", words: int | None = None
) -> str:
    """A file-name-safe slug of `text` (`"Auth design!"` -> `"auth-design"`): its lowercase
    words joined by `-`, the first `words` of them when given, cut to `max_len`."""
    slug = _SLUG_RE.sub("-", text.lower()).strip("-")
    if words is not None:
        slug = "-".join(slug.split("-")[:words])
    slug = slug[:max_len].strip("-")
    return slug or fallback
