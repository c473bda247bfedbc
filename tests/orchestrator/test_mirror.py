"""The local mirror of a shared memory (`orchestrator --memory-url`): what it reads and writes.

A process that starts on a mirror already in step reads no document; a log that grew locally
is appended to (the backend indexes only the new lines); a document changed by another
machine comes down at the next pull; a path changed on both sides ends as this side wrote it.
"""

from __future__ import annotations

import json

import pytest

from memory.backends import open_backend
from orchestrator._mirror import Mirror


class Spy:
    """The backend, counting the calls the mirror makes."""

    def __init__(self, backend):
        self.backend = backend
        self.calls: list[str] = []

    def __getattr__(self, name):
        attr = getattr(self.backend, name)
        if callable(attr):

            def counted(*args, **kwargs):
                self.calls.append(name)
                return attr(*args, **kwargs)

            return counted
        return attr


@pytest.fixture
def backend():
    with open_backend("memory://") as opened:
        yield opened


LOG = "working/t1/messages.jsonl"


def _line(text: str) -> str:
    return json.dumps({"role": "assistant", "content": text})


def test_a_mirror_in_step_reads_nothing_and_a_grown_log_is_appended(backend, tmp_path):
    backend.put_document("findings/a.md", b"# A\n\nthe cache keeps sessions\n")
    backend.append_lines(LOG, [_line("first turn")])
    assert Mirror(backend, tmp_path).pull() == 2
    assert (tmp_path / LOG).read_bytes() == backend.get_document(LOG).data

    spy = Spy(backend)
    assert Mirror(spy, tmp_path).pull() == 0  # a new process on the same directory
    assert "get_document" not in spy.calls

    with (tmp_path / LOG).open("ab") as log:
        log.write((_line("second turn about zeppelins") + "\n").encode())
    spy.calls.clear()
    mirror = Mirror(spy, tmp_path)
    assert mirror.push() == 1
    assert "append_lines" in spy.calls and "get_document" not in spy.calls
    assert backend.get_document(LOG).data == (tmp_path / LOG).read_bytes()
    assert [h.doc_id for h in backend.index_query("zeppelins")] == [f"{LOG}#L2"]
    spy.calls.clear()
    assert mirror.push() == 0 and spy.calls == []  # nothing changed since


def test_changes_from_another_machine_come_down_and_both_sides_changed_keeps_this_side(
    backend, tmp_path
):
    backend.put_document("findings/a.md", b"first\n")
    backend.put_document("research_plans/t1.md", b"plan v1\n")
    mirror = Mirror(backend, tmp_path)
    mirror.pull()
    backend.put_document("findings/a.md", b"changed elsewhere\n")  # another machine
    assert Mirror(backend, tmp_path).pull() == 1
    assert (tmp_path / "findings/a.md").read_bytes() == b"changed elsewhere\n"

    backend.put_document("research_plans/t1.md", b"plan v2 from elsewhere\n")
    (tmp_path / "research_plans/t1.md").write_bytes(b"plan v2 here\n")
    assert Mirror(backend, tmp_path).push() == 1
    assert backend.get_document("research_plans/t1.md").data == b"plan v2 here\n"


def test_a_damaged_manifest_means_one_full_comparison(backend, tmp_path):
    backend.put_document("findings/a.md", b"same\n")
    Mirror(backend, tmp_path).pull()
    (tmp_path / Mirror.MANIFEST).write_text("{not json")
    spy = Spy(backend)
    assert Mirror(spy, tmp_path).pull() == 0  # the bytes are equal: nothing rewritten
    assert spy.calls.count("get_document") == 1
    assert Mirror(Spy(backend), tmp_path).pull() == 0


def test_two_machines_appending_to_one_task_list_lose_no_line(backend, tmp_path):
    tasks = ".tether/tasks.jsonl"
    backend.append_lines(tasks, ['{"task_id": "t0"}'])
    a = Mirror(backend, tmp_path / "a")
    b = Mirror(backend, tmp_path / "b")
    a.pull(), b.pull()
    for mirror, task in ((a, "ta"), (b, "tb")):  # each machine starts a task
        with (mirror.root / tasks).open("ab") as log:
            log.write(b'{"task_id": "%s"}\n' % task.encode())
    assert a.push() == 1 and b.push() == 1
    lines = backend.get_document(tasks).data.decode().splitlines()
    assert sorted(lines) == ['{"task_id": "t0"}', '{"task_id": "ta"}', '{"task_id": "tb"}']
    assert (tmp_path / "b" / tasks).read_bytes() == backend.get_document(tasks).data
    a.pull()
    assert (tmp_path / "a" / tasks).read_bytes() == backend.get_document(tasks).data
