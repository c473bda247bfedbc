"""An append's line number is the line the record is on, also after the file was replaced.

Appends remember how many lines a file had (so the next append reads only the new tail);
a file rewritten in place, or replaced by one that got the same inode, must be counted
again: otherwise every citation made from the returned number (`messages.jsonl#L45`)
points at the wrong line. Each case appends, rewrites the file (shorter and longer, fewer
and more lines, in place or replaced), appends again, and checks the returned number
against the file itself, through `memory.durable` and the storage contract.
"""

from __future__ import annotations

import json
import os

import pytest

from memory import durable
from memory.backends import open_backend


def _line(path, number: int) -> dict:
    return json.loads(path.read_bytes().split(b"\n")[number - 1])


def _records(count: int, pad: int) -> bytes:
    return b"".join(durable.encode_line({"n": n, "pad": "x" * pad}) for n in range(count))


REWRITES = [  # (lines before, their padding, lines after the rewrite, their padding)
    (10, 5, 3, 200),  # fewer, longer lines: a bigger file with fewer lines
    (10, 5, 30, 5),  # more lines
    (10, 50, 10, 50),  # the same size and count, other bytes
    (40, 5, 2, 600),
]


@pytest.mark.parametrize(("before", "pad", "after", "pad_after"), REWRITES)
@pytest.mark.parametrize("how", ["in_place", "replaced"])
def test_an_append_after_a_rewrite_returns_the_true_line(
    tmp_path, before, pad, after, pad_after, how
):
    log = tmp_path / "messages.jsonl"
    for n in range(before):  # one append at a time: each is counted from the last
        durable.append_jsonl(log, {"n": n, "pad": "x" * pad})
    inode = os.stat(log).st_ino
    if how == "in_place":
        with open(log, "r+b") as fh:  # an editor that saves over the same file
            fh.truncate(0)
            fh.write(_records(after, pad_after))
        assert os.stat(log).st_ino == inode
    else:
        log.unlink()  # the inode number is free, and file systems reuse it
        log.write_bytes(_records(after, pad_after))
    number = durable.append_jsonl(log, {"appended": True})
    assert number == after + 1
    assert _line(log, number) == {"appended": True}


@pytest.mark.parametrize("url", ["files", "memory"])
def test_the_contract_cites_the_true_line_after_a_rewrite(tmp_path, url):
    where = str(tmp_path / "memory") if url == "files" else "memory://"
    with open_backend(where) as backend:
        doc = "working/T1/messages.jsonl"
        for n in range(12):
            backend.append_lines(doc, [json.dumps({"n": n, "pad": "x" * 8})])
        backend.put_document(doc, _records(4, 120))  # the log replaced (a hand edit)
        first = backend.append_lines(doc, ['{"appended": 1}', '{"appended": 2}'])
        lines = backend.get_document(doc).data.split(b"\n")
        assert first == 5
        assert json.loads(lines[first - 1]) == {"appended": 1}
        assert json.loads(lines[first]) == {"appended": 2}
