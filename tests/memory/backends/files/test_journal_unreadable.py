"""No entry is lost in silence when `memory.db` is rebuilt from `entries/journal.jsonl`.

With `memory.db` gone, every journal line whose entry cannot come back is named as
`entries/journal.jsonl:LINE` in one `Warning:` line, the bytes of an unreadable line are
kept in `entries/unreadable/`, the other entries are restored, and `memory reindex` exits 3.
A damaged line whose entry is still in `memory.db` is not a loss and says nothing. A tree
imported into `memory://` or PostgreSQL names its unreadable lines the same way.
"""

from __future__ import annotations

import json

import pytest

from memory import MemoryStore
from memory.backends import open_backend
from memory.backends.files.tree import import_tree
from tests.clis import memory_cli
from tests.pg import private_schema


def _memory(args, cli_env, cwd):
    return memory_cli(args, cli_env, cwd)


def _journal(memory_dir):
    return memory_dir / "entries" / "journal.jsonl"


def _garble(path, line, at=10):
    """Overwrite 20 bytes of line `line` (from its byte `at`) with bytes that are not UTF-8."""
    lines = path.read_bytes().split(b"\n")
    raw = lines[line - 1]
    lines[line - 1] = raw[:at] + b"\xff\xfe" * 10 + raw[at + 20 :]
    path.write_bytes(b"\n".join(lines))
    return lines[line - 1]


def _drop_db(memory_dir):
    for name in ("memory.db", "memory.db-wal", "memory.db-shm"):
        (memory_dir / name).unlink(missing_ok=True)


@pytest.fixture
def three(memory_dir):
    with MemoryStore(memory_dir) as store:
        return [store.log(f"entry number {n} about the cache").id for n in range(3)]


def test_reindex_names_the_unreadable_line_keeps_its_bytes_and_exits_3(
    three, memory_dir, cli_env, tmp_path
):
    garbled = _garble(_journal(memory_dir), 2)
    _drop_db(memory_dir)
    done = _memory(["reindex"], cli_env, tmp_path)
    assert done.returncode == 3, done.stderr
    assert done.stdout.startswith("Reindexed ")
    aside = memory_dir / "entries" / "unreadable" / "journal.jsonl-L2"
    assert done.stderr == (
        f"Warning: entries/journal.jsonl:2: unreadable line of {len(garbled)} bytes (kept in "
        "'entries/unreadable/journal.jsonl-L2'); an entry logged on it is not restored\n"
    )
    assert aside.read_bytes() == garbled
    listed = _memory(["list", "--json"], cli_env, tmp_path)
    assert [e["id"] for e in json.loads(listed.stdout)] == [three[2], three[0]]


def test_every_command_warns_when_it_restores_the_entries(three, memory_dir, cli_env, tmp_path):
    _garble(_journal(memory_dir), 3)
    _drop_db(memory_dir)
    done = _memory(["search", "cache"], cli_env, tmp_path)
    assert done.returncode == 0
    assert done.stderr.startswith("Warning: entries/journal.jsonl:3: unreadable line of ")
    again = _memory(["search", "cache"], cli_env, tmp_path)  # restored once: nothing more
    assert again.stderr == ""


def test_a_file_entry_whose_files_are_gone_is_named(memory_dir, cli_env, tmp_path):
    with MemoryStore(memory_dir) as store:
        big = store.log("word " * 3000)
        store.log("small entry")
    for part in (memory_dir / "entries" / big.id).iterdir():
        part.rename(tmp_path / part.name)
    _drop_db(memory_dir)
    done = _memory(["reindex"], cli_env, tmp_path)
    assert done.returncode == 3
    assert done.stderr == (
        f"Warning: entries/journal.jsonl:1: entry {big.id!r} is not restored: its files "
        f"under 'entries/{big.id}/content.gz' are missing or outside the memory\n"
    )


def test_a_damaged_line_whose_entry_is_in_memory_db_is_no_loss(
    three, memory_dir, cli_env, tmp_path
):
    _garble(_journal(memory_dir), 2, at=120)  # the id at the start of the line is intact
    done = _memory(["reindex"], cli_env, tmp_path)
    assert (done.returncode, done.stderr) == (0, "")
    assert not (memory_dir / "entries" / "unreadable").exists()


def test_a_torn_last_line_is_named_too(three, memory_dir, cli_env, tmp_path):
    journal = _journal(memory_dir)
    data = journal.read_bytes()
    journal.write_bytes(data[: len(data) - 40])  # a kill -9 in the middle of the third line
    _drop_db(memory_dir)
    done = _memory(["reindex"], cli_env, tmp_path)
    assert done.returncode == 3
    assert done.stderr.startswith("Warning: entries/journal.jsonl:3: unreadable line of ")


@pytest.fixture(params=["memory", "postgres"])
def url(request):
    if request.param == "postgres":
        with private_schema() as pg_url:
            yield pg_url
    else:
        yield "memory://"


def test_import_names_unreadable_lines_on_every_backend(three, memory_dir, url, caplog):
    _garble(_journal(memory_dir), 1)
    _drop_db(memory_dir)  # the tree is read through its journal
    with open_backend(url) as backend:
        documents, entries, problems = import_tree(memory_dir, backend)
        assert sorted(e.id for e in backend.list_entries()) == sorted(three[1:])
    assert entries == 2
    assert len(problems) == 1 and problems[0].startswith(
        "entries/journal.jsonl:1: unreadable line of "
    )
    assert problems[0].endswith("; an entry logged on it is not imported")
    assert problems[0] in caplog.text


def test_import_on_postgres_exits_3_with_the_warning(three, memory_dir, cli_env, tmp_path):
    _garble(_journal(memory_dir), 1)
    _drop_db(memory_dir)
    with private_schema() as pg_url:
        done = _memory(["--memory-url", pg_url, "import", str(memory_dir)], cli_env, tmp_path)
    assert done.returncode == 3, done.stderr
    assert done.stdout.endswith(f"and 2 entries from {str(memory_dir)!r}\n")
    assert done.stderr.startswith("Warning: entries/journal.jsonl:1: unreadable line of ")
