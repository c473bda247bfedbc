"""The folder watch that lets a search skip the sync's file scan (`files.Watch`).

A search stats every indexed file unless the watch (Linux inotify, local file systems)
saw nothing change under the memory directory since the last scan and no other
connection committed to `memory.db` meanwhile. Whatever changes a file (an append, a
hand edit, a touch, a new or renamed folder, another process) must still be found by the
next search; where the watch cannot be trusted, every search scans as before.
"""

from __future__ import annotations

import builtins
import json
import multiprocessing
import os
import sys
import threading

import pytest

from memory import MemoryStore, durable
from memory.backends.files import Index, Watch


@pytest.fixture
def store(memory_dir):
    store = MemoryStore(memory_dir)
    yield store
    store.close()


@pytest.fixture
def scans(monkeypatch):
    """How many times any index scanned the files."""
    calls = []
    real = Index._scan

    def counting(self, *args, **kwargs):
        calls.append(1)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Index, "_scan", counting)
    return calls


def _watching(store) -> bool:
    store.sync_index()
    watch = store.index._watch
    return watch is not None and watch.active


needs_watch = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="the folder watch is Linux inotify"
)


def _citations(store, query, **kw):
    return [h.citation for h in store.search(query, **kw)]


@needs_watch
class TestSkipsTheScan:
    def test_unchanged_memory_is_not_scanned_again(self, store, scans):
        durable.append_jsonl(store.layout.messages("T1"), {"role": "user", "content": "a heron"})
        assert _watching(store)
        before = len(scans)
        assert _citations(store, "heron") == ["working/T1/messages.jsonl#L1"]
        assert store.sync_index().files_seen == 1  # the last scan's count
        assert len(scans) == before

    def test_hidden_files_and_the_database_do_not_cause_a_scan(self, store, scans):
        durable.append_jsonl(store.layout.messages("T1"), {"role": "user", "content": "a heron"})
        assert _watching(store)
        before = len(scans)
        (store.layout.working / "T1" / ".swap").write_text("editor state")
        store.log("an entry about herons")  # a commit on this connection
        store.search("heron")
        assert len(scans) == before


@needs_watch
class TestSeesEveryChange:
    def test_plain_append_is_found(self, store, scans):
        log = store.layout.messages("T1")
        durable.append_jsonl(log, {"role": "user", "content": "first gecko"})
        assert _watching(store)
        with open(log, "a", encoding="utf-8") as fh:  # no new file, no folder change
            fh.write('{"role": "user", "content": "second lizard"}\n')
        assert _citations(store, "lizard") == ["working/T1/messages.jsonl#L2"]

    def test_hand_edit_in_place_is_found(self, store):
        path = durable.atomic_write_text(store.layout.detail_dir("T1") / "db.md", "marmot\n")
        assert _watching(store)
        with open(path, "r+", encoding="utf-8") as fh:  # same inode, same folder entries
            fh.write("pelica\n")
        assert store.search("marmot") == []
        assert _citations(store, "pelica") == ["working/T1/detail/db.md#L1"]

    def test_touch_reindexes_the_file(self, store):
        path = durable.atomic_write_text(store.layout.detail_dir("T1") / "a.md", "kiwi\n")
        assert _watching(store)
        st = path.stat()
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
        assert store.sync_index().files_indexed == 1

    def test_new_and_renamed_folders_are_found(self, store):
        durable.append_jsonl(store.layout.messages("T1"), {"role": "user", "content": "ibis"})
        assert _watching(store)
        durable.append_jsonl(store.layout.messages("T2"), {"role": "user", "content": "tapir"})
        assert _citations(store, "tapir") == ["working/T2/messages.jsonl#L1"]
        durable.atomic_write_text(store.layout.detail_dir("T2") / "n.md", "okapi\n")
        assert _citations(store, "okapi") == ["working/T2/detail/n.md#L1"]
        os.rename(store.layout.working / "T2", store.layout.working / "T3")
        assert sorted(_citations(store, "tapir okapi")) == [
            "working/T3/detail/n.md#L1",
            "working/T3/messages.jsonl#L1",
        ]
        # the renamed folder is watched under its new name
        with open(store.layout.messages("T3"), "a", encoding="utf-8") as fh:
            fh.write('{"role": "user", "content": "a quokka"}\n')
        assert _citations(store, "quokka") == ["working/T3/messages.jsonl#L2"]

    def test_flat_folder_created_later_is_found(self, store):
        assert _watching(store)
        folder = store.layout.findings
        if folder.exists():
            for p in folder.iterdir():
                p.unlink()
            folder.rmdir()
        store.search("anything")
        folder.mkdir()
        (folder / "f.md").write_text("the narwhal finding\n")
        assert _citations(store, "narwhal") == ["findings/f.md#L1"]

    def test_deleted_file_disappears(self, store):
        path = durable.atomic_write_text(store.layout.detail_dir("T1") / "gone.md", "ocelot\n")
        assert _citations(store, "ocelot") == ["working/T1/detail/gone.md#L1"]
        path.unlink()
        assert store.search("ocelot") == []

    def test_another_processes_append_is_found(self, store):
        durable.append_jsonl(store.layout.messages("A"), {"role": "user", "content": "walrus"})
        assert _watching(store)
        ctx = multiprocessing.get_context("spawn")
        proc = ctx.Process(target=_append, args=(str(store.layout.messages("A")), "narwhal"))
        proc.start()
        proc.join(60)
        assert proc.exitcode == 0
        assert _citations(store, "narwhal") == ["working/A/messages.jsonl#L2"]

    def test_another_connections_commit_makes_the_next_search_scan(self, store, scans):
        durable.append_jsonl(store.layout.messages("T1"), {"role": "user", "content": "heron"})
        assert _watching(store)
        other = MemoryStore(store.root)
        other.reindex()  # drops and refills the index: no file changes
        other.close()
        before = len(scans)
        assert _citations(store, "heron") == ["working/T1/messages.jsonl#L1"]
        assert len(scans) == before + 1

    @pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="needs fork")
    def test_forked_child_does_not_take_the_parents_events(self, store):
        log = store.layout.messages("T1")
        durable.append_jsonl(log, {"role": "user", "content": "first gecko"})
        assert _watching(store)
        _append(str(log), "condor")  # queued for the parent's next search
        ctx = multiprocessing.get_context("fork")
        proc = ctx.Process(target=_child_polls_and_searches, args=(store,))
        proc.start()
        proc.join(60)
        assert proc.exitcode == 0
        assert _citations(store, "condor") == ["working/T1/messages.jsonl#L2"]
        _append(str(log), "puffin")
        assert _citations(store, "puffin") == ["working/T1/messages.jsonl#L3"]

    def test_a_store_collected_during_another_search_does_not_hang_it(self, memory_dir):
        # The collector runs a dead watch's finalizer inside whatever allocates next, which
        # can be the locked part of another search's watch: simulated by calling the
        # finalizer while holding the lock. It used to wait for that lock forever.
        old = MemoryStore(memory_dir)
        durable.append_jsonl(old.layout.messages("T1"), {"role": "user", "content": "heron"})
        assert _watching(old)
        watch = old.index._watch
        inot = watch.inotify  # the process's one inotify instance
        wds = set(watch.paths.values())
        assert wds and all(watch.key in inot.owners[wd] for wd in wds)
        finished = threading.Event()

        def finalizer_inside_locked_code() -> None:
            with inot.lock:
                inot.release(watch.key, watch.paths)
            finished.set()

        worker = threading.Thread(target=finalizer_inside_locked_code, daemon=True)
        worker.start()
        if not finished.wait(10):
            inot.lock.release()  # free the stuck thread: the rest of the run must not hang
            pytest.fail("release waited for the lock its own thread holds")
        other = MemoryStore(memory_dir)
        try:  # the next search drops the released folders
            assert _citations(other, "heron") == ["working/T1/messages.jsonl#L1"]
            assert not any(watch.key in inot.owners.get(wd, {}) for wd in wds)
            assert inot.released == []
        finally:
            other.close()
            old.close()


def _child_polls_and_searches(store) -> None:
    # Only polls its watch: a search would commit, and that alone makes the parent scan.
    assert not store.index._watch.unchanged()  # a child starts with a scan


def _append(path: str, word: str) -> None:
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps({"role": "user", "content": f"a {word}"}) + "\n")


def _fake_mounts(monkeypatch, path, text: str) -> None:
    """`/proc/self/mounts` (where the watch reads each folder's file system) says `text`."""
    path.write_text(text)
    real_open = builtins.open

    def fake_open(file, *args, **kwargs):
        return real_open(path if file == "/proc/self/mounts" else file, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", fake_open)


def test_without_a_trustworthy_watch_every_search_scans(memory_dir, tmp_path, monkeypatch, scans):
    _fake_mounts(monkeypatch, tmp_path / "mounts", "server:/export / nfs4 rw 0 0\n")  # NFS
    store = MemoryStore(memory_dir)
    try:
        durable.append_jsonl(store.layout.messages("T1"), {"role": "user", "content": "heron"})
        store.search("heron")
        before = len(scans)
        store.search("heron")
        store.search("heron")
        assert len(scans) == before + 2
        assert not store.index._watch.active
    finally:
        store.close()


@needs_watch
def test_network_file_systems_are_not_trusted(tmp_path, monkeypatch):
    _fake_mounts(
        monkeypatch,
        tmp_path / "mounts",
        "/dev/vda / ext4 rw 0 0\nserver:/export /mnt/nfs nfs4 rw 0 0\n"
        "fuse /mnt/my\\040drive fuse.sshfs rw 0 0\n",
    )
    monkeypatch.setattr(os.path, "realpath", lambda p: p)
    assert Watch.for_root("/home/me/memory").active
    assert not Watch.for_root("/mnt/nfs/memory").active
    assert not Watch.for_root("/mnt/my drive/memory").active
