"""What interrupted writes leave in a memory directory: named by `memory stats`, removed by
`memory prune`.

Two kinds, neither ever read as memory:

* an `entries/{id}/` folder no entry points to (a `memory log` killed before its row was
  committed): `EntryStore.sweep_orphans`;
* a hidden temp file `.{name}.tmp-{8 hex}` beside its target (a write killed between its
  temp file and the rename, `memory.durable.atomic_write_bytes`): `temp_files` here.

Both are removed only once they are an hour old (`_entry_upkeep.ORPHAN_GRACE_S`), so a write
still in progress is never disturbed. Temp files inside `entries/` belong to an entry folder
(an orphan when the write was killed) and are left to that folder's sweep.
"""

from __future__ import annotations

import os
import re
import time

from memory.paths import Layout

#: The name `memory.durable` gives a temp file: `.{target}.tmp-{secrets.token_hex(4)}`.
TEMP_NAME = re.compile(r"\..+\.tmp-[0-9a-f]{8}")


def temp_files(layout: Layout, *, older_than_s: float = 0.0) -> list[str]:
    """The temp files left by interrupted writes, relative to the root, sorted."""
    cutoff = time.time() - older_than_s
    found = []
    for folder, dirs, names in os.walk(layout.root):
        if folder == str(layout.root):
            dirs[:] = [d for d in dirs if d not in ("entries", ".locks")]
        for name in names:
            if not TEMP_NAME.fullmatch(name):
                continue
            path = os.path.join(folder, name)
            try:
                old_enough = older_than_s <= 0 or os.lstat(path).st_mtime < cutoff
            except FileNotFoundError:
                continue  # renamed into place meanwhile: a write that finished
            if old_enough:
                found.append(layout.relative(path))
    return sorted(found)


def remove_temp_files(layout: Layout, paths: list[str]) -> list[str]:
    """Remove the temp files `paths` (relative); the ones that were removed."""
    removed = []
    for rel in paths:
        try:
            os.unlink(layout.root / rel)
        except FileNotFoundError:
            continue
        removed.append(rel)
    return removed
