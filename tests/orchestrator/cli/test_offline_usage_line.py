"""The closing report of an offline run says what it cost: its calls to the offline model,
that no provider was sent anything and nothing was spent, and no prompt-token figure (the
offline estimates, summed over every call's whole prompt, read like a bill of a million
tokens for a survey)."""

from __future__ import annotations

from click.testing import CliRunner

from orchestrator.cli.app import cli


def test_an_offline_run_reports_nothing_spent_and_no_token_figure(fixture_repo, memory_dir):
    ran = CliRunner().invoke(cli, ["run", "Survey the shop", "--workdir", str(fixture_repo)])
    assert ran.exit_code == 0, ran.output
    [usage] = [ln for ln in ran.stdout.splitlines() if ln.startswith("Usage:")]
    assert "offline model call(s)" in usage and "nothing spent" in usage
    assert "token" not in usage
