"""PostgreSQL for tests: a private schema per test on the server at 127.0.0.1:5432, dropped after.

When the server is unreachable the test is skipped locally, but FAILS with one clear line
when `CI` is set: a Postgres test must never silently skip in CI.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import quote

import pytest

BASE_URL = os.environ.get("TETHER_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")


def _reachable() -> str | None:
    """`None` if the server answers, else why not."""
    try:
        import psycopg

        psycopg.connect(BASE_URL, connect_timeout=3).close()
    except Exception as exc:  # noqa: BLE001 - any failure means "not reachable"
        return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return None


def require_postgres() -> None:
    problem = _reachable()
    if problem is None:
        return
    line = f"PostgreSQL at {BASE_URL} is unreachable ({problem}); start it (see .ci/run)"
    if os.environ.get("CI"):
        pytest.fail(line, pytrace=False)
    pytest.skip(line)


@contextmanager
def private_schema() -> Iterator[str]:
    """A URL whose `search_path` is a fresh schema, dropped (with everything in it) after."""
    import psycopg

    require_postgres()
    schema = f"tether_test_{os.getpid()}_{secrets.token_hex(4)}"
    with psycopg.connect(BASE_URL, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    sep = "&" if "?" in BASE_URL else "?"
    try:
        yield f"{BASE_URL}{sep}options={quote(f'-csearch_path={schema}')}"
    finally:
        with psycopg.connect(BASE_URL, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
