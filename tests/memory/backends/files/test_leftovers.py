"""What interrupted writes leave is reported, and a read-only error names the right verb.

* A `memory log` killed before its row (an `entries/{id}/` folder without an entry) and a
  write killed before its rename (a hidden `.NAME.tmp-XXXXXXXX` file) are named by
  `memory stats` (text and `--json`) and removed by `memory prune` once an hour old; a
  fresh one is left alone (its write may still be running).
* On a read-only memory directory, `memory summary on` (a verb of a group) names itself.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from memory import MemoryStore
from tests.clis import memory_cli


def _memory(args, cli_env, cwd, prefix=()):
    return memory_cli(args, cli_env, cwd, prefix=prefix)


@pytest.fixture
def interrupted(memory_dir):
    """A memory where a killed `memory log` and a killed fact write left their files."""
    with MemoryStore(memory_dir) as store:
        store.log("an entry that was stored")
        store.backend.put_document("facts/user.md", b"# User\n")
    orphan = memory_dir / "entries" / "mem-20200101-000000-deadbeef"
    orphan.mkdir()
    (orphan / "chunk-0000.gz").write_bytes(b"partial")
    temp = memory_dir / "facts" / ".user.md.tmp-0a1b2c3d"
    temp.write_bytes(b"# User (half written")
    fresh = memory_dir / "working" / ".overview.md.tmp-99aa88bb"
    fresh.write_bytes(b"still being written")
    for path in (orphan, temp):
        os.utime(path, (0, 0))
    return orphan, temp, fresh


def test_stats_names_what_interrupted_writes_left(interrupted, cli_env, tmp_path):
    done = _memory(["stats", "--json"], cli_env, tmp_path)
    assert json.loads(done.stdout)["leftovers"] == {
        "orphan_folders": ["entries/mem-20200101-000000-deadbeef"],
        "temp_files": ["facts/.user.md.tmp-0a1b2c3d", "working/.overview.md.tmp-99aa88bb"],
    }
    text = _memory(["stats"], cli_env, tmp_path).stdout
    assert text.splitlines()[-1] == (
        "Left by interrupted writes: 3 (entries/mem-20200101-000000-deadbeef, "
        "facts/.user.md.tmp-0a1b2c3d, working/.overview.md.tmp-99aa88bb); `memory prune` "
        "removes them once they are an hour old"
    )


def test_prune_removes_the_old_ones_only(interrupted, memory_dir, cli_env, tmp_path):
    orphan, temp, fresh = interrupted
    done = _memory(["prune", "--keep-entries", "5"], cli_env, tmp_path)
    assert done.stdout == (
        "Removed: entries/mem-20200101-000000-deadbeef (files without an entry, left by an "
        "interrupted log)\n"
        "Removed: facts/.user.md.tmp-0a1b2c3d (a temp file left by an interrupted write)\n"
        "Removed 0 entries and 1 orphan folder and 1 temp file.\n"
    )
    assert not orphan.exists() and not temp.exists() and fresh.exists()
    assert (memory_dir / "facts" / "user.md").read_bytes() == b"# User\n"
    after = json.loads(_memory(["stats", "--json"], cli_env, tmp_path).stdout)["leftovers"]
    assert after == {"orphan_folders": [], "temp_files": ["working/.overview.md.tmp-99aa88bb"]}


def test_a_clean_memory_reports_no_leftovers(memory_dir, cli_env, tmp_path):
    with MemoryStore(memory_dir) as store:
        store.log("word " * 3000)
    text = _memory(["stats"], cli_env, tmp_path).stdout
    assert "interrupted" not in text


def test_read_only_summary_on_names_its_own_verb(memory_dir, cli_env, tmp_path):
    if os.geteuid() == 0 and shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: file modes cannot be enforced")
    with MemoryStore(memory_dir) as store:
        store.log("x y z")
    drop = ["setpriv", "--bounding-set=-dac_override,-dac_read_search,-fowner", "--"]
    prefix = drop if os.geteuid() == 0 else []
    subprocess.run(["chmod", "-R", "a-w", str(memory_dir)], check=True)
    try:
        done = [
            _memory(args, cli_env, tmp_path, prefix)
            for args in (["summary", "on"], ["summary", "off"], ["prune", "--keep-days", "1"])
        ]
    finally:
        subprocess.run(["chmod", "-R", "u+w", str(memory_dir)], check=True)
    where = str(memory_dir)
    assert [d.stderr for d in done] == [
        f"Error: memory directory {where!r} is read-only; cannot run `memory {verb}` (make it "
        "writable, or pass --memory-dir to a directory you can write)\n"
        for verb in ("summary on", "summary off", "prune")
    ]
