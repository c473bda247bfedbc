"""Entries survive a deleted `memory.db`: the journal `entries/journal.jsonl` rebuilds them.

Files are the truth: `memory reindex` (and the first use of a store whose `entries` table is
empty) restores every logged entry's row, tags and inline bytes from the journal, in the
original order, byte-exact, searchable, without bringing pruned entries back and without
duplicating anything when run again. Checked through the CLI in a subprocess (the way a
user deletes the database) and through the Python API.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys

import pytest

from memory.durable import read_jsonl
from memory.errors import UnknownEntryError
from memory.store import MemoryStore

INLINE = b"alpha\x00bravo\r\ncharlie zebrafinch\r\n\r\nno newline at end"


def lines(word: str, n: int) -> str:
    return "".join(f"{word} line {i} of the {word} output\n" for i in range(n))


FILE_TEXT = lines("quokka", 100)  # ~900 tokens: file tier
CHUNKED_TEXT = lines("narwhal", 900)  # ~9000 tokens: chunked tier


def memory(env, *args: str, input: bytes | None = None) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [sys.executable, "-m", "memory", *args],
        input=input,
        capture_output=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr.decode()
    return done


def cli_log(env, data: bytes, args) -> str:
    return memory(env, "log", "--stdin", "-q", *args, input=data).stdout.decode().strip()


def delete_db(memory_dir) -> None:
    for suffix in ("", "-wal", "-shm"):
        path = memory_dir / f"memory.db{suffix}"
        if path.exists():
            path.unlink()
    assert not (memory_dir / "memory.db").exists()


def log_three(log) -> dict[str, bytes]:
    """Log an inline, a file and a chunked entry; returns {id: exact bytes}."""
    contents = {}
    for data, args in (
        (INLINE, ("--tag", "alpha", "--tag", "zz", "--checkpoint", "cp-1", "--directory", "work")),
        (FILE_TEXT.encode(), ("--type", "transcript", "--tag", "beta")),
        (CHUNKED_TEXT.encode(), ("--checkpoint", "cp-2", "--directory", "work/sub")),
    ):
        contents[log(data, args)] = data
    return contents


class TestCliRoundTrip:
    def test_reindex_after_deleting_the_db_restores_every_entry(self, memory_dir, cli_env):
        log = functools.partial(cli_log, cli_env)

        contents = log_three(log)
        before = json.loads(memory(cli_env, "list", "--json").stdout)
        assert [e["tier"] for e in reversed(before)] == ["inline", "file", "chunked"]
        delete_db(memory_dir)
        assert memory(cli_env, "reindex").stdout.decode().split(" and ")[1].startswith("3 entries")
        after = json.loads(memory(cli_env, "list", "--json").stdout)
        assert after == before  # same ids, order, seq, tags, checkpoint, directory, summary...
        for entry_id, data in contents.items():
            assert memory(cli_env, "fetch", entry_id).stdout == data
        chunk = memory(cli_env, "fetch", before[0]["id"], "--chunk", "1").stdout
        assert chunk and chunk in CHUNKED_TEXT.encode()
        for word, entry_id in zip(("zebrafinch", "quokka", "narwhal"), contents, strict=True):
            hits = json.loads(memory(cli_env, "search", word, "--json").stdout)
            assert hits and hits[0]["citation"].split("#")[0] == entry_id, hits
        refs = json.loads(memory(cli_env, "refs", "--checkpoint", "cp-1", "--json").stdout)
        assert [e["id"] for e in refs] == [before[2]["id"]]

        memory(cli_env, "reindex")  # idempotent: nothing duplicated
        assert json.loads(memory(cli_env, "list", "--json").stdout) == after
        stats = json.loads(memory(cli_env, "stats", "--json").stdout)
        assert stats["entries"] == 3

    def test_pruned_entries_stay_pruned(self, memory_dir, cli_env):
        log = functools.partial(cli_log, cli_env)

        ids = list(log_three(log))
        newest = log(b"kept entry", ())
        memory(cli_env, "prune", "--keep-entries", "1")
        kept = json.loads(memory(cli_env, "list", "--json").stdout)
        delete_db(memory_dir)
        memory(cli_env, "reindex")
        listed = json.loads(memory(cli_env, "list", "--json").stdout)
        assert [e["id"] for e in listed] == [newest]
        assert listed == kept and listed[0]["seq"] == 4  # its seq too, above the pruned ones
        for entry_id in ids:  # the inline one has no files: only the journal knows it is gone
            done = subprocess.run(
                [sys.executable, "-m", "memory", "fetch", entry_id],
                capture_output=True,
                env=cli_env,
                timeout=60,
            )
            assert done.returncode == 1 and b"no entry" in done.stderr
        assert json.loads(memory(cli_env, "stats", "--json").stdout)["pruned"] == 3


class TestApi:
    @pytest.fixture
    def logged(self, memory_dir):
        store = MemoryStore(memory_dir)
        work = memory_dir.parent / "work"
        entries = [
            store.log(INLINE, tags=["alpha"], checkpoint="cp-1", directory=str(work)),
            store.log(FILE_TEXT, type="transcript", tags=["beta", "gamma"]),
            store.log(CHUNKED_TEXT, directory=str(work / "sub")),
        ]
        before = [e.to_dict() for e in store.list_entries(limit=None)]
        store.close()
        return entries, before

    def test_first_use_restores_an_emptied_table(self, memory_dir, logged):
        entries, before = logged
        delete_db(memory_dir)
        with MemoryStore(memory_dir) as store:
            assert [e.to_dict() for e in store.list_entries(limit=None)] == before
            assert store.entries.fetch_bytes(entries[0].id) == INLINE
            assert store.fetch(entries[1].id) == FILE_TEXT
            assert store.fetch(entries[2].id, chunk=0) + store.fetch(entries[2].id, chunk=1)
            assert store.entries.restore() == 0  # idempotent
            assert store.search("quokka")[0].citation == entries[1].id
            new = store.log("after the restore")
            assert new.seq > max(e["seq"] for e in before)
            assert store.list_entries(limit=1)[0].id == new.id

    def test_restore_returns_the_count_and_skips_entries_whose_files_are_gone(
        self, memory_dir, logged
    ):
        entries, _ = logged
        delete_db(memory_dir)
        (memory_dir / entries[2].path / "chunk-0001.gz").unlink()
        journal = memory_dir / "entries" / "journal.jsonl"
        with open(journal, "ab") as fh:  # a torn last line left by a crash
            fh.write(b'{"op": "log", "id": "mem-2026')
        store = MemoryStore(memory_dir)
        store.entries._journal_checked = True  # measure restore() itself, not the first use
        assert store.entries.restore() == 2
        assert store.entries.restore() == 0
        assert [e.id for e in store.list_entries()] == [entries[1].id, entries[0].id]
        assert store.get_entry(entries[1].id).tags == ["beta", "gamma"]
        with pytest.raises(UnknownEntryError):
            store.get_entry(entries[2].id)
        store.close()

    def test_journal_has_one_line_per_entry_and_per_pruned_id(self, memory_dir, logged):
        entries, _ = logged
        with MemoryStore(memory_dir) as store:
            store.prune(keep_entries=2)
            records = [r for _, r in read_jsonl(memory_dir / "entries" / "journal.jsonl").records]
        assert [(r["op"], r["id"]) for r in records] == [
            *[("log", e.id) for e in entries],
            ("prune", entries[0].id),
        ]
        assert "content_b64" in records[0] and "content_b64" not in records[1]

    def test_a_store_without_journal_gets_one_on_first_use(self, memory_dir, logged):
        entries, before = logged
        (memory_dir / "entries" / "journal.jsonl").unlink()  # as made before the journal
        with MemoryStore(memory_dir) as store:
            assert len(store.list_entries(limit=None)) == 3
        delete_db(memory_dir)
        with MemoryStore(memory_dir) as store:
            assert [e.to_dict() for e in store.list_entries(limit=None)] == before
            assert store.entries.fetch_bytes(entries[0].id) == INLINE


def test_a_failed_journal_append_leaves_no_row_and_no_files(memory_dir, monkeypatch):
    """The journal line is part of the row's transaction: no row ever lacks its line."""
    from memory import durable
    from memory.errors import MemoryRuntimeError

    def disk_full(path, records, *, many=False):
        raise MemoryRuntimeError(f"disk full while writing {str(path)!r}")

    with MemoryStore(memory_dir) as store:
        kept = store.log("logged before the disk filled up")
        monkeypatch.setattr(durable, "append_jsonl", disk_full)
        for text in ("small", FILE_TEXT):
            with pytest.raises(MemoryRuntimeError, match="disk full"):
                store.log(text)
        assert [e.id for e in store.list_entries()] == [kept.id]
        assert sorted(p.name for p in (memory_dir / "entries").iterdir() if p.is_dir()) == []


def test_journal_is_not_an_orphan_and_not_indexed(memory_dir):
    with MemoryStore(memory_dir) as store:
        store.log("an entry about pelicans")
        assert store.entries.sweep_orphans(older_than_s=0) == []
        assert (memory_dir / "entries" / "journal.jsonl").exists()
        hits = store.search("pelicans")
        assert [h.source for h in hits] == ["entries"]
        assert os.path.exists(memory_dir / "entries" / "journal.jsonl")


def test_search_alone_finds_entries_after_memory_db_is_deleted(memory_dir):
    from memory import MemoryStore

    with MemoryStore(memory_dir) as store:
        entry = store.log("the flaky quokka migration failed twice", tags=["ci"])
    for name in ("memory.db", "memory.db-wal", "memory.db-shm"):
        (memory_dir / name).unlink(missing_ok=True)
    with MemoryStore(memory_dir) as store:
        hits = store.search("why did the quokka migration fail", scope="entries")
    assert [h.citation for h in hits] == [entry.id]
