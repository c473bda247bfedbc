"""The never-delete archive and its summary tree, through `memory.task.archive.Archive`.

Covers: the trigger every N user turns, level-1 summaries naming exact `messages.jsonl`
lines, folding more than five active summaries into the next level, per-task settings that
survive a restart, nothing ever removed from `messages.jsonl`, summariser failures and
timeouts leaving messages active and being retried, and SIGKILL during summarisation
leaving a consistent archive.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from memory import durable
from memory.store import MemoryStore
from memory.task.archive import Archive, note_meta
from memory.task.working import WorkingMemory
from memory.text.summarize import ChatModelSummarizer


def _turns(wm: WorkingMemory, count: int, start: int = 1) -> None:
    for i in range(start, start + count):
        wm.append_messages(
            [
                {"role": "user", "content": f"question {i} about module m{i}"},
                {"role": "assistant", "content": f"answer {i}: m{i} looks fine"},
            ]
        )


@pytest.fixture
def wm():
    return WorkingMemory(MemoryStore(), "t1").ensure()


def check_consistent(wm: WorkingMemory) -> Archive:
    """Assert the archive invariants from the files alone; returns a fresh Archive."""
    archive = Archive(WorkingMemory(wm.store, wm.task_id))
    state = archive.state()
    assert not state.warnings, state.warnings
    line_count = len(wm.messages_path.read_bytes().split(b"\n")) - 1
    level1 = sorted(
        (s for s in state.summaries.values() if s.level == 1), key=lambda s: s.first_line
    )
    expected_first = 1
    for s in level1:  # contiguous from line 1, no overlap, only lines that exist
        assert s.first_line == expected_first, (s.name, s.first_line, expected_first)
        assert s.first_line <= s.last_line <= line_count
        expected_first = s.last_line + 1
    named: dict[str, str] = {}
    for s in state.summaries.values():
        if s.level == 1:
            continue
        for child in s.covers:
            assert child in state.summaries, f"{s.name} names missing {child}"
            assert state.summaries[child].level == s.level - 1
            assert child not in named, f"{child} folded twice"
            named[child] = s.name
    for name in os.listdir(wm.detail_dir):  # every summary file parses
        if name.startswith("summary-"):
            assert name in state.summaries, name
    return archive


class TestTrigger:
    def test_level1_after_n_user_turns_names_its_lines(self, wm):
        archive = Archive(wm)
        _turns(wm, 9)
        assert archive.maybe_summarize() is None
        assert archive.turns_since_last() == 9
        _turns(wm, 1, start=10)
        result = archive.maybe_summarize()
        assert result.ok and [s.name for s in result.written] == ["summary-L1-000001.md"]
        text = (wm.detail_dir / "summary-L1-000001.md").read_text()
        meta = note_meta(text)
        assert meta["covers"] == "messages.jsonl#L1-L20"
        assert meta["level"] == "1"
        assert meta["created"].endswith("Z")
        assert "module" in json.loads(meta["keywords"])
        assert "[L1] user: question 1 about module m1" in text
        assert archive.turns_since_last() == 0
        assert archive.state().chunk_of(7) == "L1-000001"
        assert archive.state().chunk_of(21) is None

    def test_messages_are_never_rewritten(self, wm):
        archive = Archive(wm)
        _turns(wm, 10)
        before = wm.messages_path.read_bytes()
        archive.maybe_summarize()
        _turns(wm, 60, start=11)
        for _ in range(6):
            archive.summarize_now()
        after = wm.messages_path.read_bytes()
        assert after.startswith(before)
        assert len(wm.messages()) == 140

    def test_more_than_five_active_level1_fold_into_level2(self, wm):
        archive = Archive(wm)
        for k in range(6):
            _turns(wm, 10, start=1 + 10 * k)
            archive.maybe_summarize()
        state = archive.state()
        assert [s.name for s in state.active()] == ["summary-L2-000001.md", "summary-L1-000006.md"]
        meta = note_meta((wm.detail_dir / "summary-L2-000001.md").read_text())
        assert meta["covers"] == ", ".join(f"summary-L1-00000{i}.md" for i in range(1, 6))
        assert meta["span"] == "messages.jsonl#L1-L100"
        assert meta["turns"] == "50"
        # folded summaries stay on disk, archived, never deleted
        assert (wm.detail_dir / "summary-L1-000001.md").exists()
        status = archive.status()
        assert status.active_per_level == {1: 1, 2: 1}
        assert status.highest_level == 2
        check_consistent(wm)

    def test_tree_grows_to_level3(self, wm):
        archive = Archive(wm)
        for k in range(31):  # 31 L1 -> 6 L2 -> one L3
            _turns(wm, 10, start=1 + 10 * k)
            archive.maybe_summarize()
        assert archive.status().highest_level == 3
        check_consistent(wm)

    def test_settings_persist_per_task_and_off_stops_summaries(self, wm):
        Archive(wm).configure(threshold=3)
        Archive(wm).configure(enabled=False)
        other = WorkingMemory(wm.store, "t2").ensure()
        assert Archive(other).config().threshold == 10
        archive = Archive(WorkingMemory(MemoryStore(), "t1"))
        assert archive.config().threshold == 3 and archive.config().enabled is False
        _turns(wm, 5)
        assert archive.maybe_summarize() is None
        archive.configure(enabled=True)
        assert archive.maybe_summarize().ok

    def test_archive_state_survives_deleting_memory_db(self, wm):
        archive = Archive(wm)
        _turns(wm, 20)
        archive.summarize_now()
        before = archive.status()
        wm.store.connect()  # memory.db exists, with every module's migrations applied
        wm.store.close()
        wm.store.layout.db.unlink()
        after = Archive(WorkingMemory(MemoryStore(), "t1")).status()
        assert after == before


class TestFailures:
    def test_failure_leaves_messages_active_and_is_retried(self, wm):
        calls = []

        def flaky(text: str, max_tokens: int) -> str:
            calls.append(len(text))
            if len(calls) <= 2:
                raise RuntimeError("model overloaded")
            return "summary of the turns"

        archive = Archive(wm, flaky)
        _turns(wm, 10)
        result = archive.maybe_summarize()
        assert result.error.startswith("summariser failed (RuntimeError: model overloaded)")
        assert not list(wm.detail_dir.glob("summary-*"))
        assert archive.status().archived_messages == 0
        assert archive.turns_since_last() == 10  # counter not reset
        _turns(wm, 1, start=11)
        assert archive.maybe_summarize().error  # retried at the next trigger, fails again
        _turns(wm, 1, start=12)
        result = archive.maybe_summarize()
        assert result.ok and result.written[0].covers == ("messages.jsonl#L1-L24",)
        assert archive.status().archived_messages == 24
        check_consistent(wm)

    def test_timeout_counts_as_failure(self, wm):
        def slow(text: str, max_tokens: int) -> str:
            time.sleep(2)
            return "late"

        archive = Archive(wm, slow, timeout_s=0.2)
        _turns(wm, 10)
        result = archive.maybe_summarize()
        assert "TimeoutError" in result.error
        assert archive.status().archived_messages == 0

    def test_crash_between_level1_and_fold_is_repaired_next_time(self, wm, monkeypatch):
        archive = Archive(wm)
        for k in range(5):
            _turns(wm, 10, start=1 + 10 * k)
            archive.maybe_summarize()
        real_write = durable.atomic_write_bytes

        def crash_on_level2(path, data):
            if path.name.startswith("summary-L2"):
                raise KeyboardInterrupt("killed")
            return real_write(path, data)

        monkeypatch.setattr(durable, "atomic_write_bytes", crash_on_level2)
        _turns(wm, 10, start=51)
        with pytest.raises(KeyboardInterrupt):
            archive.maybe_summarize()
        monkeypatch.setattr(durable, "atomic_write_bytes", real_write)
        fresh = check_consistent(wm)
        assert fresh.status().active_per_level == {1: 6}  # L1 committed, fold pending
        _turns(wm, 10, start=61)
        fresh.maybe_summarize()
        assert fresh.status().active_per_level == {1: 2, 2: 1}
        check_consistent(wm)


def test_chat_model_summariser_and_its_failure(wm):
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage

    model = GenericFakeChatModel(messages=iter([AIMessage("Reviewed m1-m10; all fine.")]))
    archive = Archive(wm, ChatModelSummarizer(model, timeout_s=10))
    _turns(wm, 10)
    result = archive.maybe_summarize()
    assert result.ok
    text = (wm.detail_dir / "summary-L1-000001.md").read_text()
    assert "## Content\nReviewed m1-m10; all fine.\n" in text
    assert note_meta(text)["summarizer"] == "chat-model"
    _turns(wm, 10, start=11)  # the fake model has no more replies: it raises
    result = archive.maybe_summarize()
    assert result.error.startswith("summariser failed (")
    assert archive.status().archived_messages == 20


_CHILD = textwrap.dedent("""
    import sys, time
    from memory.task.archive import Archive
    from memory.store import MemoryStore
    from memory.task.working import WorkingMemory

    def slow(text, max_tokens):
        time.sleep(0.002)
        return text[:200]

    wm = WorkingMemory(MemoryStore(sys.argv[1]), "k").ensure()
    archive = Archive(wm, slow, fanout=2)
    archive.configure(threshold=1)
    i = 0
    while True:
        i += 1
        wm.append_messages([{"role": "user", "content": f"q{i}"},
                            {"role": "assistant", "content": f"a{i}"}])
        archive.maybe_summarize()
""")


def test_sigkill_during_summarisation_leaves_a_consistent_archive(memory_dir):
    rng = random.Random(4)
    env = dict(os.environ)
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = repo
    wm = WorkingMemory(MemoryStore(memory_dir), "k")
    digests = []
    for _ in range(4):
        proc = subprocess.Popen([sys.executable, "-c", _CHILD, str(memory_dir)], env=env)
        deadline = time.monotonic() + 30
        while not wm.messages_path.exists() and time.monotonic() < deadline:
            time.sleep(0.01)  # start-up time varies with the machine's load; kill while it works
        time.sleep(0.4 + rng.random() * 0.6)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        archive = check_consistent(wm)
        data = wm.messages_path.read_bytes()
        digests.append(hashlib.sha256(data).hexdigest())
        assert archive.status().total_messages > 0
    final = check_consistent(wm)
    status = final.status()
    assert status.highest_level >= 2
    assert status.archived_messages <= status.total_messages
    # the killed runs resume: a new summarisation covers exactly what was left active
    before = final.state().covered_until
    result = final.summarize_now()
    assert result.ok
    if result.written:
        assert result.written[0].first_line == before + 1
    check_consistent(wm)


@pytest.mark.parametrize("content", ["{not json", '{"threshold": "x"}', "[]", '{"threshold": 0}'])
def test_garbled_settings_fall_back_to_safe_values(wm, content):
    (wm.task_dir / "summary.json").write_text(content)
    cfg = Archive(wm).config()
    assert cfg.enabled is True and 1 <= cfg.threshold <= 10


def test_concurrent_summarisers_never_cover_a_line_twice(wm):
    import threading

    errors = []

    def worker(k: int) -> None:
        try:
            own = WorkingMemory(wm.store, wm.task_id)
            archive = Archive(own, fanout=2)
            for i in range(15):
                _turns(own, 1, start=100 * k + i)
                archive.summarize_now()
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    archive = check_consistent(wm)
    assert archive.status().archived_messages == archive.status().total_messages == 120
