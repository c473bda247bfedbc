"""The usage journal's spend: one figure whose splits sum to it, read back the same after a
restart, and a call the provider refused in no split."""

from __future__ import annotations

from orchestrator.artifacts.documents import Docs
from orchestrator.artifacts.usage import UsageJournal, read_spend


def test_the_spend_is_one_figure_its_splits_sum_to_and_reads_back_the_same(tmp_path):
    docs = Docs.of(tmp_path / "memory")
    journal = UsageJournal(docs, "t")
    lead = journal.recorder("lead", "lead", "exploration")
    one = lead.sent(100)
    lead.answered(one, 90, 120, estimated=False)
    worker = journal.recorder("worker", "worker:exploration/a", "exploration")
    refused = worker.sent(50)
    worker.failed(refused)  # the provider answered with an error: nothing spent
    worker.sent(70)  # cut in flight: its prompt counts, estimated
    planner = journal.recorder("lead", "lead", "review")
    two = planner.sent(10)
    planner.answered(two, 8, 30, estimated=True)

    spend = journal.spend()
    assert (spend.tokens, spend.calls, spend.cut, spend.estimated) == (220, 3, 1, 2)
    assert spend.by_agent == {"lead": 150, "worker": 70}
    assert spend.by_phase == {"exploration": 190, "review": 30}
    assert spend.by_key == {"lead": 150, "worker:exploration/a": 70}
    for split in (spend.by_agent, spend.by_phase, spend.by_key):
        assert sum(split.values()) == spend.tokens
    assert journal.tokens() == spend.tokens
    assert journal.spent_by("worker:exploration/a") == 70 and journal.spent_by("nobody") == 0
    # what another process reads, and a journal opened again, say the same
    assert read_spend(docs, "t") == spend
    assert UsageJournal(docs, "t").spend() == spend


def test_a_refused_call_alone_puts_its_agent_in_no_split(tmp_path):
    docs = Docs.of(tmp_path / "memory")
    journal = UsageJournal(docs, "t")
    worker = journal.recorder("worker", "worker:a", "exploration")
    worker.failed(worker.sent(50))
    spend = journal.spend()
    assert (spend.tokens, spend.calls) == (0, 0)
    assert spend.by_agent == spend.by_phase == spend.by_key == {}
