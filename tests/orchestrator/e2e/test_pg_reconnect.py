"""PostgreSQL connections that end under a running task (a failover, a restart,
`pg_terminate_backend`): tether reconnects and goes on, never applies a write twice, keeps
its run lock, and only when the server stays away says so in one line, leaving a task that
resumes.

Connections go through a TCP proxy (`tests.tcp_proxy`) that drops them, or refuses new ones,
on purpose; the real server other tests use is never touched.
"""

from __future__ import annotations

import threading
import time
from urllib.parse import urlsplit

import psycopg
import pytest

from memory.backends.postgres import PostgresBackend
from memory.contract.base import LockHeldError, StorageError
from memory.store import MemoryStore
from memory.task.working import WorkingMemory
from orchestrator.api import Orchestrator
from tests.pg import BASE_URL, private_schema
from tests.tcp_proxy import TcpProxy


@pytest.fixture
def proxied():
    """(proxy, URL through the proxy, direct URL) on a private schema."""
    with private_schema() as url:
        target = urlsplit(BASE_URL)
        proxy = TcpProxy((target.hostname or "127.0.0.1", target.port or 5432))
        try:
            yield proxy, proxy.url(url), url
        finally:
            proxy.stop()


class Dropper:
    """Drops every proxied connection every `every` seconds while in use."""

    def __init__(self, proxy: TcpProxy, every: float):
        self.proxy, self.every, self.drops = proxy, every, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            if self.proxy.connections():
                self.proxy.drop()
                self.drops += 1

    def __enter__(self) -> Dropper:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def test_appends_and_searches_go_on_while_connections_are_dropped(proxied):
    proxy, through, direct = proxied
    store = MemoryStore.from_url(through)
    memory = WorkingMemory(store, "t1")
    memory.ensure()
    lines = []
    with Dropper(proxy, 0.3) as dropper:
        while dropper.drops < 4:  # appends and searches go on through four drops
            n = len(lines)
            lines.append(memory.append_message("assistant", f"message {n} zebra{n}"))
            if n % 25 == 0:
                assert store.search(f"zebra{n}", scope="messages", limit=3)
            assert n < 100_000, "the dropper never dropped a connection"
    store.backend.close()
    count = len(lines)
    assert lines == list(range(1, count + 1))  # every append answered with its own line
    with MemoryStore.from_url(direct) as check:
        texts = [m.content for m in WorkingMemory(check, "t1").messages()]
    assert texts == [f"message {n} zebra{n}" for n in range(count)]  # once each, in order


def test_a_write_whose_answer_was_lost_is_not_applied_twice(proxied, monkeypatch):
    """The connection ends after the server applied a write and before the answer came
    back: the retry asks whether it landed instead of writing again."""
    from memory.backends.postgres import DocumentsMixin
    from memory.backends.postgres import PostgresBackend as Backend

    _proxy, through, _direct = proxied
    backend = Backend.from_url(through)
    backend.append_lines("working/t/messages.jsonl", ['{"n": 0}'])
    lose = {"append": 1, "put": 1, "entry": 1}

    def after(name, method):
        def call(self, *args, **kwargs):
            result = method(self, *args, **kwargs)
            if lose[name]:
                lose[name] -= 1
                raise psycopg.OperationalError("server closed the connection unexpectedly")
            return result

        return call

    monkeypatch.setattr(DocumentsMixin, "_append", after("append", DocumentsMixin._append))
    monkeypatch.setattr(DocumentsMixin, "_put", after("put", DocumentsMixin._put))
    monkeypatch.setattr(Backend, "_insert_entry", after("entry", Backend._insert_entry))

    assert backend.append_lines("working/t/messages.jsonl", ['{"n": 1}']) == 2
    info = backend.put_document("facts/a.md", b"first", expected_version=0)
    entry = backend.log_entry("a large tool result")
    assert lose == {"append": 0, "put": 0, "entry": 0}  # each write lost its answer once
    assert backend.get_document("working/t/messages.jsonl").data == b'{"n": 0}\n{"n": 1}\n'
    assert info.version == 1 and backend.stat_document("facts/a.md").version == 1
    assert [e.id for e in backend.list_entries(limit=10)] == [entry.id]
    backend.close()


def test_a_server_that_stays_away_is_one_error_line_and_work_goes_on_when_it_is_back(
    proxied, monkeypatch
):
    proxy, through, _direct = proxied
    monkeypatch.setenv("TETHER_PG_RECONNECT_S", "1.5")
    backend = PostgresBackend.from_url(through)
    backend.append_lines("working/t/messages.jsonl", ['{"n": 1}'])
    proxy.stop()
    began = time.monotonic()
    with pytest.raises(StorageError) as lost:
        backend.append_lines("working/t/messages.jsonl", ['{"n": 2}'])
    assert time.monotonic() - began < 15
    message = str(lost.value)
    assert "\n" not in message and "did not come back in 2 s" in message
    assert "127.0.0.1" in message and "resumed" in message
    proxy.start()
    monkeypatch.setenv("TETHER_PG_RECONNECT_S", "60")  # the pool may still be backing off
    assert backend.append_lines("working/t/messages.jsonl", ['{"n": 3}']) == 2
    assert backend.get_document("working/t/messages.jsonl").data == b'{"n": 1}\n{"n": 3}\n'
    backend.close()


def test_a_lock_whose_answer_was_lost_is_not_reported_as_another_run(monkeypatch):
    """The first attempt took the lock, then its connection went before the answer came
    back: the server keeps that session's lock until it sees the session end. The retry
    waits for that instead of reporting the task as running elsewhere."""
    from memory.backends.postgres import TRY_MUTEX_SQL, LockKeeper

    take, ghosts = LockKeeper.take, []

    def answer_lost_once(self, timeout):
        if not ghosts:  # the lost session: it holds the lock, and ends half a second later
            ghost = psycopg.connect(url, autocommit=True)
            assert ghost.execute(TRY_MUTEX_SQL, (self.name,)).fetchone()[0]
            ghosts.append(ghost)
            threading.Timer(0.5, ghost.close).start()
            raise psycopg.OperationalError("server closed the connection unexpectedly")
        return take(self, timeout)

    monkeypatch.setattr(LockKeeper, "take", answer_lost_once)
    with private_schema() as url:
        backend = PostgresBackend.from_url(url)
        with backend.mutex("run:t1", timeout=0):
            monkeypatch.setattr(LockKeeper, "take", take)
            other = PostgresBackend.from_url(url)
            with pytest.raises(LockHeldError):  # held, by this process now
                with other.mutex("run:t1", timeout=0):
                    pass
            other.close()
        backend.close()
    assert ghosts[0].closed


def test_the_run_lock_is_taken_again_after_its_connection_ends(proxied, monkeypatch):
    from memory.backends.postgres import LockKeeper

    monkeypatch.setattr(LockKeeper, "CHECK_S", 0.1)
    proxy, through, direct = proxied
    holder = PostgresBackend.from_url(through)
    other = PostgresBackend.from_url(direct)
    with holder.mutex("run:t1", timeout=0):
        proxy.drop()  # the server ends the session: the lock is free for a moment
        deadline = time.monotonic() + 10
        while True:  # until the holder has taken it again
            try:
                with other.mutex("run:t1", timeout=0):
                    pass
            except LockHeldError:
                break
            assert time.monotonic() < deadline, "the holder never took its lock again"
            time.sleep(0.05)
    with other.mutex("run:t1", timeout=0):  # released at the end of the block
        pass
    holder.close()
    other.close()


def test_a_run_on_postgres_finishes_while_its_connections_are_dropped(
    proxied, fixture_repo, tiny_workflow
):
    proxy, through, direct = proxied
    with Dropper(proxy, 0.3) as dropper:
        with Orchestrator(workdir=fixture_repo, workflow=tiny_workflow, memory_url=through) as orch:
            result = orch.run("Survey the shop service", task_id="shop")
    assert dropper.drops >= 2
    assert result.status == "done" and result.findings and not result.failed
    with Orchestrator(workdir=fixture_repo, workflow=tiny_workflow, memory_url=direct) as orch:
        status = orch.status("shop")
    assert status["status"] == "done" and status["findings"] == len(result.findings)


def test_a_run_whose_server_stays_away_stops_with_one_line_and_resumes(
    proxied, fixture_repo, tiny_workflow, monkeypatch
):
    proxy, through, direct = proxied
    monkeypatch.setenv("TETHER_PG_RECONNECT_S", "1")
    stopped = threading.Timer(1.0, proxy.stop)
    with Orchestrator(workdir=fixture_repo, workflow=tiny_workflow, memory_url=through) as orch:
        stopped.start()
        with pytest.raises(StorageError) as lost:
            orch.run("Survey the shop service", task_id="shop")
    assert "did not come back" in str(lost.value) and "\n" not in str(lost.value)
    proxy.start()
    monkeypatch.setenv("TETHER_PG_RECONNECT_S", "60")
    with Orchestrator(workdir=fixture_repo, workflow=tiny_workflow, memory_url=direct) as orch:
        result = orch.resume("shop")
    assert result.status == "done" and result.findings and not result.failed


def test_a_request_the_server_refuses_is_not_retried_as_a_lost_connection(proxied, monkeypatch):
    """A statement timeout or a server limit is an answer, not a lost connection: one
    `StorageError` at once, not a minute of retries."""
    from memory.backends.postgres import DocumentsMixin

    _proxy, through, _direct = proxied
    backend = PostgresBackend.from_url(through)

    def refused(self, *args, **kwargs):
        raise psycopg.errors.QueryCanceled("canceling statement due to statement timeout")

    monkeypatch.setattr(DocumentsMixin, "_append", refused)
    began = time.monotonic()
    with pytest.raises(StorageError, match="refused the request .*statement timeout"):
        backend.append_lines("working/t/messages.jsonl", ['{"n": 1}'])
    assert time.monotonic() - began < 2
    backend.close()
