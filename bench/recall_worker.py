"""Search with another checkout's code, from the same benchmark run (before/after in one table).

`Worker(code)` starts a process whose `memory` package is the one under `code` (a checkout
of an older commit, e.g. `git worktree add ../base fd3244d`), or this checkout's with
`None`, and serves `MemoryStore(root).search(...)` over a pipe, one JSON line each way.
The time of each search is taken inside the worker, around the call alone, so two workers
asked in turn, question by question, time old and new code under the same load.

Only the public API is called (`MemoryStore`, `search`, the hit's `citation`, `line`), so a
checkout from before this module existed serves too.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path


def serve(code: str | None) -> None:
    """The worker's loop: requests `{"root", "q", "limit", "scope"}` on stdin, replies
    `{"cites", "lines", "s"}` on stdout."""
    sys.path.insert(0, code or str(Path(__file__).resolve().parent.parent))
    from memory.store import MemoryStore

    stores: dict[str, MemoryStore] = {}
    for raw in sys.stdin:
        req = json.loads(raw)
        store = stores.get(req["root"])
        if store is None:
            store = stores[req["root"]] = MemoryStore(req["root"])
        began = time.perf_counter()
        hits = store.search(req["q"], scope=req.get("scope", "all"), limit=req["limit"])
        took = time.perf_counter() - began
        reply = {"cites": [h.citation for h in hits], "lines": [h.line for h in hits], "s": took}
        print(json.dumps(reply), flush=True)


class Worker:
    """A process searching with one checkout's code (`None`: this checkout's)."""

    def __init__(self, code: str | Path | None):
        cmd = [sys.executable, str(Path(__file__).resolve())]
        if code:
            cmd.append(str(Path(code).resolve()))
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def search(self, root: Path, q: str, limit: int, scope: str = "all") -> dict:
        """`{"cites": [...], "lines": [...], "s": seconds}` of one search."""
        assert self.proc.stdin and self.proc.stdout
        request = {"root": str(root), "q": q, "limit": limit, "scope": scope}
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        reply = self.proc.stdout.readline()
        if not reply:
            raise RuntimeError("a search worker died (its traceback is above)")
        return json.loads(reply)

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        self.proc.wait()


def check_checkout(code: str | Path) -> str:
    """ "" when `code` holds a `memory` package, else what is wrong (one line)."""
    if not (Path(code) / "memory" / "store.py").is_file():
        return f"--baseline {str(code)!r} holds no memory/store.py: give a checkout of tether"
    return ""


if __name__ == "__main__":
    serve(sys.argv[1] if len(sys.argv) > 1 else None)
