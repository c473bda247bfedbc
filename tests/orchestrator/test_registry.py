"""The artifact registry (`orchestrator.artifacts.registry`): one record per key in the storage
contract's subagent records, every note merged into it, by this process or by another one;
a registry an older version kept as `.tether/registry/{task}.jsonl` is read and copied."""

from __future__ import annotations

import json
import subprocess
import sys
import threading

import pytest

from memory.paths import Layout
from orchestrator.artifacts.registry import registry_lookup, registry_note, registry_records


@pytest.fixture
def layout(memory_dir):
    return Layout(memory_dir).ensure()


def record_file(layout, task, key):
    """Where the files backend keeps a key's record: one JSON file people can read."""
    name = key.replace(":", "%3A")
    return layout.root / ".tether" / "records" / "subagents" / task / f"{name}.json"


def test_a_key_merges_its_notes_in_order(layout):
    assert registry_lookup(layout, "t", "findings:a") is None
    registry_note(layout, "t", "findings:a", ts="2025-01-01T00:00:00Z", findings={"x": 1})
    assert registry_lookup(layout, "t", "findings:a")["ts"] == "2025-01-01T00:00:00Z"
    registry_note(layout, "t", "findings:b", ts="b")
    registry_note(layout, "t", "findings:a", path="findings/a.md")
    rec = registry_lookup(layout, "t", "findings:a")
    assert rec == {
        "key": "findings:a",
        "ts": "2025-01-01T00:00:00Z",
        "findings": {"x": 1},
        "path": "findings/a.md",
    }
    rec["path"] = "changed by the caller"  # a copy: the registry is unaffected
    assert registry_lookup(layout, "t", "findings:a")["path"] == "findings/a.md"
    assert registry_records(layout, "t") == {
        "findings:a": registry_lookup(layout, "t", "findings:a"),
        "findings:b": {"key": "findings:b", "ts": "b"},
    }
    on_disk = json.loads(record_file(layout, "t", "findings:a").read_text())
    assert (on_disk["status"], on_disk["data"]["path"]) == ("written", "findings/a.md")
    assert json.loads(record_file(layout, "t", "findings:b").read_text())["status"] == "started"
    assert registry_records(layout, "other") == {}


def test_notes_another_process_makes_are_seen(layout):
    registry_note(layout, "t", "k", ts="1")
    assert registry_lookup(layout, "t", "k") == {"key": "k", "ts": "1"}
    code = (
        "import sys; from pathlib import Path; from memory.paths import Layout; "
        "from orchestrator.artifacts.registry import registry_note; "
        "registry_note(Layout(Path(sys.argv[1])), 't', 'k', path='p'); "
        "registry_note(Layout(Path(sys.argv[1])), 't', 'other', ts='2')"
    )
    subprocess.run([sys.executable, "-c", code, str(layout.root)], check=True)
    assert registry_lookup(layout, "t", "k") == {"key": "k", "ts": "1", "path": "p"}
    assert set(registry_records(layout, "t")) == {"k", "other"}


def test_notes_of_one_key_from_many_writers_are_all_kept(layout):
    def note(n):
        registry_note(layout, "t", "approval:x", **{f"field{n}": n})

    threads = [threading.Thread(target=note, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    expected = {"key": "approval:x", **{f"field{n}": n for n in range(8)}}
    assert registry_lookup(layout, "t", "approval:x") == expected


def test_a_registry_an_older_version_kept_is_read_and_copied(layout):
    legacy = layout.root / ".tether" / "registry" / "old.jsonl"
    legacy.parent.mkdir(parents=True, exist_ok=True)
    lines = [
        {"key": "findings:a", "ts": "1", "findings": {"x": 1}},
        {"key": "merged:p:1", "ts": "2"},
        {"key": "findings:a", "path": "findings/a.md"},
    ]
    text = "".join(json.dumps(r) + "\n" for r in lines)
    legacy.write_text(text + 'not json\n["a list"]\n{"key": ["unhashable"]}\n{"key": "k", "pa')
    assert registry_lookup(layout, "old", "findings:a") == {
        "key": "findings:a",
        "ts": "1",
        "findings": {"x": 1},
        "path": "findings/a.md",
    }
    assert set(registry_records(layout, "old")) == {"findings:a", "merged:p:1"}
    assert record_file(layout, "old", "merged:p:1").is_file()  # copied to its record
    assert legacy.read_text().startswith(text)  # and the old file kept as it was
    registry_note(layout, "old", "merged:p:1", path="findings/merged.md")
    code = (
        "import sys; from pathlib import Path; from memory.paths import Layout; "
        "from orchestrator.artifacts.registry import registry_lookup; "
        "print(registry_lookup(Layout(Path(sys.argv[1])), 'old', 'merged:p:1')['path'])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(layout.root)], check=True, capture_output=True, text=True
    )
    assert out.stdout.strip() == "findings/merged.md"  # the old line does not win again
