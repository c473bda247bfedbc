"""The artifact registry (`orchestrator.artifacts.registry`): one record per key in the storage
contract's subagent records, every note merged into it, by this process or by another one."""

from __future__ import annotations

import json
import subprocess
import sys
import threading

import pytest

from memory.paths import Layout
from orchestrator.artifacts.documents import Docs
from orchestrator.artifacts.registry import (
    Keys,
    Status,
    legacy_status,
    registry_lookup,
    registry_note,
    registry_records,
    registry_status,
)


@pytest.fixture
def layout(memory_dir):
    return Layout(memory_dir).ensure()


def record_file(layout, task, key):
    """Where the files backend keeps a key's record: one JSON file people can read."""
    name = key.replace(":", "%3A")
    return layout.root / ".tether" / "records" / "subagents" / task / f"{name}.json"


def test_a_key_merges_its_notes_in_order(layout):
    assert registry_lookup(Docs.of(layout), "t", "findings:a") is None
    registry_note(
        Docs.of(layout),
        "t",
        "findings:a",
        Status.STARTED,
        ts="2025-01-01T00:00:00Z",
        findings={"x": 1},
    )
    assert registry_lookup(Docs.of(layout), "t", "findings:a")["ts"] == "2025-01-01T00:00:00Z"
    registry_note(Docs.of(layout), "t", "findings:b", Status.STARTED, ts="b")
    registry_note(Docs.of(layout), "t", "findings:a", Status.WRITTEN, path="findings/a.md")
    rec = registry_lookup(Docs.of(layout), "t", "findings:a")
    assert rec == {
        "key": "findings:a",
        "ts": "2025-01-01T00:00:00Z",
        "findings": {"x": 1},
        "path": "findings/a.md",
    }
    rec["path"] = "changed by the caller"  # a copy: the registry is unaffected
    assert registry_lookup(Docs.of(layout), "t", "findings:a")["path"] == "findings/a.md"
    assert registry_records(Docs.of(layout), "t") == {
        "findings:a": registry_lookup(Docs.of(layout), "t", "findings:a"),
        "findings:b": {"key": "findings:b", "ts": "b"},
    }
    on_disk = json.loads(record_file(layout, "t", "findings:a").read_text())
    assert (on_disk["status"], on_disk["data"]["path"]) == ("written", "findings/a.md")
    assert json.loads(record_file(layout, "t", "findings:b").read_text())["status"] == "started"
    assert registry_records(Docs.of(layout), "other") == {}


def test_notes_another_process_makes_are_seen(layout):
    registry_note(Docs.of(layout), "t", "k", ts="1")
    assert registry_lookup(Docs.of(layout), "t", "k") == {"key": "k", "ts": "1"}
    code = (
        "import sys; from pathlib import Path; from memory.paths import Layout; "
        "from orchestrator.artifacts.registry import registry_note; "
        "from orchestrator.artifacts.documents import Docs; "
        "registry_note(Docs.of(Layout(Path(sys.argv[1]))), 't', 'k', path='p'); "
        "registry_note(Docs.of(Layout(Path(sys.argv[1]))), 't', 'other', ts='2')"
    )
    subprocess.run([sys.executable, "-c", code, str(layout.root)], check=True)
    assert registry_lookup(Docs.of(layout), "t", "k") == {"key": "k", "ts": "1", "path": "p"}
    assert set(registry_records(Docs.of(layout), "t")) == {"k", "other"}


def test_notes_of_one_key_from_many_writers_are_all_kept(layout):
    def note(n):
        registry_note(Docs.of(layout), "t", "approval:x", **{f"field{n}": n})

    threads = [threading.Thread(target=note, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    expected = {"key": "approval:x", **{f"field{n}": n for n in range(8)}}
    assert registry_lookup(Docs.of(layout), "t", "approval:x") == expected


def test_a_status_is_the_one_its_writer_stated(layout):
    """A note's status is stored as its writer states it, whatever its fields are named;
    only a record stored without a known status has it inferred from its fields."""
    docs = Docs.of(layout)
    key = Keys.findings("p/a")
    assert registry_status(docs, "t", key) is None
    registry_note(docs, "t", key, Status.NOTED, path="x", ts="1")  # fields would say otherwise
    assert registry_status(docs, "t", key) == "noted"
    registry_note(docs, "t", Keys.approval("i"), Status.DECIDED, decided="approve")
    assert registry_status(docs, "t", Keys.approval("i")) == "decided"
    assert legacy_status({"path": "x", "ts": "1"}) == "written"
    assert legacy_status({"ts": "1"}) == "started"
    assert legacy_status({"actions": []}) == "requested"


def test_keys_name_each_kind_and_read_back_the_subtask():
    assert Keys.findings("p/a") == "findings:p/a"
    assert Keys.subtask(Keys.FINDINGS, Keys.findings("p/a")) == "p/a"
    assert Keys.subtask(Keys.REMOTE, Keys.findings("p/a")) is None
    assert Keys.merged("p", 3) == "merged:p:3"
    assert (
        len({Keys.findings("k"), Keys.remote("k"), Keys.transcript("k"), Keys.approval("k")}) == 4
    )
