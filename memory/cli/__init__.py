"""The `memory` command: one module per verb group, and what they share.

* `app`: the `memory` group (`main` is the console script's entry point), which registers
  the groups below;
* `entries`: `log`, `fetch`, `list`, `refs`, `stats`, `prune`; `search`: `search`,
  `reindex`; `working`: `summary`, `facts`, `episodes`; `backend`: `setup`, `export`,
  `import`; `mcp`: `mcp`; `status_file`: `status-file`;
* `common`: the store of one invocation, the task a verb acts on by default (the most
  recent), and how warnings are printed (the `orchestrator` command shares it);
  `options`: helpers both commands use, cheap to import (options written after the verb,
  a usage error as one `Error:` line with exit 2).

Invariant: only this package prints or exits; a bad input is one `Error:` line and a
non-zero exit (2 for a usage error, else 1 or the verb's own), and leaves the memory as it
was. `main` is loaded on first use, so the
`orchestrator` command can import `options` without loading the verbs.
"""

from __future__ import annotations

from typing import Any

__all__ = ["cli", "main"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from memory.cli import app

        return getattr(app, name)
    raise AttributeError(f"module 'memory.cli' has no attribute {name!r}")
