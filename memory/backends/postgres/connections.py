"""Lost connections to PostgreSQL: reconnect and go on, or one clear error.

A connection can end under a running task: an administrator's `pg_terminate_backend`, a
failover, a server restart. A call that finds its connection dead, or loses it midway, is
run again on a new one (`retrying`: the pool first checks its idle connections and
replaces the dead ones), with a short backoff, for up to `TETHER_PG_RECONNECT_S` seconds (60 by
default); a write that may have landed before the connection went is first asked whether
it did (`landed`), so it is never applied twice. When the server stays away longer, the
call raises one `StorageError` line that names the URL and what was lost; the task's
checkpoints are where they were, so it can be resumed once the server is back.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from typing import Any, TypeVar

from memory.contract.base import StorageError

T = TypeVar("T")
log = logging.getLogger("tether.postgres")
#: What `landed` returns when the write did not happen (so it is run again).
NOT_LANDED: Any = object()
#: Seconds a pool waits for a connection before one retry gives up on it.
CHECKOUT_TIMEOUT_S = 10.0


def reconnect_seconds() -> float:
    """How long calls keep reconnecting (`TETHER_PG_RECONNECT_S`, default 60)."""
    raw = os.environ.get("TETHER_PG_RECONNECT_S", "60")
    try:
        value = float(raw)
    except ValueError:
        raise StorageError(
            f"TETHER_PG_RECONNECT_S must be a number of seconds, not {raw!r}"
        ) from None
    return max(value, 0.0)


def lost_errors() -> tuple[type[BaseException], ...]:
    """The exception classes a lost connection raises (see `is_lost` for which of them)."""
    import psycopg
    from psycopg_pool import PoolTimeout

    return (psycopg.OperationalError, PoolTimeout)


#: Server errors that mean the session ended, not that the statement was wrong: an
#: administrator's or a shutdown's termination, a server still starting.
_LOST_STATES = ("57P01", "57P02", "57P03")


def is_lost(exc: BaseException) -> bool:
    """Whether `exc` means the connection went (retry), not that the server refused the
    statement (a limit, a timeout, a full disk: retrying would not help)."""
    from psycopg_pool import PoolTimeout

    if isinstance(exc, PoolTimeout):
        return True
    state = getattr(exc, "sqlstate", None)
    return state is None or state.startswith("08") or state in _LOST_STATES


def reason_of(exc: BaseException) -> str:
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    return lines[0] if lines else type(exc).__name__


def retrying(
    call: Callable[[], T],
    *,
    url: str,
    landed: Callable[[], Any] | None = None,
    pool: Any = None,
) -> T:
    """`call()`, run again on a lost connection until `reconnect_seconds()` have passed.

    Args:
        call: the whole operation (it takes its own connection from the pool).
        url: the server, for messages (without its password).
        landed: for writes that are not idempotent: after a loss, returns the write's
            result if it was applied, else `NOT_LANDED`.
        pool: the pool `call` takes connections from: after a loss its idle connections
            are checked at once (dead ones replaced), not one checkout at a time.

    Raises:
        StorageError: the server did not come back in time (one line).
    """
    errors = lost_errors()
    budget = reconnect_seconds()
    began, delay, warned, unsure = time.monotonic(), 0.05, False, False
    while True:
        try:
            if unsure:  # the last attempt may have landed: ask before writing again
                result = landed()
                if result is not NOT_LANDED:
                    return result
                unsure = False
            return call()
        except errors as exc:
            if not is_lost(exc):
                raise StorageError(f"{url!r} refused the request ({reason_of(exc)})") from None
            reason = reason_of(exc)
            unsure = landed is not None
        if pool is not None:
            try:
                pool.check()
            except Exception:  # noqa: BLE001 - the next attempt says what is wrong
                pass
        waited = time.monotonic() - began
        if waited >= budget:
            raise StorageError(
                f"lost the connection to {url!r} ({reason}) and it did not come back in "
                f"{budget:.0f} s (TETHER_PG_RECONNECT_S); the task can be resumed once the "
                "server is back"
            )
        if not warned:
            log.warning("connection to %s lost (%s); reconnecting", url, reason)
            warned = True
        time.sleep(min(delay, max(budget - waited, 0.0)))
        delay = min(delay * 2, 2.0)


class _QuietPoolLog(logging.Filter):
    """Drop psycopg's warnings about connections tether is replacing (a dead connection
    discarded, a reconnect attempt failed, a pipeline on a lost connection): `retrying`
    says once, in one line, what happened."""

    NOISE = (
        "discarding closed connection",
        "discarding broken connection",
        "error connecting in 'tether",
        "error ignored terminating",
    )

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith(self.NOISE)


_QUIET = _QuietPoolLog()


def make_pool(url: str, kwargs: dict[str, Any], *, max_size: int, name: str = "tether") -> Any:
    """A `ConnectionPool` on `url`, open and its first connection made. Connections are not
    checked at every checkout (a round trip per call, and the pool's checkout backs off a
    whole second after a failed check): a call that finds its connection dead is retried by
    `retrying`, which first has the pool check its idle connections and replace the dead
    ones."""
    from psycopg_pool import ConnectionPool

    for logger in ("psycopg.pool", "psycopg"):
        if _QUIET not in logging.getLogger(logger).filters:
            logging.getLogger(logger).addFilter(_QUIET)
    timeout = min(CHECKOUT_TIMEOUT_S, max(reconnect_seconds(), 0.5))
    from memory.backends.urls import encode_userinfo

    pool = ConnectionPool(
        encode_userinfo(url),
        kwargs=kwargs,
        min_size=1,
        max_size=max_size,
        open=True,
        name=name,
        timeout=timeout,
    )
    try:
        # the first connection is ready before the first call: a call that had to wait for
        # it would grow the pool by one, and calls would then alternate between two server
        # processes for the pool's life (twice the connections, each with its own caches)
        pool.wait(timeout=timeout)
    except BaseException as exc:
        pool.close()
        if isinstance(exc, lost_errors()):
            from memory.backends.urls import redact

            raise StorageError(
                f"could not connect to {redact(url)!r} in {timeout:.0f} s ({reason_of(exc)})"
            ) from None
        raise
    return pool
