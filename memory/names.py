"""The one home of memory's name helpers: slugs for file names derived from titles."""

from __future__ import annotations

import re

_SLUG_RE = re.compile(r"[^a-z0-9]+")


def slugify(text: str, max_len: int = 60, *, fallback: str = "note") -> str:
    """A file-name-safe slug of `text` (`"Auth design!"` -> `"auth-design"`)."""
    slug = _SLUG_RE.sub("-", text.lower()).strip("-")[:max_len].strip("-")
    return slug or fallback
