"""The token monitor: zones, counting, thresholds and the in-process handoff."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage

from orchestrator.agents.gauge import SAVE, WARN, TokenGauge
from orchestrator.agents.provider import usage_tokens
from orchestrator.api import Orchestrator


@pytest.mark.parametrize(
    ("tokens", "zone"),
    [(0, "ok"), (119_999, "ok"), (120_000, WARN), (149_999, WARN), (150_000, SAVE)],
)
def test_default_gauge_zones_follow_the_skill(tokens, zone):
    assert TokenGauge().zone(tokens) == zone


def test_reported_usage_wins_over_the_estimate():
    reported = AIMessage(
        "hi", usage_metadata={"input_tokens": 1000, "output_tokens": 234, "total_tokens": 1234}
    )
    assert usage_tokens(reported, fallback_context=5) == 1234
    silent = AIMessage("x" * 400)
    assert usage_tokens(silent, fallback_context=50) > 50 + 90  # estimate of 400 chars


def _lead_zone_events(events):
    return [e for e in events if e["event"] == "tokens" and "zone" in e]


def test_low_threshold_warns_snapshots_and_continues_with_a_fresh_lead(
    fixture_repo, memory_dir, tmp_path
):
    # nine short phases: the lead's older turns fold into its running summary, but its
    # plan (completed subtasks, key questions) and the summary still grow a little each
    # phase (~110 tokens here), so a low threshold is crossed mid-run
    workflow = tmp_path / "long.yaml"
    workflow.write_text("phases: [p1, p2, p3, p4, p5, p6, p7, p8, p9]\n")
    events: list[dict] = []
    threshold = 3000
    result = Orchestrator(
        workdir=fixture_repo, workflow=workflow, token_threshold=threshold, on_event=events.append
    ).run("Survey the shop service", task_id="tok")
    assert result.status == "done"
    kinds = [e["event"] for e in events]
    assert "warning" in kinds
    saves = [e for e in events if e["event"] == "snapshot" and e["reason"] == "token_limit"]
    assert saves, "no snapshot at the threshold"
    assert all(s["tokens"] >= threshold for s in saves)
    snap = memory_dir / result.snapshots[0]
    assert "**Reason**: token_limit" in snap.read_text()
    # the lead's next call after a snapshot runs in a fresh context seeded from it
    calls = result.lead_calls
    first_save = next(i for i, c in enumerate(calls) if c["tokens"] >= threshold)
    assert any(c["fresh"] for c in calls[first_save + 1 :])
    assert not any(c["fresh"] for c in calls[:first_save])
    # a warning comes before the first snapshot (the lead's reported context can jump past
    # the warning zone in one phase; the warning then says so)
    first_save = next(i for i, e in enumerate(events) if e.get("reason") == "token_limit")
    assert any(e["event"] == "warning" for e in events[:first_save])
    assert "save" in [e["zone"] for e in _lead_zone_events(events)]


def test_default_threshold_comes_from_the_skill_and_the_flag_overrides_the_workflow(
    fixture_repo, tmp_path
):
    wf = tmp_path / "wf.yaml"
    wf.write_text("phases: [exploration]\nthresholds:\n  token_threshold: 90000\n")
    seen = {}
    for name, kwargs in {
        "skill": {},
        "workflow": {"workflow": wf},
        "flag": {"workflow": wf, "token_threshold": 5000},
    }.items():
        events: list[dict] = []
        Orchestrator(workdir=fixture_repo, on_event=events.append, **kwargs).run(
            "Survey", task_id=f"t-{name}"
        )
        seen[name] = next(e for e in events if e["event"] == "start")["token_threshold"]
    assert seen == {"skill": 150_000, "workflow": 90_000, "flag": 5000}


def test_tokens_are_counted_per_agent_and_in_total(fixture_repo, tiny_workflow):
    result = Orchestrator(workdir=fixture_repo, workflow=tiny_workflow).run(
        "Survey the shop service", task_id="count"
    )
    agents = [k for k in result.tokens if k != "lead"]
    assert result.tokens["lead"] > 0
    assert len(agents) == len(result.findings) and all(result.tokens[a] > 0 for a in agents)


def test_the_closing_snapshot_reports_the_context_the_gauge_last_showed(
    fixture_repo, tiny_workflow, memory_dir
):
    from orchestrator.artifacts.snapshot import read_snapshot

    events: list[dict] = []
    result = Orchestrator(
        memory_dir=memory_dir, workdir=fixture_repo, workflow=tiny_workflow, on_event=events.append
    ).run("Survey the shop service", task_id="gauge")
    shown = [e["context"] for e in events if e["event"] == "tokens" and e.get("agent") == "lead"]
    assert shown and shown[-1] > 0  # the last one: the monitor's, after the last phase
    closing = read_snapshot(memory_dir / result.snapshots[-1])
    assert closing["reason"] == "phase_end" and closing["token_count"] == shown[-1]
