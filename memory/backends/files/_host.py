"""What the parts of the files backend need from it (so they need not import it)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from datetime import datetime
from typing import Any, Protocol

from memory.paths import Layout
from memory.text.summarize import Summarizer


class FilesHost(Protocol):
    """The files backend as its entry store and index see it."""

    layout: Layout
    read_only: bool
    clock: Callable[[], datetime]
    summarizer: Summarizer
    entries: Any

    def connect(self) -> sqlite3.Connection: ...
