"""Several first runs on a fresh PostgreSQL memory at once (issue 52 item 6): each sets up
tether's tables and LangGraph's `PostgresSaver` tables; all succeed, serialised by an
advisory lock, with no `UniqueViolation` and no deadlock. Each run has connections of its
own, as separate processes do."""

from __future__ import annotations

import threading

import pytest

from tests.pg import private_schema

N = 8


def _first_runs(url: str) -> list[str]:
    from memory.backends.postgres import PostgresBackend

    barrier = threading.Barrier(N)
    outcomes: list[str] = []

    def first_run() -> None:
        barrier.wait(60)  # every run sets up at the same moment
        try:
            with PostgresBackend.open(url) as backend:
                backend.checkpointer()  # LangGraph's tables, as a run sets them up
                backend.list_tasks()
        except Exception as exc:  # noqa: BLE001 - what a run failed with is the outcome
            outcomes.append(f"{type(exc).__name__}: {exc}")
            return
        outcomes.append("ok")

    threads = [threading.Thread(target=first_run) for _ in range(N)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    return outcomes


@pytest.mark.parametrize("attempt", range(3))
def test_first_runs_on_a_fresh_schema_all_set_it_up(attempt):
    with private_schema() as url:
        outcomes = _first_runs(url)
    assert outcomes == ["ok"] * N, outcomes
