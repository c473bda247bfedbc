"""The incremental full-text index (`memory.backends.files.Index`): what sync notices and costs.

Files are the truth: hand edits, deletions, appends and torn jsonl tails must show up in
the next search; unchanged files must not be read again; a rebuild (also after deleting
memory.db) gives the same answers; two processes syncing at once stay consistent.
"""

from __future__ import annotations

import builtins
import json
import multiprocessing
import os

import pytest

from memory import MemoryStore, durable
from memory.backends.blocks import split_blocks
from memory.backends.files import Index


@pytest.fixture
def store(memory_dir):
    store = MemoryStore(memory_dir)
    yield store
    store.close()


def _note(store, name, text, task="T1"):
    return durable.atomic_write_text(store.layout.detail_dir(task) / name, text)


def _citations(store, query, **kw):
    return [h.citation for h in store.search(query, **kw)]


class TestFileChanges:
    def test_hand_edited_file_is_found_and_old_text_is_not(self, store):
        path = _note(store, "db.md", "# Database\n\nWe use the marmot database driver.\n")
        assert _citations(store, "marmot driver") == ["working/T1/detail/db.md#L3"]
        with open(path, "a", encoding="utf-8") as fh:  # a person editing by hand
            fh.write("\n")
        path.write_text("# Database\n\nline two\n\nSwitched to the pelican driver.\n")
        assert _citations(store, "pelican driver") == ["working/T1/detail/db.md#L5"]
        assert store.search("marmot") == []

    def test_deleted_file_disappears(self, store):
        path = _note(store, "gone.md", "The ocelot config lives here.\n")
        assert _citations(store, "ocelot") == ["working/T1/detail/gone.md#L1"]
        path.unlink()
        assert store.search("ocelot") == []
        assert store.index.row_count() == 0

    def test_unchanged_files_are_not_indexed_again(self, store):
        _note(store, "a.md", "alpha note about kiwis\n")
        durable.append_jsonl(store.layout.messages("T1"), {"role": "user", "content": "kiwi"})
        first = store.sync_index()
        assert (first.files_indexed, first.rows_added) == (2, 2)
        again = store.sync_index()
        assert (again.files_indexed, again.rows_added, again.rows_removed) == (0, 0, 0)
        assert not again.changed

    def test_unchanged_files_are_not_even_opened(self, store, memory_dir, monkeypatch):
        _note(store, "a.md", "alpha note about kiwis\n")
        durable.append_jsonl(store.layout.messages("T1"), {"role": "user", "content": "kiwi"})
        store.sync_index()
        real_open, root = builtins.open, os.path.realpath(memory_dir)

        def no_reads(file, *args, **kwargs):
            if isinstance(file, str | bytes | os.PathLike):
                if os.path.realpath(os.fsdecode(file)).startswith(root + os.sep):
                    raise AssertionError(f"index opened {file!r} although nothing changed")
            return real_open(file, *args, **kwargs)

        monkeypatch.setattr(builtins, "open", no_reads)
        assert len(store.search("kiwi")) == 2

    def test_hidden_files_and_the_database_are_ignored(self, store):
        detail = store.layout.detail_dir("T1")
        _note(store, "seen.md", "visible narwhal\n")
        (detail / ".draft.md").write_text("hidden narwhal\n")
        hidden_task = store.layout.working / ".tmp"
        hidden_task.mkdir(parents=True)
        (hidden_task / "overview.md").write_text("hidden narwhal\n")
        assert _citations(store, "narwhal", limit=10) == ["working/T1/detail/seen.md#L1"]

    def test_machine_metadata_comments_are_not_indexed(self, store):
        body = "# Findings: scout\n\nThe parser lives in src/parse.py.\n\n"
        meta = '<!-- tether:findings {"note": "zebracorn only here"} -->\n'
        durable.atomic_write_text(store.layout.findings / "scout_1.md", body + meta)
        assert _citations(store, "zebracorn") == []
        assert _citations(store, "where is the parser") == ["findings/scout_1.md#L3"]

    def test_markdown_blocks_keep_their_line_numbers(self):
        text = "# Title\n\n<!-- meta -->\n\n## Decision\n\nUse JWT.\nRotate keys.\n\n\nTail\n"
        assert split_blocks(text) == [
            (1, "# Title\n\n<!-- meta -->"),
            (5, "## Decision\n\nUse JWT.\nRotate keys."),
            (11, "Tail"),
        ]


class TestMessages:
    def test_appended_messages_are_found_and_only_they_are_indexed(self, store):
        log = store.layout.messages("T2")
        durable.append_jsonl(
            log, [{"role": "user", "content": f"note {i}"} for i in range(30)], many=True
        )
        assert store.sync_index().rows_added == 30
        first = durable.append_jsonl(
            log,
            [
                {"role": "assistant", "content": "the capybara service is healthy"},
                {"role": "tool", "name": "bash", "content": "capybara: 3 replicas ready"},
            ],
            many=True,
        )
        report = store.sync_index()
        assert (report.rows_added, report.rows_removed) == (2, 0)
        assert sorted(_citations(store, "capybara")) == [
            f"working/T2/messages.jsonl#L{first}",
            f"working/T2/messages.jsonl#L{first + 1}",
        ]

    def test_torn_last_line_waits_until_it_is_complete(self, store):
        log = store.layout.messages("T1")
        durable.append_jsonl(log, {"role": "user", "content": "first gecko"})
        with open(log, "ab") as fh:  # a writer killed mid-line
            fh.write(b'{"role": "user", "content": "second gec')
        assert _citations(store, "gecko") == ["working/T1/messages.jsonl#L1"]
        with open(log, "ab") as fh:
            fh.write(b'ko lizard"}\n')
        assert _citations(store, "lizard") == ["working/T1/messages.jsonl#L2"]

    def test_bad_lines_are_skipped_but_counted(self, store):
        log = store.layout.messages("T1")
        log.parent.mkdir(parents=True)
        log.write_bytes(
            b'{"role": "user", "content": "one"}\nnot json at all\n\xff\xfe\n'
            b'{"role": "user", "content": "the heron line"}\n'
        )
        assert _citations(store, "heron") == ["working/T1/messages.jsonl#L4"]

    def test_lines_python_reads_but_strict_json_does_not_are_still_searched(self, store):
        log = store.layout.messages("T1")
        log.parent.mkdir(parents=True)
        log.write_bytes(
            b'{"role": "tool", "content": "the capybara score", "score": NaN}\n'
            b'{"role": "tool", "content": "a walrus count", "n": 123456789012345678901234567890}\n'
            b'{"role": "user", "content": "lone \\ud800 surrogate and an ibis"}\n'
        )
        assert _citations(store, "capybara") == ["working/T1/messages.jsonl#L1"]
        assert _citations(store, "walrus") == ["working/T1/messages.jsonl#L2"]
        assert _citations(store, "ibis") == ["working/T1/messages.jsonl#L3"]

    def test_rewritten_log_is_reindexed(self, store):
        log = store.layout.messages("T1")
        durable.append_jsonl(log, {"role": "user", "content": "old badger text"})
        assert _citations(store, "badger")
        durable.atomic_write_bytes(log, b'{"role": "user", "content": "new stoat text, long"}\n')
        assert store.search("badger") == []
        assert _citations(store, "stoat") == ["working/T1/messages.jsonl#L1"]

    @pytest.mark.parametrize("pipeline", [False, True], ids=["inline", "planned-ahead"])
    def test_big_log_is_indexed_in_bounded_batches(self, store, monkeypatch, pipeline):
        # planned ahead: a helper thread plans the next slice while the last one is written
        monkeypatch.setattr(Index, "BATCH_ROWS", 7)
        monkeypatch.setattr(Index, "PIPELINE_BYTES", 0 if pipeline else 1 << 40)
        log = store.layout.messages("T1")
        durable.append_jsonl(
            log, [{"role": "user", "content": f"heron {i}"} for i in range(50)], many=True
        )
        report = store.sync_index()
        assert (report.files_indexed, report.rows_added, report.rows_removed) == (1, 50, 0)
        hits = store.search("heron 37", limit=1)
        assert hits[0].citation == "working/T1/messages.jsonl#L38"
        durable.append_jsonl(log, {"role": "user", "content": "the last egret"})
        assert store.sync_index().rows_added == 1
        assert _citations(store, "egret") == ["working/T1/messages.jsonl#L51"]
        assert store.index.row_count() == 51

    def test_many_files_planned_ahead_index_as_planned_inline(self, memory_dir, monkeypatch):
        monkeypatch.setattr(Index, "BATCH_ROWS", 5)
        layout = MemoryStore(memory_dir).layout
        for t in range(4):
            rows = [{"role": "user", "content": f"gecko {t} note {i}"} for i in range(9)]
            durable.append_jsonl(layout.messages(f"T{t}"), rows, many=True)
            _note(
                MemoryStore(memory_dir), f"n{t}.md", f"# Gecko {t}\n\nplain gecko text\n", f"T{t}"
            )
        found = {}
        for threshold in (1 << 40, 0):
            monkeypatch.setattr(Index, "PIPELINE_BYTES", threshold)
            store = MemoryStore(memory_dir)
            report = store.reindex()
            assert (report.files_indexed, report.rows_added) == (8, 40)
            assert store.index.row_count() == 40
            found[threshold] = sorted(_citations(store, "gecko", limit=50))
            assert _citations(store, "gecko 2 note 7", limit=1) == ["working/T2/messages.jsonl#L8"]
            store.close()
        assert found[0] == found[1 << 40] and len(found[0]) > 30

    def test_text_after_a_nul_is_searchable(self, store):
        log = store.layout.messages("T1")
        durable.append_jsonl(log, {"role": "tool", "content": "binary junk\u0000then a quokka"})
        _note(store, "dump.md", "a blob \x00 and a wombat\n")
        assert _citations(store, "quokka") == ["working/T1/messages.jsonl#L1"]
        assert _citations(store, "wombat") == ["working/T1/detail/dump.md#L1"]

    def test_message_text_has_no_json_noise(self, store):
        durable.append_jsonl(
            store.layout.messages("T1"),
            {
                "role": "assistant",
                "content": "",
                "ts": "2026-01-01T00:00:00Z",
                "tool_calls": [
                    {
                        "id": "call_1",
                        "name": "bash",
                        "args": {"command": "pytest tests/test_flamingo.py"},
                    }
                ],
            },
        )
        hit = store.search("flamingo")[0]
        assert hit.text == "assistant: bash pytest tests/test_flamingo.py"


class TestRebuild:
    def test_reindex_after_deleting_the_database_gives_the_same_results(self, store):
        _note(store, "auth.md", "# Auth\n\nWe chose JWT with refresh rotation.\n")
        durable.append_jsonl(
            store.layout.messages("T1"),
            [{"role": "user", "content": f"jwt question {i}"} for i in range(5)],
            many=True,
        )
        before = [h.to_dict() for h in store.search("jwt refresh rotation", limit=10)]
        store.close()
        for suffix in ("", "-wal", "-shm"):
            path = store.layout.db.with_name("memory.db" + suffix)
            if path.exists():
                path.unlink()
        fresh = MemoryStore(store.root)
        report = fresh.reindex()
        assert (report.files_indexed, report.rows_added) == (2, 6)
        assert [h.to_dict() for h in fresh.search("jwt refresh rotation", limit=10)] == before
        fresh.close()

    def test_rebuild_replaces_rather_than_duplicates(self, store):
        _note(store, "x.md", "one puffin\n")
        store.sync_index()
        store.reindex()
        store.reindex()
        assert store.index.row_count() == 1
        assert len(store.search("puffin", limit=10)) == 1


def _sync_worker(root: str, rounds: int) -> None:
    store = MemoryStore(root)
    for _ in range(rounds):
        store.sync_index()
    store.close()


def _append_worker(root: str, task: str, n: int) -> None:
    store = MemoryStore(root)
    for i in range(n):
        durable.append_jsonl(
            store.layout.messages(task), {"role": "user", "content": f"walrus {task} message {i}"}
        )
        if i % 10 == 0:
            store.search("walrus")
    store.close()


class TestConcurrency:
    def test_two_processes_syncing_at_once_stay_consistent(self, store):
        for t in range(6):
            records = [{"role": "user", "content": f"otter {t} {i}"} for i in range(300)]
            durable.append_jsonl(store.layout.messages(f"T{t}"), records, many=True)
            _note(store, "n.md", f"otter note {t}\n", task=f"T{t}")
        ctx = multiprocessing.get_context("spawn")
        procs = [ctx.Process(target=_sync_worker, args=(str(store.root), 3)) for _ in range(2)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(60)
        assert [p.exitcode for p in procs] == [0, 0]
        self._assert_consistent(store, 6 * 301)

    def test_appends_and_searches_from_two_processes(self, store):
        ctx = multiprocessing.get_context("spawn")
        procs = [
            ctx.Process(target=_append_worker, args=(str(store.root), t, 60)) for t in ("A", "B")
        ]
        for p in procs:
            p.start()
        for p in procs:
            p.join(60)
        assert [p.exitcode for p in procs] == [0, 0]
        self._assert_consistent(store, 120)
        hits = store.search("walrus B message 59", scope="messages", limit=1)
        assert hits[0].citation == "working/B/messages.jsonl#L60"

    @staticmethod
    def _assert_consistent(store, expected_rows):
        store.sync_index()
        conn = store.connect()
        cites = conn.execute(
            "SELECT f.path, d.line FROM idx_docs d JOIN idx_files f ON f.id = d.file_id"
        ).fetchall()
        assert len(cites) == len(set(map(tuple, cites))) == expected_rows
        fts_rows = sum(
            conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
            for t in ("idx_msg", "idx_doc", "idx_ent")
        )
        assert fts_rows == expected_rows


def test_index_writes_nothing_but_the_database(store):
    _note(store, "a.md", "some heron text\n")

    def files():
        return sorted(
            str(p.relative_to(store.root))
            for p in store.root.rglob("*")
            if not p.name.startswith("memory.db")
        )

    before = files()
    store.search("heron")
    store.reindex()
    assert files() == before
    assert json.loads(json.dumps(store.sync_index().to_dict()))["files_seen"] == 1
