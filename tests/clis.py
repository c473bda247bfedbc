"""Running tether's console scripts in a subprocess, as a user's shell would."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path


def memory_cli(
    args: Sequence[str], env: dict[str, str], cwd: Path | str | None = None, *, prefix=()
) -> subprocess.CompletedProcess:
    """`memory ARGS` (through `python -m memory`), output captured as text."""
    return subprocess.run(
        [*prefix, sys.executable, "-m", "memory", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=120,
    )
