"""A damaged `memory.db` never blocks work: moved aside, rebuilt from the files, one warning.

`memory.db` is derived (entries come back from `entries/journal.jsonl`, the index from the
files). Three kinds of damage, each where SQLite reports it: a truncated file, a garbled
header ("file is not a database"), and stored text that is no longer UTF-8 (garbled page
bytes, "Could not decode to UTF-8"). Every verb that meets one moves the file aside to
`memory.db.damaged-*` (byte for byte what was there), says so in one `Warning:` line and
gives the answer it would have given on a healthy memory: `memory search`, `list`, `fetch`,
`log`, `stats`, `reindex`, and `orchestrator status`, `run` and `resume`. Another process
still connected to the old file follows to the new one. A read-only memory cannot be
repaired: one `Error:` line.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys

import pytest
from click.testing import CliRunner

from memory import MemoryStore
from tests.clis import memory_cli

WARNING = "Warning: memory.db was damaged ({why}); moved it to 'memory.db.damaged-"
WHY = {
    "truncated": "database disk image is malformed",
    "header": "file is not a database",
    "text": "stored text is not UTF-8",
}


def _memory(args, cli_env, cwd):
    return memory_cli(args, cli_env, cwd)


def _settle(memory_dir):
    """Fold the WAL into `memory.db`, so damage to the file is damage to everything."""
    conn = sqlite3.connect(memory_dir / "memory.db")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()


def damage(memory_dir, kind) -> bytes:
    """Damage `memory.db` the way `kind` says; its bytes afterwards."""
    _settle(memory_dir)
    db = memory_dir / "memory.db"
    data = bytearray(db.read_bytes())
    if kind == "truncated":
        data = data[: len(data) // 3]
    elif kind == "header":
        data[:100] = b"\x00garbled" * 12 + b"\x00\x00\x00\x00"
    else:  # garbled bytes inside stored text: every copy of the planted words
        assert data.count(b"lorem ipsum") > 0
        data = bytearray(bytes(data).replace(b"lorem ipsum", b"lorem \xff\xfesum"))
    db.write_bytes(bytes(data))
    return bytes(data)


@pytest.fixture
def memory(memory_dir):
    """A memory with facts, a small and a large entry, indexed."""
    with MemoryStore(memory_dir) as store:
        small = store.log("zebra crossing notes, lorem ipsum")
        large = store.log("zebra " * 3000)
        for n in range(30):
            fact = f"Fact {n}: a zebra crossing number {n * 7919}, lorem ipsum.\n"
            store.backend.put_document(f"facts/f{n}.md", fact.encode())
        found = sorted(r.citation for r in store.search("zebra", limit=50))
        assert small.id in found and "facts/f7.md#L1" in found
    return memory_dir, small.id, large.id, found


def _asides(memory_dir):
    return sorted(p for p in memory_dir.iterdir() if p.name.startswith("memory.db.damaged-"))


def _check_repaired(done, memory_dir, damaged_bytes, kind):
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(WARNING.format(why=WHY[kind])), done.stderr
    (aside,) = _asides(memory_dir)
    assert aside.read_bytes() == damaged_bytes  # kept, never deleted
    assert lines[0].endswith(
        f"{aside.name}' and started a new one, rebuilt from the files and entries/journal.jsonl"
    )
    shutil.move(aside, memory_dir.parent / aside.name)  # the next verb finds one aside only


@pytest.mark.parametrize("kind", ["truncated", "header", "text"])
def test_search_rebuilds_and_answers(memory, kind, cli_env, tmp_path):
    memory_dir, _small, _large, healthy = memory
    damaged = damage(memory_dir, kind)
    done = _memory(["search", "zebra", "--json", "--limit", "50"], cli_env, tmp_path)
    _check_repaired(done, memory_dir, damaged, kind)
    assert sorted(hit["citation"] for hit in json.loads(done.stdout)) == healthy


VERBS = [
    (["list", "--json"], lambda out, ids: [e["id"] for e in json.loads(out)] == ids[::-1]),
    (["stats", "--json"], lambda out, ids: json.loads(out)["entries"] == 2),
    (["fetch", "{large}"], lambda out, ids: out == "zebra " * 3000),
    (["log", "a new entry after the damage"], lambda out, ids: out.startswith("Stored: mem-")),
    (["reindex"], lambda out, ids: out.startswith("Reindexed ")),
]


@pytest.mark.parametrize("kind", ["truncated", "header"])
def test_every_memory_verb_rebuilds_and_answers(memory, kind, cli_env, tmp_path):
    memory_dir, small, large, _healthy = memory
    for args, answer_ok in VERBS:
        damaged = damage(memory_dir, kind)
        done = _memory([a.format(large=large) for a in args], cli_env, tmp_path)
        _check_repaired(done, memory_dir, damaged, kind)
        assert answer_ok(done.stdout, [small, large]), (args, done.stdout[:500])


def test_text_damage_is_found_by_the_verb_that_reads_it(memory, cli_env, tmp_path):
    memory_dir, small, large, _healthy = memory
    damaged = damage(memory_dir, "text")  # the small entry's summary is garbled too
    done = _memory(["list", "--json"], cli_env, tmp_path)
    _check_repaired(done, memory_dir, damaged, "text")
    listed = json.loads(done.stdout)
    assert [e["summary"] for e in listed][1] == "zebra crossing notes, lorem ipsum"


def test_a_process_still_on_the_old_file_follows_to_the_new_one(memory):
    memory_dir, small, _large, _healthy = memory
    with MemoryStore(memory_dir) as first, MemoryStore(memory_dir) as second:
        assert first.get_entry(small).id == small  # connected to today's memory.db
        damage(memory_dir, "header")
        assert second.get_entry(small).id == small  # repaired: a new memory.db
        added = first.log("logged by the process that was connected before the repair")
        assert second.get_entry(added.id).id == added.id
        assert second.fetch(added.id).startswith("logged by the process")


def test_orchestrator_status_run_and_resume_rebuild_and_go_on(memory_dir, tmp_path):
    from orchestrator.cli.app import cli

    work = tmp_path / "proj"
    work.mkdir()
    (work / "app.py").write_text("def handle_cookie():\n    return 1\n")
    runner = CliRunner()
    first = runner.invoke(cli, ["run", "Survey the app", "--workdir", str(work), "--task", "t1"])
    assert first.exit_code == 0, first.output
    steps = [
        (["status", "--task", "t1"], "Task t1: done"),
        (["resume", "--task", "t1"], "Task t1: done"),
        (["run", "Survey it again", "--workdir", str(work), "--task", "t2"], "Task t2: done"),
    ]
    for args, answer in steps:
        damaged = damage(memory_dir, "header")
        done = runner.invoke(cli, args)
        assert done.exit_code == 0, done.output
        assert answer in done.stdout
        warnings = [line for line in done.stderr.splitlines() if line.startswith("Warning:")]
        assert len(warnings) == 1 and warnings[0].startswith(WARNING.format(why=WHY["header"]))
        (aside,) = _asides(memory_dir)
        assert aside.read_bytes() == damaged
        shutil.move(aside, tmp_path / aside.name)


def test_a_read_only_damaged_memory_is_one_error_line(memory, cli_env, tmp_path):
    if os.geteuid() == 0 and shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: file modes cannot be enforced")
    memory_dir, _small, _large, _healthy = memory
    damage(memory_dir, "header")
    subprocess.run(["chmod", "-R", "a-w", str(memory_dir)], check=True)
    try:
        drop = ["setpriv", "--bounding-set=-dac_override,-dac_read_search,-fowner", "--"]
        prefix = drop if os.geteuid() == 0 else []
        done = subprocess.run(
            [*prefix, sys.executable, "-m", "memory", "search", "zebra"],
            capture_output=True,
            text=True,
            env=cli_env,
            cwd=tmp_path,
            timeout=120,
        )
    finally:
        subprocess.run(["chmod", "-R", "u+w", str(memory_dir)], check=True)
    assert done.returncode == 1
    assert done.stderr.endswith(
        f"Error: {str(memory_dir / 'memory.db')!r} is damaged (file is not a database) and "
        "its directory is read-only; ask its owner to run `memory reindex` (the files are "
        "intact)\n"
    )
    assert _asides(memory_dir) == []
