"""The artifact registry (`orchestrator.registry`): merged records per key, read once per
file and then only what was appended, by this process or by another one."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from memory.durable import read_jsonl
from memory.paths import Layout
from orchestrator.registry import registry_lookup, registry_note, registry_records


@pytest.fixture
def layout(memory_dir):
    return Layout(memory_dir).ensure()


def registry_path(layout, task):
    """The registry's file: the files backend keeps the format people and tools read."""
    return layout.root / ".tether" / "registry" / f"{task}.jsonl"


def _slow_merge(layout, task):
    """What a lookup must equal: the whole file parsed with `read_jsonl`, merged in order."""
    out: dict = {}
    for _n, rec in read_jsonl(registry_path(layout, task)).records:
        if rec.get("key") and isinstance(rec["key"], str):
            out[rec["key"]] = {**out.get(rec["key"], {}), **rec}
    return out


def test_a_key_merges_its_lines_in_order(layout):
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
    assert registry_records(layout, "t") == _slow_merge(layout, "t")


def test_lines_another_process_appends_are_seen(layout):
    registry_note(layout, "t", "k", ts="1")
    assert registry_lookup(layout, "t", "k") == {"key": "k", "ts": "1"}
    code = (
        "import sys; from pathlib import Path; from memory.paths import Layout; "
        "from orchestrator.registry import registry_note; "
        "registry_note(Layout(Path(sys.argv[1])), 't', 'k', path='p'); "
        "registry_note(Layout(Path(sys.argv[1])), 't', 'other', ts='2')"
    )
    subprocess.run([sys.executable, "-c", code, str(layout.root)], check=True)
    assert registry_lookup(layout, "t", "k") == {"key": "k", "ts": "1", "path": "p"}
    assert registry_records(layout, "t") == _slow_merge(layout, "t")


def test_torn_and_foreign_lines_are_skipped_as_read_jsonl_does(layout):
    registry_note(layout, "t", "k", ts="1")
    registry_lookup(layout, "t", "k")
    path = registry_path(layout, "t")
    with open(path, "ab") as fh:
        fh.write(b'not json\n["a list"]\n{"key": ["unhashable"]}\n{"key": "k", "path": "p"}')
    # a complete last line without its newline counts (as in `read_jsonl`) ...
    assert registry_lookup(layout, "t", "k") == {"key": "k", "ts": "1", "path": "p"}
    assert registry_records(layout, "t") == _slow_merge(layout, "t")
    # ... and the next append closes it as a line of its own
    registry_note(layout, "t", "k", done=True)
    assert registry_lookup(layout, "t", "k") == {"key": "k", "ts": "1", "path": "p", "done": True}
    with open(path, "ab") as fh:
        fh.write(b'{"key": "k", "pa')  # torn mid-line: skipped
    assert registry_lookup(layout, "t", "k")["path"] == "p"
    assert registry_records(layout, "t") == _slow_merge(layout, "t")


def test_a_file_replaced_or_removed_is_read_again(layout):
    registry_note(layout, "t", "k", ts="1")
    registry_note(layout, "t", "k", path="old")
    assert registry_lookup(layout, "t", "k")["path"] == "old"
    path = registry_path(layout, "t")
    replacement = path.with_suffix(".new")
    replacement.write_text(json.dumps({"key": "k", "ts": "2"}) + "\n")
    os.replace(replacement, path)
    assert registry_lookup(layout, "t", "k") == {"key": "k", "ts": "2"}
    path.unlink()
    assert registry_lookup(layout, "t", "k") is None
    assert registry_records(layout, "t") == {}
