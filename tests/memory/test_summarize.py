"""The model-free extractive summarizer: keeps what a reader of tool output needs.

Covers pytest, unittest, jest and go outputs, prose, the token budget invariant and huge
inputs (bounded time).
"""

from __future__ import annotations

import time

import pytest

from memory.text.summarize import ExtractiveSummarizer, Summarizer, extractive_summary, headline
from memory.text.tokens import estimate_tokens


def pytest_output(passed: int = 156) -> str:
    lines = [
        "============================= test session starts ==============================",
        "platform linux -- Python 3.11.9, pytest-8.3.2, pluggy-1.5.0",
        "rootdir: /src/app",
        f"collected {passed + 2} items",
        "",
    ]
    lines += [f"tests/test_mod{i}.py::test_case_{i} PASSED [{i % 100:3d}%]" for i in range(passed)]
    lines += [
        "=================================== FAILURES ===================================",
        "_______________________________ test_oauth_flow ________________________________",
        "    def test_oauth_flow(client):",
        ">       assert resp.status == 200",
        "E       AssertionError: assert 401 == 200",
        "tests/test_auth.py:234: AssertionError",
        "=========================== short test summary info ============================",
        "FAILED tests/test_auth.py::test_oauth_flow - AssertionError: assert 401 == 200",
        "FAILED tests/test_api.py::test_rate_limit - TimeoutError: 30s",
        f"================== {passed} passed, 2 failed in 12.31s ==================",
    ]
    return "\n".join(lines) + "\n"


class TestToolOutput:
    def test_pytest_keeps_totals_failures_and_errors(self):
        summary = extractive_summary(pytest_output(), max_tokens=200)
        assert "156 passed, 2 failed" in summary
        assert "FAILED tests/test_auth.py::test_oauth_flow" in summary
        assert "FAILED tests/test_api.py::test_rate_limit" in summary
        assert "AssertionError: assert 401 == 200" in summary
        assert "test_case_77" not in summary  # passing noise is dropped
        assert estimate_tokens(summary) <= 200

    def test_unittest(self):
        body = "\n".join(f"test_ok_{i} (pkg.tests.T) ... ok" for i in range(300))
        text = (
            body + "\n======================================================================\n"
            "FAIL: test_parse_dates (pkg.tests.test_dates.DateTests)\n"
            "----------------------------------------------------------------------\n"
            "Traceback (most recent call last):\n"
            '  File "pkg/tests/test_dates.py", line 41, in test_parse_dates\n'
            "ValueError: month must be in 1..12\n"
            "----------------------------------------------------------------------\n"
            "Ran 301 tests in 0.532s\n\nFAILED (failures=1)\n"
        )
        summary = extractive_summary(text, 120)
        for needle in (
            "FAIL: test_parse_dates",
            "ValueError: month must be in 1..12",
            "Ran 301 tests",
            "FAILED (failures=1)",
        ):
            assert needle in summary
        assert estimate_tokens(summary) <= 120

    def test_jest_and_go(self):
        jest = "\n".join(f"  ✓ renders item {i} (3 ms)" for i in range(400)) + (
            "\n  ✕ submits the form (12 ms)\n"
            "  ● Form › submits the form\n"
            "Tests:       1 failed, 400 passed, 401 total\n"
        )
        summary = extractive_summary(jest, 100)
        assert "✕ submits the form" in summary and "1 failed, 400 passed, 401 total" in summary
        go = "\n".join(
            f"=== RUN   TestThing{i}\n--- PASS: TestThing{i} (0.00s)" for i in range(300)
        )
        go += "\n--- FAIL: TestParse (0.01s)\n    parse_test.go:17: got 3 want 4\n"
        go += "FAIL\tex/pkg\t0.2s\n"
        summary = extractive_summary(go, 100)
        assert "--- FAIL: TestParse" in summary and "FAIL\tex/pkg\t0.2s" in summary

    def test_colour_codes_are_dropped(self):
        text = pytest_output().replace("FAILED", "\x1b[31mFAILED\x1b[0m")
        summary = extractive_summary(text, 200)
        assert "\x1b" not in summary
        assert "FAILED tests/test_api.py::test_rate_limit" in summary

    def test_build_log_keeps_error_lines_and_last_lines(self):
        text = "\n".join(f"[{i:05d}] compiling module_{i}.c" for i in range(2000))
        text += "\nsrc/net.c:88:5: error: implicit declaration of function 'sendx'\n"
        text += "make: *** [Makefile:12: all] Error 1\nBuild finished with exit code 2"
        summary = extractive_summary(text, 100)
        assert "src/net.c:88:5: error: implicit declaration" in summary
        assert summary.endswith("Build finished with exit code 2")


class TestProseAndBudget:
    def test_prose_keeps_opening_and_headings(self):
        text = (
            "# Release plan\n\nWe ship on Friday after the freeze.\n\n"
            + ("Filler sentence about nothing in particular. " * 30 + "\n\n") * 20
            + "## Risks\n\nThe database migration is slow.\n"
        )
        summary = extractive_summary(text, 60)
        assert summary.startswith("# Release plan")
        assert "We ship on Friday" in summary and "## Risks" in summary
        assert estimate_tokens(summary) <= 60

    def test_short_text_is_returned_unchanged(self):
        assert extractive_summary("all 42 tests passed\n", 200) == "all 42 tests passed"

    def test_blank_text_gives_empty_summary(self):
        assert extractive_summary("\n \n", 50) == ""

    @pytest.mark.parametrize("budget", [1, 2, 5, 17, 64, 200, 1000])
    def test_budget_always_holds(self, budget):
        text = pytest_output() + ("x" * 5000) + "\n"
        assert estimate_tokens(extractive_summary(text, budget)) <= budget

    def test_huge_input_is_bounded_in_time_and_keeps_the_verdict(self):
        text = (
            "2026-01-01 INFO worker processed batch ok\n" * 600_000 + "== 3 passed, 1 failed ==\n"
        )
        started = time.perf_counter()
        summary = extractive_summary(text, 200)
        assert time.perf_counter() - started < 5
        assert "3 passed, 1 failed" in summary

    def test_summarizer_protocol_and_headline(self):
        summarizer: Summarizer = ExtractiveSummarizer()
        summary = summarizer(pytest_output(), 150)
        assert estimate_tokens(summary) <= 150
        assert headline(summary) == "156 passed, 2 failed in 12.31s"
        assert headline("# Title\nbody") == "# Title"

    def test_quiet_pytest_headline_is_the_total_not_the_progress_dots(self):
        quiet = "." * 60 + " [ 80%]\n" + "." * 15 + " [100%]\n17 passed in 1.28s\n"
        assert headline(extractive_summary(quiet)) == "17 passed in 1.28s"
