"""The entry store's Python API: tiers, byte-exact round trips, links, stats, prune.

Everything goes through `MemoryStore` / `EntryStore` and the files on disk.
"""

from __future__ import annotations

import gzip
import os
import re
import sqlite3
from datetime import UTC, datetime, timedelta

import pytest

from memory import MemoryStore
from memory.contract.entries import split_chunks
from memory.errors import (
    ChunkOutOfRangeError,
    CorruptDataError,
    InvalidInputError,
    MemoryDirError,
    UnknownEntryError,
)
from memory.text.tokens import estimate_tokens

ID_RE = re.compile(r"^mem-\d{8}-\d{6}-[0-9a-f]{8}$")


@pytest.fixture
def store(memory_dir):
    with MemoryStore(memory_dir) as s:
        yield s


def lines_text(tokens: int) -> str:
    """Text of exactly `tokens * 4` characters made of 80-character lines."""
    chars = tokens * 4
    line = "0123456789" * 7 + "abcdefghi\n"  # 80 chars
    return (line * (chars // 80 + 1))[:chars]


def memory_files(root) -> dict[str, bytes]:
    found = {}
    for dirpath, _, files in os.walk(root):
        for name in files:
            path = os.path.join(dirpath, name)
            found[os.path.relpath(path, root)] = open(path, "rb").read()
    return found


class TestTiers:
    @pytest.mark.parametrize(
        ("tokens", "tier", "chunks"),
        [
            (1, "inline", 0),
            (499, "inline", 0),
            (500, "file", 0),
            (4000, "file", 0),
            (4001, "chunked", 2),
            (12000, "chunked", 3),
            (12001, "chunked", 4),
        ],
    )
    def test_boundaries(self, store, memory_dir, tokens, tier, chunks):
        text = lines_text(tokens)
        entry = store.log(text, tags=["t"])
        assert (entry.tier, entry.tokens, entry.chunks) == (tier, tokens, chunks)
        assert store.fetch(entry.id) == text
        assert store.get_entry(entry.id).tier == tier
        if tier == "inline":
            assert entry.path is None
            assert not (memory_dir / "entries" / entry.id).exists()
        elif tier == "file":
            blob = (memory_dir / entry.path).read_bytes()
            assert gzip.decompress(blob) == text.encode()
        else:
            parts = sorted((memory_dir / entry.path).iterdir())
            assert len(parts) == chunks
            assert b"".join(gzip.decompress(p.read_bytes()) for p in parts) == text.encode()

    def test_chunks_are_at_most_4000_tokens_cut_at_line_ends(self, store):
        text = lines_text(40_000)  # > 8 chunks: written by the thread pool
        entry = store.log(text)
        assert entry.chunks == 10
        pieces = [store.fetch(entry.id, chunk=n) for n in range(entry.chunks)]
        assert b"".join(store.entries.iter_bytes(entry.id)) == text.encode()
        assert "".join(pieces) == text
        assert all(estimate_tokens(p) <= 4000 for p in pieces)
        assert all(p.endswith("\n") for p in pieces[:-1])

    def test_a_single_huge_line_is_cut_between_characters(self):
        text = "é😀" * 20_000  # no newline at all, multi-byte characters
        pieces = split_chunks(text)
        assert "".join(pieces) == text
        assert all(len(p) <= 16_000 for p in pieces)
        assert b"".join(p.encode() for p in pieces) == text.encode()

    def test_texts_gives_citations_for_the_index(self, store):
        small = store.log("short note")
        big = store.log(lines_text(9000))
        assert store.entries.texts(small.id) == [(small.id, "short note")]
        texts = store.entries.texts(big.id)
        assert [c for c, _ in texts] == [f"{big.id}#chunk-{n}" for n in range(big.chunks)]
        assert "".join(t for _, t in texts) == lines_text(9000)


class TestRoundTrip:
    @pytest.mark.parametrize(
        "text",
        [
            "plain ascii, no trailing newline",
            "trailing newline\n",
            "windows\r\nline\r\nendings\r\n",
            "NUL \x00 and controls \x01\x07\x1b[31m red \x7f",
            "unicode: héllo wörld 日本語 😀 \u200b zero-width",
            "\n\nleading blank lines",
            "lone\rcarriage returns\r",
        ],
    )
    @pytest.mark.parametrize("repeat", [1, 400, 5000])
    def test_exact_bytes_in_every_tier(self, store, text, repeat):
        content = text * repeat
        entry = store.log(content)
        assert store.fetch(entry.id) == content
        assert store.entries.fetch_bytes(entry.id) == content.encode("utf-8")
        assert entry.bytes == len(content.encode("utf-8"))

    def test_bytes_input_is_stored_exactly(self, store):
        raw = "résumé\r\n\x00".encode() * 900
        entry = store.log(raw)
        assert store.entries.fetch_bytes(entry.id) == raw


class TestIdsAndMetadata:
    def test_ids_have_the_seed_format_and_never_repeat(self, store):
        ids = [store.log(f"entry {i}").id for i in range(300)]
        assert all(ID_RE.match(i) for i in ids)
        assert len(set(ids)) == 300

    def test_id_collision_retries_with_a_new_id(self, store, monkeypatch):
        import memory.contract.entries as entries_module

        first = store.log("first entry")
        suffix = first.id.rsplit("-", 1)[1]
        tokens = iter([suffix, suffix, "0badc0de"])
        fixed = datetime.strptime(first.id[4:19], "%Y%m%d-%H%M%S").replace(tzinfo=UTC)
        store.entries.clock = lambda: fixed
        monkeypatch.setattr(entries_module.secrets, "token_hex", lambda n: next(tokens))
        second = store.log("second entry")
        assert second.id.endswith("-0badc0de")
        assert store.fetch(first.id) == "first entry"
        assert store.fetch(second.id) == "second entry"

    def test_tags_type_checkpoint_and_directory(self, store, tmp_path):
        (tmp_path / "pipeline").mkdir()
        a = store.log(
            "alpha",
            tags=["pytest", "ci", "pytest"],
            type="transcript",
            checkpoint="ckpt-1",
            directory="./pipeline",
        )
        b = store.log("beta", tags=["ci"], directory=str(tmp_path / "pipeline" / "sub"))
        store.log("gamma", type="context", checkpoint="ckpt-2")
        assert a.tags == ["ci", "pytest"]
        assert store.log("single tag", tags="pytest").tags == ["pytest"]
        assert a.directory == str(tmp_path / "pipeline")
        assert [e.id for e in store.list_entries(tag="ci")] == [b.id, a.id]
        assert [e.id for e in store.list_entries(type="transcript")] == [a.id]
        assert [e.id for e in store.refs(checkpoint="ckpt-1")] == [a.id]
        assert [e.id for e in store.refs(directory=str(tmp_path / "pipeline"))] == [a.id, b.id]
        assert [e.id for e in store.refs(directory="pipeline")] == [a.id, b.id]
        assert [e.id for e in store.list_entries(limit=2)] == [e.id for e in store.list_entries()][
            :2
        ]
        got = store.get_entry(a.id)
        assert (got.type, got.checkpoint, got.tags) == ("transcript", "ckpt-1", ["ci", "pytest"])
        assert got.created_at.endswith("Z")

    def test_summary_only_returns_the_extractive_summary(self, store):
        text = "\n".join(f"tests/t{i}.py::test_{i} PASSED" for i in range(800))
        text += "\nFAILED tests/test_auth.py::test_oauth_flow - assert 1 == 2\n"
        text += "=========== 800 passed, 1 failed in 9.1s ===========\n"
        entry = store.log(text)
        summary = store.fetch(entry.id, summary_only=True)
        assert "800 passed, 1 failed" in summary and "test_oauth_flow" in summary
        assert estimate_tokens(summary) <= 200
        assert entry.summary_line == "800 passed, 1 failed in 9.1s"

    def test_a_pluggable_summarizer_makes_the_summary(self, store):
        store.entries.summarizer = lambda text, max_tokens=200: f"{len(text)} chars"
        entry = store.log(lines_text(700))
        assert store.fetch(entry.id, summary_only=True) == "2800 chars"


class TestStatsAndPrune:
    def test_stats_by_tier_and_type(self, store):
        store.log(lines_text(10))
        store.log(lines_text(600), type="transcript")
        store.log(lines_text(9000))
        stats = store.stats()
        assert stats["entries"] == 3 and stats["tokens"] == 9610
        assert stats["bytes"] == 9610 * 4 and stats["chunks"] == 3
        assert {k: v["entries"] for k, v in stats["by_tier"].items()} == {
            "inline": 1,
            "file": 1,
            "chunked": 1,
        }
        assert stats["by_type"]["output"]["tokens"] == 9010
        assert stats["by_type"]["transcript"]["entries"] == 1
        assert stats["by_tier"]["chunked"]["stored_bytes"] < 9000 * 4  # compressed

    def test_prune_keep_entries_removes_rows_files_and_records_tombstones(self, store, memory_dir):
        old = [store.log(lines_text(n)) for n in (10, 800, 5000)]
        keep = [store.log(f"keep {i}") for i in range(2)]
        (memory_dir / "facts" / "f.md").write_text("a fact\n")
        dry = store.prune(keep_entries=2, dry_run=True)
        assert [e.id for e in dry] == [e.id for e in old]
        assert len(store.list_entries(limit=None)) == 5
        removed = store.prune(keep_entries=2)
        assert [e.id for e in removed] == [e.id for e in old]
        assert [e.id for e in store.list_entries(limit=None)] == [k.id for k in reversed(keep)]
        visible = [n for n in os.listdir(memory_dir / "entries") if not n.startswith(".")]
        assert visible == ["journal.jsonl"]  # the append-only journal stays, folders go
        assert (memory_dir / "facts" / "f.md").read_text() == "a fact\n"
        assert [i for _, i in store.entries.tombstones_since(0)] == [e.id for e in old]
        with pytest.raises(UnknownEntryError):
            store.fetch(old[1].id)

    def test_prune_keep_days_uses_creation_time(self, store):
        now = datetime.now(UTC)
        store.entries.clock = lambda: now - timedelta(days=10)
        old = store.log("ten days old")
        store.entries.clock = lambda: now - timedelta(days=2)
        recent = store.log("two days old")
        store.entries.clock = lambda: now
        assert [e.id for e in store.prune(keep_days=7)] == [old.id]
        assert [e.id for e in store.list_entries()] == [recent.id]

    def test_sweep_orphans_takes_only_old_entry_folders_without_rows(self, store, memory_dir):
        entry = store.log(lines_text(900))
        old_orphan = memory_dir / "entries" / "mem-20200101-000000-deadbeef"
        new_orphan = memory_dir / "entries" / "mem-20200101-000000-0000beef"
        for folder in (old_orphan, new_orphan):
            folder.mkdir()
            (folder / "content.gz").write_bytes(gzip.compress(b"left by a killed log"))
        (memory_dir / "entries" / "README.txt").write_text("not an entry")
        two_hours_ago = datetime.now().timestamp() - 7200
        for path in (old_orphan, memory_dir / "entries" / entry.id):
            os.utime(path, (two_hours_ago, two_hours_ago))
        expected = ["entries/mem-20200101-000000-deadbeef"]
        assert store.entries.sweep_orphans(dry_run=True) == expected
        assert old_orphan.exists()
        assert store.entries.sweep_orphans() == expected
        visible = [n for n in os.listdir(memory_dir / "entries") if not n.startswith(".")]
        assert sorted(visible) == sorted(["README.txt", "journal.jsonl", entry.id, new_orphan.name])
        assert store.fetch(entry.id) == lines_text(900)

    def test_index_feed_by_seq(self, store):
        a, b = store.log("one"), store.log("two")
        assert store.entries.since(0) == [(a.seq, a.id), (b.seq, b.id)]
        assert store.entries.since(a.seq) == [(b.seq, b.id)]


class TestBadInput:
    @pytest.mark.parametrize(
        ("call", "error", "message"),
        [
            (
                lambda s: s.fetch("mem-20990101-000000-00000000"),
                UnknownEntryError,
                "no entry 'mem-20990101-000000-00000000'",
            ),
            (lambda s: s.log(""), InvalidInputError, "content is empty"),
            (lambda s: s.log(" \n\t"), InvalidInputError, "content is empty"),
            (
                lambda s: s.log("x", type="blob"),
                InvalidInputError,
                "unknown entry type 'blob': use one of transcript, output, summary, context, chunk",
            ),
            (lambda s: s.log(b"ok\xff"), InvalidInputError, "not valid UTF-8 (byte 0xff"),
            (lambda s: s.log("\ud800"), InvalidInputError, "unencodable character"),
            (lambda s: s.refs(), InvalidInputError, "refs needs --checkpoint"),
            (lambda s: s.prune(), InvalidInputError, "prune needs --keep-days"),
            (lambda s: s.prune(keep_days=-1), InvalidInputError, "invalid --keep-days -1"),
        ],
    )
    def test_errors_are_one_line_and_leave_memory_intact(
        self, store, memory_dir, call, error, message
    ):
        store.log(lines_text(5000), tags=["keep"])
        before = memory_files(memory_dir / "entries")
        count = len(store.list_entries(limit=None))
        with pytest.raises(error) as info:
            call(store)
        assert message in str(info.value) and "\n" not in str(info.value)
        assert memory_files(memory_dir / "entries") == before
        assert len(store.list_entries(limit=None)) == count

    @pytest.mark.parametrize(
        ("size", "chunk", "valid"), [(10, 1, "0"), (9000, 3, "0..2"), (9000, -1, "0..2")]
    )
    def test_chunk_out_of_range_names_the_valid_range(self, store, size, chunk, valid):
        entry = store.log(lines_text(size))
        with pytest.raises(ChunkOutOfRangeError, match=rf"\(valid: {re.escape(valid)}\)$"):
            store.fetch(entry.id, chunk=chunk)

    def test_chunk_zero_of_an_unchunked_entry_is_the_content(self, store):
        entry = store.log(lines_text(700))
        assert store.fetch(entry.id, chunk=0) == lines_text(700)

    def test_memory_dir_that_is_a_file(self, tmp_path):
        target = tmp_path / "not-a-dir"
        target.write_text("precious")
        with pytest.raises(MemoryDirError, match="is not a directory"):
            MemoryStore(target).log("x")
        assert target.read_text() == "precious"

    def test_missing_entry_file_is_reported_not_crashing(self, store, memory_dir):
        entry = store.log(lines_text(800))
        (memory_dir / entry.path).unlink()
        with pytest.raises(CorruptDataError, match="is missing; restore it or prune"):
            store.fetch(entry.id)

    def test_crash_before_the_row_leaves_no_dangling_row(self, store, memory_dir, monkeypatch):
        from memory.backends.files import EntryStore

        def fail(*args, **kwargs):
            raise sqlite3.OperationalError("simulated crash before commit")

        monkeypatch.setattr(EntryStore, "_insert_row", fail)
        with pytest.raises(sqlite3.OperationalError):
            store.log(lines_text(800))
        monkeypatch.undo()
        assert store.list_entries(limit=None) == []
        for entry in store.list_entries(limit=None):  # every row's files exist
            store.fetch(entry.id)
