"""PostgreSQL: an append to a log commits before its durability barrier, leaves its lines to
the next search to index (`tether_append_log`, `tether_log_marks`), and searches merge the GIN
pending list (`PendingMerges`)."""

from __future__ import annotations

import json
import threading
import time

import psycopg
import pytest

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


def test_a_search_merges_the_pending_list_that_indexing_leaves_at_most_once_a_second(pg):
    backend, conn = pg
    for n in range(1, 40):
        _append(backend, n)
    for n in range(40, 80):
        _append(backend, n)
    assert [h.doc_id for h in backend.index_query("zebra50")] == [f"{LOG}#L50"]
    assert conn.execute(MERGE).fetchone()[0] == 0  # the search indexed them, then merged
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
    monkeypatch.setattr(PostgresBackend, "MERGE_PENDING_SQL", refuse)
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


def _rows(conn) -> int:
    return conn.execute("SELECT count(*) FROM tether_search WHERE path = %s", (LOG,)).fetchone()[0]


def _hits(backend, words: str) -> list[str]:
    return [h.doc_id for h in backend.index_query(words)]


def test_appends_leave_their_lines_to_the_next_search_which_indexes_each_once(pg):
    backend, conn = pg
    for n in range(1, 31):
        _append(backend, n)
    assert _rows(conn) == 1  # only the first, which made the log, indexed its own line
    assert _hits(backend, "zebra30") == [f"{LOG}#L30"]
    assert _rows(conn) == 30
    mark = conn.execute("SELECT lines, bytes, xmin::text FROM tether_log_marks").fetchall()
    assert mark[0][:2] == (30, backend.stat_document(LOG).size)
    assert _hits(backend, "zebra7") == [f"{LOG}#L7"]
    assert conn.execute("SELECT lines, bytes, xmin::text FROM tether_log_marks").fetchall() == mark


def test_a_long_message_appended_to_a_log_is_found_by_its_last_word(pg):
    backend, _ = pg
    _append(backend, 1)
    long = " ".join(f"word{n}" for n in range(60_000)) + " quokka"  # several search rows
    assert backend.append_lines(LOG, [json.dumps({"role": "user", "content": long})]) == 2
    _append(backend, 3)
    assert _hits(backend, "quokka") == [f"{LOG}#L2"]
    assert _hits(backend, "zebra3") == [f"{LOG}#L3"]


def test_a_rewritten_log_is_searched_as_rewritten_and_then_appended_to(pg):
    backend, _ = pg
    for n in range(1, 4):
        _append(backend, n)
    assert _hits(backend, "zebra2") == [f"{LOG}#L2"]
    backend.put_document(LOG, b'{"role": "user", "content": "alpha"}\n')
    _append(backend, 9)
    assert _hits(backend, "zebra2") == []
    assert _hits(backend, "alpha") == [f"{LOG}#L1"]
    assert _hits(backend, "zebra9") == [f"{LOG}#L2"]
    backend.delete_document(LOG)
    _append(backend, 5)  # a new log under the same name
    assert _hits(backend, "zebra5") == [f"{LOG}#L1"] and _hits(backend, "zebra9") == []


def test_a_line_after_a_torn_last_line_is_found_under_its_own_number(pg):
    backend, _ = pg
    backend.put_document(LOG, b'{"role": "user", "content": "one ant"}\n{"role": "us')
    assert _append(backend, 7) == 3  # the torn line keeps number 2
    assert _hits(backend, "zebra7") == [f"{LOG}#L3"]
    assert _hits(backend, "ant") == [f"{LOG}#L1"]


def test_a_reindex_marks_what_it_indexed_and_later_lines_follow(pg):
    backend, conn = pg
    for n in range(1, 6):
        _append(backend, n)
    report = backend.reindex()
    assert report.rows_added == 5 and _rows(conn) == 5
    _append(backend, 6)
    assert _hits(backend, "zebra6") == [f"{LOG}#L6"] and _hits(backend, "zebra1") == [f"{LOG}#L1"]
    assert _rows(conn) == 6


def test_a_log_indexed_before_marks_existed_gets_one_at_its_next_append(pg):
    """Logs written by a version that indexed inside the append have no mark: their next
    append leaves one where that append starts, and only later lines wait for a search."""
    backend, conn = pg
    for n in range(1, 4):
        _append(backend, n)
    backend.index_query("zebra1")
    conn.execute("DELETE FROM tether_log_marks")
    _append(backend, 4)
    assert conn.execute("SELECT lines FROM tether_log_marks").fetchall() == [(3,)]
    assert _hits(backend, "zebra4") == [f"{LOG}#L4"] and _rows(conn) == 4


def test_a_role_that_may_not_write_searches_what_is_indexed_and_says_so_once(
    pg, monkeypatch, caplog
):
    backend, _ = pg
    _append(backend, 1)
    _append(backend, 2)

    def refused(self, path):
        raise psycopg.errors.InsufficientPrivilege("permission denied for table tether_log_marks")

    monkeypatch.setattr(PostgresBackend, "_index_log", refused)
    assert _hits(backend, "zebra1") == [f"{LOG}#L1"] and _hits(backend, "zebra2") == []
    _hits(backend, "zebra2")
    said = [r for r in caplog.records if "cannot index the newest log lines" in r.getMessage()]
    assert len(said) == 1 and "permission denied" in said[0].getMessage()


def test_an_upgrade_to_marks_marks_every_log_where_its_search_rows_end(pg):
    """`m006` on a database whose logs were indexed inside their appends: each log gets a
    mark at its end, so only lines appended after the upgrade wait for a search."""
    backend, conn = pg
    for n in range(1, 5):
        _append(backend, n)
    backend.index_query("zebra1")
    conn.execute("DELETE FROM tether_log_marks")  # as before m006
    conn.execute("DELETE FROM tether_migrations WHERE name = 'm006_log_marks'")
    backend.setup()
    size = backend.stat_document(LOG).size
    assert conn.execute("SELECT path, lines, bytes FROM tether_log_marks").fetchall() == [
        (LOG, 4, size)
    ]
    _append(backend, 5)
    assert _hits(backend, "zebra5") == [f"{LOG}#L5"] and _rows(conn) == 5


def test_a_log_rewritten_while_a_search_indexes_it_keeps_no_rows_of_its_old_lines(pg):
    backend, conn = pg
    for n in range(1, 4):
        _append(backend, n)  # lines 2 and 3 wait for a search
    new = b'{"role": "user", "content": "alpha"}\n'
    conn.execute("BEGIN")  # a rewrite of the log, under way (as `put_document` does it)
    conn.execute("DELETE FROM tether_document_parts WHERE path = %s", (LOG,))
    conn.execute("DELETE FROM tether_log_marks WHERE path = %s", (LOG,))
    conn.execute(
        "UPDATE tether_documents SET data = %s, lines = 1, size = %s, open_tail = FALSE, "
        "version = version + 1 WHERE path = %s",
        (new, len(new), LOG),
    )
    conn.execute("DELETE FROM tether_search WHERE path = %s", (LOG,))
    search = threading.Thread(target=_hits, args=(backend, "zebra3"))
    search.start()
    time.sleep(0.5)  # the search is indexing the log, or waiting to
    conn.execute("COMMIT")
    search.join(timeout=30)
    assert not search.is_alive()
    assert _hits(backend, "zebra3") == [] and _hits(backend, "zebra2") == []


def test_a_search_indexes_a_long_backlog_in_steps_a_long_line_too(pg, monkeypatch):
    backend, conn = pg
    monkeypatch.setattr(PostgresBackend, "INDEX_WINDOW", 300)  # about 5 lines a step
    _append(backend, 1)
    for n in range(2, 31):
        _append(backend, n)
    long = " ".join(f"word{n}" for n in range(200)) + " quokka"  # longer than a step
    backend.append_lines(LOG, [json.dumps({"role": "user", "content": long})])
    _append(backend, 32)
    assert _hits(backend, "zebra32") == [f"{LOG}#L32"]
    assert _hits(backend, "quokka") == [f"{LOG}#L31"] and _hits(backend, "zebra17") == [
        f"{LOG}#L17"
    ]
    assert _rows(conn) == 32
    steps = conn.execute(
        "SELECT count(DISTINCT xmin::text) FROM tether_search WHERE path = %s", (LOG,)
    ).fetchone()[0]
    assert steps >= 6  # the first line's own, then one transaction a step
    size = backend.stat_document(LOG).size
    assert conn.execute("SELECT lines, bytes FROM tether_log_marks").fetchall() == [(32, size)]


def test_a_torn_line_longer_than_a_step_does_not_stop_the_indexing(pg, monkeypatch):
    backend, _ = pg
    monkeypatch.setattr(PostgresBackend, "INDEX_WINDOW", 100)
    torn = b'{"role": "user", "content": "' + b"x" * 500
    backend.put_document(LOG, b'{"role": "user", "content": "one ant"}\n' + torn)
    backend.reindex()  # marks the log after line 1: the torn line 2 waits
    assert _append(backend, 7) == 3
    assert _hits(backend, "zebra7") == [f"{LOG}#L3"] and _hits(backend, "ant") == [f"{LOG}#L1"]
