"""On a memory directory the contract's task records, subagent registry and leases are
files people can read (`.tether/records/`), not rows of the derived `memory.db`: a damaged
`memory.db`, moved aside and rebuilt, keeps every one of them."""

from __future__ import annotations

import json

from memory.backends import open_backend
from memory.contract.base import SubagentRecord, TaskRecord


def _fill(backend) -> None:
    backend.put_task(TaskRecord("auth/map", "running", {"phase": "review"}))
    backend.put_subagent(SubagentRecord("auth/map", "s001", "pending", {"title": "routes"}))
    assert backend.claim_subagent("auth/map", "s001", owner="host-a")
    assert backend.acquire_lock("auth/map", "host-a", ttl=600)


def test_records_are_readable_files(tmp_path):
    root = tmp_path / "memdir"
    with open_backend(str(root)) as backend:
        _fill(backend)
    task = json.loads((root / ".tether/records/tasks/auth%2Fmap.json").read_text())
    assert task["status"] == "running" and task["data"] == {"phase": "review"}
    agent = json.loads((root / ".tether/records/subagents/auth%2Fmap/s001.json").read_text())
    assert agent["status"] == "running" and agent["data"]["owner"] == "host-a"
    lock = json.loads((root / ".tether/records/locks/auth%2Fmap.json").read_text())
    assert lock["owner"] == "host-a"


def test_a_damaged_memory_db_keeps_every_record(tmp_path):
    root = tmp_path / "memdir"
    with open_backend(str(root)) as backend:
        _fill(backend)
    db = root / "memory.db"
    for extra in ("-wal", "-shm"):
        db.with_name("memory.db" + extra).unlink(missing_ok=True)
    db.write_bytes(b"garbage, not a database" * 100)  # what a crash of the disk leaves
    with open_backend(str(root)) as backend:
        assert backend.get_task("auth/map").data == {"phase": "review"}
        (agent,) = backend.list_subagents("auth/map")
        assert (agent.status, agent.data["owner"]) == ("running", "host-a")
        assert not backend.claim_subagent("auth/map", "s001", owner="host-b")  # still claimed
        assert not backend.acquire_lock("auth/map", "host-b")  # the lease still holds
        assert backend.get_lock("auth/map").owner == "host-a"
    assert list(root.glob("memory.db.damaged-*"))  # the damaged file was kept aside
