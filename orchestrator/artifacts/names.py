"""Names and paths of the orchestrator's files: UTC stamps, slugs, unique names, hidden files.

* Artifact and checkpoint names embed a UTC time `YYYYMMDDTHHMMSSffffffZ` (`timestamp()`),
  so they sort by time; `iso_timestamp()` writes the same instant as ISO 8601 inside files.
* `slug()` makes an agent, phase or subtask name safe in a file name (the exact name stays
  inside the file); ids made from prose (task ids, planned subtask ids) come from
  `memory.text.names.slugify`, and the clock from `memory.clock`.
* `new_suffix()` (6 hex digits) keeps a taken name unique
  (`orchestrator.artifacts.documents.Docs.create_unique`, which never overwrites a document).
* Document paths and the hidden ones (task list, artifact registry) are in
  `orchestrator.artifacts.documents`.

Importing this module is cheap (no pydantic, Jinja or LangGraph): `orchestrator status`
uses it.
"""

from __future__ import annotations

import re
import secrets
from datetime import UTC, datetime
from pathlib import Path

from memory.clock import ISO_FORMAT, utc_now

TS_FORMAT = "%Y%m%dT%H%M%S%fZ"
TS_PATTERN = r"\d{8}T\d{12}Z"
_NAME_TS = re.compile(rf"_(?P<ts>{TS_PATTERN})(?:_(?P<sfx>[0-9a-f]{{6}}))?$")
_SLUG_BAD = re.compile(r"[^A-Za-z0-9._-]+")
MAX_SLUG = 64


# -- time -----------------------------------------------------------------------------
def utc(now: datetime | str | None = None) -> datetime:
    """`now` (default: the current time) as an aware UTC datetime.

    Raises:
        ValueError: a string that is not ISO 8601.
    """
    if now is None:
        return utc_now()
    if isinstance(now, str):
        try:
            now = datetime.fromisoformat(now.replace("Z", "+00:00"))
        except ValueError:
            raise ValueError(
                f"timestamp {now!r} is not ISO 8601; pass e.g. '2025-01-04T12:00:00Z'"
            ) from None
    if now.tzinfo is None:
        now = now.replace(tzinfo=UTC)
    return now.astimezone(UTC)


def timestamp(now: datetime | str | None = None) -> str:
    """UTC time as `YYYYMMDDTHHMMSSffffffZ` (sortable; used in every artifact name)."""
    return utc(now).strftime(TS_FORMAT)


def iso_timestamp(now: datetime | str | None = None) -> str:
    """UTC time as ISO 8601 with microseconds, e.g. `2025-01-04T12:00:00.000000Z`."""
    return utc(now).strftime(ISO_FORMAT)


def name_timestamp(path: Path | str) -> str | None:
    """The `YYYYMMDDTHHMMSSffffffZ` in an artifact's file name, or None."""
    match = _NAME_TS.search(Path(path).stem)
    return match.group("ts") if match else None


# -- names ----------------------------------------------------------------------------
def slug(name: str, fallback: str = "agent", max_len: int = MAX_SLUG) -> str:
    """`name` as a safe file-name part: letters, digits, `.`, `_`, `-`; at most `max_len`."""
    cleaned = _SLUG_BAD.sub("-", str(name)).strip("-._")[:max_len].strip("-._")
    return cleaned or fallback


def new_suffix() -> str:
    """A short random suffix (6 hex digits) that keeps names unique."""
    return secrets.token_hex(3)


def read_text(
    path: Path | str,
    what: str,
    error: type[Exception],
    *,
    missing: str = "check the path",
    encoding: str = "utf-8",
) -> str:
    """The text of a file a person named, or one `error` line saying what is wrong with it.

    Args:
        what: the kind of file, as the messages name it (`workflow file`, `snapshot`).
        missing: what to do when the file does not exist.
    """
    where = str(path)
    try:
        return Path(path).read_text(encoding=encoding)
    except FileNotFoundError:
        raise error(f"{what} {where!r} not found; {missing}") from None
    except IsADirectoryError:
        raise error(f"{what} {where!r} is a directory, not a file") from None
    except UnicodeDecodeError:
        raise error(f"{what} {where!r} is not UTF-8 text") from None
    except OSError as exc:
        raise error(f"cannot read {what} {where!r}: {exc.strerror}") from None
