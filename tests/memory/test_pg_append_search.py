"""PostgreSQL: an append to a log commits before its durability barrier, and searches merge
the GIN pending list that appends leave (`tether_append`, `PendingMerges`)."""

from __future__ import annotations

import json

import psycopg
import pytest

from memory.backends import _postgres_search
from memory.backends.postgres import PostgresBackend
from tests.pg import private_schema

LOG = "working/t/messages.jsonl"
MERGE = "SELECT gin_clean_pending_list('tether_search_tsv'::regclass)"


@pytest.fixture
def pg():
    """A backend on one connection of its own (one server process), and another to look."""
    with private_schema() as url, psycopg.connect(url, autocommit=True) as own:
        backend = PostgresBackend(own, url=url)
        backend.setup()
        with psycopg.connect(url, autocommit=True) as conn:
            yield backend, conn


def _append(backend: PostgresBackend, n: int) -> int:
    return backend.append_lines(LOG, [f'{{"role": "user", "content": "turn {n} zebra{n}"}}'])


def test_an_append_commits_its_lines_then_waits_for_the_disk_in_a_second_transaction(pg):
    backend, conn = pg
    assert _append(backend, 1) == 1  # a new log: the slow way
    pid = backend._conn.info.backend_pid
    before = conn.execute("SELECT n FROM tether_flush WHERE pid = %s", (pid,)).fetchone()
    assert _append(backend, 2) == 2 and _append(backend, 3) == 3  # the one-call way
    n, flush_xid = conn.execute(
        "SELECT n, xmin::text::bigint FROM tether_flush WHERE pid = %s", (pid,)
    ).fetchone()
    assert n == (before[0] if before else -1) + 2  # one barrier per append
    part_xid = conn.execute(
        "SELECT xmin::text::bigint FROM tether_document_parts WHERE path = %s "
        "ORDER BY start DESC LIMIT 1",
        (LOG,),
    ).fetchone()[0]
    assert part_xid < flush_xid  # the lines committed first, the barrier after
    assert backend.get_document(LOG).data.count(b"\n") == 3
    assert [h.doc_id for h in backend.index_query("zebra3")] == [f"{LOG}#L3"]


def test_a_search_merges_the_pending_list_that_appends_leave_at_most_once_a_second(pg):
    backend, conn = pg
    for n in range(1, 40):
        _append(backend, n)
    assert conn.execute(MERGE).fetchone()[0] > 0  # appends leave rows pending
    for n in range(40, 80):
        _append(backend, n)
    assert [h.doc_id for h in backend.index_query("zebra50")] == [f"{LOG}#L50"]
    assert conn.execute(MERGE).fetchone()[0] == 0  # the search merged them first
    for n in range(80, 120):
        _append(backend, n)
    assert [h.doc_id for h in backend.index_query("zebra90")] == [f"{LOG}#L90"]
    assert conn.execute(MERGE).fetchone()[0] > 0  # not again within the second
    backend._merges._next = 0.0  # the second has passed
    backend.index_query("zebra100")
    assert conn.execute(MERGE).fetchone()[0] == 0


def test_a_refused_merge_leaves_searches_working_and_is_not_asked_again(pg, monkeypatch):
    backend, _ = pg
    refuse = "DO $$ BEGIN RAISE insufficient_privilege; END $$"
    monkeypatch.setattr(_postgres_search, "MERGE_PENDING_SQL", refuse)
    _append(backend, 1)
    _append(backend, 2)
    assert [h.doc_id for h in backend.index_query("zebra2")] == [f"{LOG}#L2"]
    assert backend._merges.refused
    backend._merges._next = 0.0
    assert not backend._merges.due()


def test_appended_texts_reach_the_index_as_written_quotes_backslashes_and_braces_too(pg):
    backend, _ = pg
    _append(backend, 1)
    odd = 'say "hi", {braces} \\back\\slash\\ NULL é\u2028 walrus'
    line = json.dumps({"role": "user", "content": odd})
    assert backend.append_lines(LOG, [line, '{"role": "user", "content": "second walrus"}']) == 2
    hits = {h.doc_id: h.text for h in backend.index_query("walrus")}
    assert odd in hits[f"{LOG}#L2"] and "second walrus" in hits[f"{LOG}#L3"]


def test_a_backend_from_a_url_serves_one_caller_from_one_server_process():
    """A pool that grew because its first call waited for the first connection kept two
    server processes busy for every single-threaded caller, alternating between them."""
    with private_schema() as url:
        name = "tether-test-one-connection"
        backend = PostgresBackend.from_url(f"{url}&application_name={name}")
        try:
            for n in range(20):
                _append(backend, n)
            backend.index_query("zebra7")
            with psycopg.connect(url, autocommit=True) as conn:
                pids = conn.execute(
                    "SELECT pid FROM pg_stat_activity WHERE application_name = %s", (name,)
                ).fetchall()
        finally:
            backend.close()
    assert len(pids) == 1
