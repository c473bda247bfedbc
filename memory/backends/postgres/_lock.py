"""A PostgreSQL session advisory lock that outlives a lost connection (`mutex`).

The lock lives as long as the session that took it: the server drops it when that
connection ends, so a crashed holder never leaves it held. The other side of that is a
connection ended under a live holder (`pg_terminate_backend`, a server restart): the lock is
gone while the run goes on. A `LockKeeper` holds the lock on a connection of its own and
checks it every `CHECK_S` seconds; when the connection has gone it reconnects and takes the
lock again (waiting up to `TETHER_PG_RECONNECT_S` for the server), and says so in the log.
If another process took the lock in the meantime, that is logged as an error: two runs of
one task may now overlap, and the operator must know.

A session this process lost may still hold the lock for a moment: the server drops it only
once it sees that session end. So after a lost connection the lock is asked for again for up
to `LOST_SESSION_S` seconds before it counts as another process's: a take whose answer was
lost, or a keeper reconnecting, would otherwise report its own ghost as a second run.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from memory.backends.postgres._sql import TRY_MUTEX_SQL, UNLOCK_MUTEX_SQL
from memory.backends.postgres.connections import lost_errors, reason_of, reconnect_seconds
from memory.contract.base import LockHeldError, wait_for_lock

log = logging.getLogger("tether.postgres")
#: Seconds a lock is asked for again after this process lost a session that may hold it.
LOST_SESSION_S = 5.0


class LockKeeper:
    """Take, keep and release the session lock `name`.

    Args:
        connect: opens a new autocommit connection (raises on failure).
        name: the lock's name.
        url: the server, for messages.
    """

    #: Seconds between the checks that the lock's connection is still there.
    CHECK_S = 2.0

    def __init__(self, connect: Callable[[], Any], name: str, url: str):
        self._connect = connect
        self.name = name
        self.url = url
        self._conn: Any = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.lost = False

    def _try(self) -> bool:
        return bool(self._conn.execute(TRY_MUTEX_SQL, (self.name,)).fetchone()[0])

    def _try_for(self, seconds: float) -> bool:
        """Ask every 10 ms for up to `seconds` (a lost session of ours may still hold it)."""
        try:
            wait_for_lock(self._try, self.name, seconds)
        except LockHeldError:
            return False
        return True

    def take(self, timeout: float) -> None:
        """Wait up to `timeout` seconds for the lock (`LockHeldError` after), then keep it."""
        self._conn = self._connect()
        try:
            wait_for_lock(self._try, self.name, timeout)
        except BaseException:
            self._close()
            raise
        self._thread = threading.Thread(target=self._keep, name="tether-pg-lock", daemon=True)
        self._thread.start()

    def _keep(self) -> None:
        errors = lost_errors()
        while not self._stop.wait(self.CHECK_S):
            if self.lost:
                return
            try:
                if self._conn is None:
                    raise ConnectionError("no connection")
                self._conn.execute("SELECT 1")
                continue
            except (*errors, ConnectionError) as exc:
                reason = reason_of(exc)
            log.warning(
                "the connection holding lock %r ended (%s); taking it again", self.name, reason
            )
            self._retake(errors)

    def _retake(self, errors: tuple[type[BaseException], ...]) -> None:
        deadline = time.monotonic() + reconnect_seconds()
        while not self._stop.is_set():
            self._close()
            try:
                self._conn = self._connect()
                if self._try_for(LOST_SESSION_S):
                    log.warning("lock %r taken again on a new connection", self.name)
                    return
                self.lost = True
                log.error(
                    "lock %r was taken by another process while our connection to %s was "
                    "down: another run of this task may be going on",
                    self.name,
                    self.url,
                )
                return
            except errors:
                pass
            except Exception as exc:  # the connect helper's one-line StorageError
                log.debug("reconnect failed: %s", exc)
            if time.monotonic() > deadline:
                self.lost = True
                log.error("lock %r lost: %s did not come back", self.name, self.url)
                return
            self._stop.wait(1.0)

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        try:
            if self._conn is not None and not self.lost:
                self._conn.execute(UNLOCK_MUTEX_SQL, (self.name,))
        except lost_errors():
            pass  # the server dropped the lock with the connection
        finally:
            self._close()

    def _close(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except Exception:
                pass
            self._conn = None
