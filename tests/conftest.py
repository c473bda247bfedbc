"""Test isolation shared by every test: a private memory dir and no real model calls."""

from __future__ import annotations

import os

import pytest

_CLEARED = (
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "GOOGLE_API_KEY",
    "MISTRAL_API_KEY",
    "GROQ_API_KEY",
    "TETHER_MODEL",
    # OpenTelemetry's switches (`orchestrator.graph.tracing`): tests turn tracing on themselves
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_SDK_DISABLED",
    # the terminal's size (pytest-xdist's workers export COLUMNS=80): a command's output is
    # wrapped to $COLUMNS even in a pipe, so tests that want a width set it themselves
    "COLUMNS",
    "LINES",
)


@pytest.fixture(autouse=True)
def _isolated_env(tmp_path, monkeypatch):
    """Every test gets its own memory dir and cwd, and no provider keys or model."""
    memory_dir = tmp_path / "memory"
    monkeypatch.setenv("TETHER_MEMORY_DIR", str(memory_dir))
    for key in _CLEARED:
        monkeypatch.delenv(key, raising=False)
    # Real model calls are refused in tests; the offline model is always allowed.
    monkeypatch.setenv("TETHER_ALLOW_MODEL_REQUESTS", "0")
    # Model retries back off from 10 ms, not 1 s, so failing-provider tests stay fast.
    monkeypatch.setenv("TETHER_RETRY_DELAY", "0.01")
    monkeypatch.chdir(tmp_path)
    yield


@pytest.fixture
def memory_dir(tmp_path):
    """The memory directory of this test (same as `$TETHER_MEMORY_DIR`)."""
    return tmp_path / "memory"


@pytest.fixture
def cli_env(memory_dir):
    """Environment for running the console scripts in a subprocess."""
    env = dict(os.environ)
    env["TETHER_MEMORY_DIR"] = str(memory_dir)
    return env
