"""JSON checkpoints: `checkpoints/cp_{phase}_{ts}.json`, the recovery points.

The model is `orchestrator.artifacts.checkpoint_model` (`Checkpoint`, and `SavedCheckpoint`, a file
on disk, whose JSON Schema is the shipped one); this module names, renders, validates,
writes, lists and loads the files, and gives the `checkpoint report` text and a
checkpoint's summary (`report`, `checkpoint_summary`).

A `Checkpoint` holds the fields (checkpoint_id, task_id, phase, timestamp, state,
context_summary, next_action, recovery_instructions) plus what tether needs to rebuild a
run without the LangGraph database: the plan path, findings paths, memory entry ids, the
LangGraph thread/checkpoint id, the objective, workdir, phases, the current phase's
subtasks and which subtask produced which findings file.

`write_checkpoint` renders `checkpoint.json.j2` (every value through `tojson`), checks the
output against the shipped JSON Schema and only then writes it atomically under a fresh,
never-colliding name. Readers never trust a file: `load_checkpoint` parses and validates,
and `latest_valid_checkpoint` walks the files newest first, skipping corrupt, truncated or
schema-invalid ones with one warning each.

Invariant: a checkpoint file on disk is either complete and schema-valid, or it is
reported and skipped; nothing here deletes or rewrites an existing checkpoint.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memory.contract.base import DocumentInfo
from memory.errors import MemoryStoreError
from orchestrator.artifacts.checkpoint_model import (
    CHECKPOINT_TEMPLATE,
    Checkpoint,
    checkpoint_json_schema,
    checkpoint_problem,
)
from orchestrator.artifacts.documents import CHECKPOINTS, Docs
from orchestrator.artifacts.names import iso_timestamp, name_timestamp, slug, timestamp
from orchestrator.artifacts.render import Pathish, render_template, validate_input
from orchestrator.artifacts.text import _name, loads_strict
from orchestrator.errors import CheckpointError, RecoveryError, TemplateError

if TYPE_CHECKING:
    from orchestrator.artifacts.documents import MemoryTarget
    from orchestrator.types import JsonObject

SCHEMA_PATH = Path(__file__).resolve().parent.parent / "schemas" / "checkpoint.schema.json"


# -- rendering and the schema -----------------------------------------------------------
def checkpoint_schema() -> JsonObject:
    """The checkpoint JSON Schema (draft 2020-12), generated from `SavedCheckpoint`; the
    shipped `orchestrator/schemas/checkpoint.schema.json` is the same, pinned by a test."""
    return checkpoint_json_schema()


def checkpoint_schema_problem(obj: Any) -> str | None:
    """None when `obj` is a valid checkpoint file, else its first problem (the model is
    the one validator: `orchestrator.artifacts.checkpoint_model.checkpoint_problem`)."""
    return checkpoint_problem(obj)


def render_checkpoint(data: Mapping[str, object], project_dir: Pathish | None = None) -> str:
    """Render `checkpoint.json.j2` with `data` and check the output.

    Raises:
        TemplateError: the template failed, its output is not JSON, or it does not validate
            against the shipped schema (e.g. a project override dropped a field).
    """
    text = render_template(CHECKPOINT_TEMPLATE, project_dir, **dict(data))
    try:
        obj = loads_strict(text)
    except ValueError as exc:
        raise TemplateError(
            f"template {CHECKPOINT_TEMPLATE!r} produced invalid JSON ({exc}); "
            "pass every value through `tojson`"
        ) from None
    problem = checkpoint_schema_problem(obj)
    if problem:
        raise TemplateError(
            f"template {CHECKPOINT_TEMPLATE!r} output fails the checkpoint schema {problem}; "
            f"fix the template or compare it with {str(SCHEMA_PATH)!r}"
        )
    return text


# -- writing ---------------------------------------------------------------------------
def default_recovery_instructions(cp: Checkpoint) -> str:
    """The text written when a caller leaves `recovery_instructions` empty."""
    return (
        f"Run `orchestrator resume --task {cp.task_id}`. Without the LangGraph database, "
        "tether rebuilds the run from this checkpoint: read the research plan and the "
        "findings listed here, skip completed subtasks, rerun pending and blocked ones, "
        f"then continue with: {cp.next_action or 'the next phase'}."
    )


_AS_GIVEN = frozenset({"subtasks", "extra"})


def write_checkpoint(
    memory: MemoryTarget, cp: Checkpoint | Mapping[str, Any], *, project_dir: Pathish | None = None
) -> Path:
    """Validate `cp`, render it and create `checkpoints/cp_{phase}_{ts}.json`.

    `checkpoint_id` and `timestamp` are filled in when None (the id then equals the file's
    stem); `phases` defaults to `[phase]`. `cp` itself is not modified.

    Raises:
        TemplateError: the rendered JSON fails to parse or to validate against the schema.
    """
    now = datetime.now(UTC)
    if isinstance(cp, Checkpoint):
        data = cp.model_copy()  # only top-level fields are set below: a shallow copy will do
    else:
        data = validate_input(Checkpoint, CHECKPOINT_TEMPLATE, cp)
    if data.timestamp is None:
        data.timestamp = iso_timestamp(now)
    if not data.phases:
        data.phases = [data.phase]
    if not data.recovery_instructions:
        data.recovery_instructions = default_recovery_instructions(data)
    given_id = data.checkpoint_id

    def render_as(stem: str) -> str:
        data.checkpoint_id = given_id or stem
        # the two JSON-object fields are the bulk of a checkpoint: `tojson` takes them as
        # they are, uncopied (a value that is not JSON fails there; the schema checks the rest)
        fields = data.model_dump(mode="json", exclude=_AS_GIVEN)
        return render_checkpoint(
            {**fields, **{f: getattr(data, f) for f in _AS_GIVEN}}, project_dir
        )

    stem = f"cp_{slug(data.phase, 'phase')}_{timestamp(now)}"
    return Docs.of(memory).create_unique(CHECKPOINTS, stem, ".json", render_as)


def load_checkpoint(path: Pathish, docs: Docs | None = None) -> Checkpoint:
    """Read, parse and validate one checkpoint file (through `docs` when it is in that
    memory; see `orchestrator.artifacts.text`).

    Raises:
        CheckpointError: missing, unreadable, not JSON (e.g. truncated by a crash), or not
            valid against the checkpoint schema; the message names the file.
    """
    named, path = path, Path(path)
    try:
        raw = docs.read_named(named) if docs is not None else None
        if raw is None:  # not a document of this memory: a file a person named
            raw = path.read_bytes()
    except FileNotFoundError:
        raise CheckpointError(
            f"checkpoint {str(path)!r} not found; list them with `orchestrator checkpoint list`"
        ) from None
    except OSError as exc:
        raise CheckpointError(f"cannot read checkpoint {str(path)!r}: {exc.strerror}") from None
    if not raw.strip():
        raise CheckpointError(f"checkpoint {str(path)!r} is empty (truncated by a crash?)")
    try:
        obj = loads_strict(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise CheckpointError(f"checkpoint {str(path)!r} is not UTF-8 text") from None
    except ValueError as exc:
        raise CheckpointError(
            f"checkpoint {str(path)!r} is not valid JSON ({_one_line(exc)}); "
            "it may be truncated by a crash: use an older one"
        ) from None
    problem = checkpoint_problem(obj)  # the one validator: `SavedCheckpoint`, the schema's model
    if problem:
        raise CheckpointError(f"checkpoint {str(path)!r} fails the checkpoint schema {problem}")
    return Checkpoint.model_validate(obj)


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split())


def latest_valid_checkpoint(
    memory: MemoryTarget, task_id: str | None = None
) -> tuple[Checkpoint, Path, list[str]]:
    """The newest checkpoint that loads and validates (for `task_id`, if given).

    Returns:
        `(checkpoint, path, warnings)`: one warning per newer file that was skipped
        because it is corrupt, truncated or schema-invalid.

    Raises:
        RecoveryError: no valid checkpoint; the message names the folder.
    """
    docs = Docs.of(memory)
    warnings: list[str] = []
    for info in checkpoint_infos(docs):
        if task_id is not None and task_of(docs, info) not in (task_id, None):
            continue  # another task's (one that cannot be read is loaded, and reported)
        path = docs.path(info.path)
        try:
            cp = load_checkpoint(path, docs)
        except CheckpointError as exc:
            warnings.append(f"skipped {exc}")
            continue
        if task_id is None or cp.task_id == task_id:
            return cp, path, warnings
    which = f"for task {task_id!r} " if task_id is not None else ""
    skipped = f" ({len(warnings)} corrupt file(s) skipped)" if warnings else ""
    raise RecoveryError(
        f"no valid checkpoint {which}in {str(docs.path(CHECKPOINTS))!r}{skipped}; "
        "resume from a snapshot with --from-snapshot or start again with `orchestrator run`"
    )


# -- listing ---------------------------------------------------------------------------
def _sort_key(docs: Docs, info: DocumentInfo) -> tuple[str, float, str]:
    """Time in the name; for a hand-named file, its `timestamp`, else its mtime."""
    ts = name_timestamp(info.path) or _content_timestamp(docs, info.path)
    if ts is None:
        ts = timestamp(datetime.fromtimestamp(info.mtime, UTC))
    return (ts, info.mtime, _name(info))


def _content_timestamp(docs: Docs, rel: str) -> str | None:
    try:
        obj = loads_strict(docs.read_bytes(rel) or b"")
        return timestamp(obj["timestamp"])
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None


def list_checkpoints(memory: MemoryTarget, task_id: str | None = None) -> list[Path]:
    """Checkpoint files, newest first (time in the name, else modification time).

    With `task_id`, only files whose JSON names that task (unreadable files are left out;
    `latest_valid_checkpoint` reports them).
    """
    docs = Docs.of(memory)
    found = checkpoint_infos(docs)
    if task_id is not None:
        found = [i for i in found if task_of(docs, i) == task_id]
    return [docs.path(i.path) for i in found]


def checkpoint_listing(memory: MemoryTarget, task_id: str) -> list[JsonObject]:
    """The checkpoints of `task_id`, newest first, as `checkpoint list` shows them: each a
    dict of `path`, `task_id`, `phase`, `trigger` (why it was written: `before_spawning`,
    `phase_transition`, `manual`, ...) and `timestamp` (ISO, UTC; None when a file does
    not say). Files that name another task or cannot be read are left out, as in
    `list_checkpoints`."""
    docs = Docs.of(memory)
    rows = []
    for info in checkpoint_infos(docs):
        if task_of(docs, info) != task_id:
            continue
        try:
            obj = loads_strict(docs.read_bytes(info.path) or b"")
        except (OSError, ValueError):
            obj = None  # changed since `task_of` read it: listed without its details
        obj = obj if isinstance(obj, dict) else {}
        extra = obj.get("extra") if isinstance(obj.get("extra"), dict) else {}
        rows.append(
            {
                "path": str(docs.path(info.path)),
                "task_id": task_id,
                "phase": _text(obj.get("phase")),
                "trigger": _text(extra.get("trigger")),
                "timestamp": _text(obj.get("timestamp")),
            }
        )
    return rows


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def checkpoint_infos(docs: Docs) -> list[DocumentInfo]:
    """The checkpoint documents, newest first (see `list_checkpoints`)."""
    found = docs.list(CHECKPOINTS, ".json")
    found.sort(key=lambda i: _sort_key(docs, i), reverse=True)
    return found


#: The opening of a checkpoint as tether renders it: its id, then its task (JSON strings).
_OPENING = re.compile(
    rb'\A\s*\{\s*"checkpoint_id"\s*:\s*"(?:[^"\\\n]|\\.)*"\s*,'
    rb'\s*"task_id"\s*:\s*("(?:[^"\\\n]|\\.)*")\s*,'
)
_HEAD = 2048


def task_of(docs: Docs, info: DocumentInfo) -> str | None:
    """The task a checkpoint file names; None when it cannot be read or parsed.

    A memory holds the checkpoints of every task it ran (a dozen per task): asking for one
    task's must not parse them all. A file that opens as tether writes it (its id, then
    its task) and ends as a JSON object is taken at its opening; any other is parsed whole.
    """
    head = docs.read_head(info.path, _HEAD)
    if head is not None and (m := _OPENING.match(head)):
        whole = len(head) >= info.size
        tail = head if whole else docs.read_bytes(info.path, offset=max(0, info.size - 16))
        if (tail or b"").rstrip().endswith(b"}"):
            with contextlib.suppress(ValueError):
                task = json.loads(m.group(1))
                if isinstance(task, str):
                    return task
    try:
        obj = loads_strict(docs.read_bytes(info.path) or b"")
    except (OSError, ValueError):
        return None
    return obj.get("task_id") if isinstance(obj, dict) else None


SUMMARY_CHARS = 80


# -- report (`checkpoint report`) -------------------------------------------------------
def _names(values: Iterable[str]) -> str:
    values = list(values)
    return f" ({', '.join(values)})" if values else ""


def _entry_line(entry_id: str, store: Any) -> str:
    if store is None:
        return f"  {entry_id}"
    try:
        entry = store.get_entry(entry_id)
    except MemoryStoreError:
        return f"  {entry_id}: (not in memory: pruned or never logged)"
    summary = " ".join(str(getattr(entry, "summary", "") or "").split())
    if len(summary) > SUMMARY_CHARS:
        summary = summary[: SUMMARY_CHARS - 3] + "..."
    return f"  {entry_id}: {summary or '(no summary)'} ({getattr(entry, 'tokens', '?')} tokens)"


def _linked_entries(cp: Checkpoint, store: Any) -> list[str]:
    ids = list(dict.fromkeys(cp.entries))
    if store is not None and cp.checkpoint_id:
        ids += [e.id for e in store.refs(checkpoint=cp.checkpoint_id) if e.id not in ids]
    return ids


def report(cp: Checkpoint, store: Any = None) -> str:
    """The `checkpoint report` text: phase, state counts, next action, memory refs.

    Args:
        store: a `memory.store.MemoryStore`; with it, each referenced entry shows its
            summary and token count (`mem-xxx: pytest results (12000 tokens)`), and entries
            logged with `--checkpoint <this id>` are listed too.
    """
    st = cp.state
    position = ""
    if cp.phases and cp.phase in cp.phases:
        marked = [f"[{p}]" if p == cp.phase else p for p in cp.phases]
        position = f" ({cp.phases.index(cp.phase) + 1}/{len(cp.phases)}: {' > '.join(marked)})"
    lines = [
        f"[CHECKPOINT] {cp.checkpoint_id or '(unsaved)'}",
        f"Task: {cp.task_id}",
        f"Timestamp: {cp.timestamp or '(unsaved)'}",
        f"Phase: {cp.phase}{position}",
    ]
    if cp.objective:
        lines.append(f"Objective: {' '.join(cp.objective.split())}")
    lines += [
        "",
        "[STATE]",
        f"  completed subtasks: {len(st.completed_subtasks)}{_names(st.completed_subtasks)}",
        f"  pending subtasks: {len(st.pending_subtasks)}{_names(st.pending_subtasks)}",
        f"  active agents: {len(st.active_agents)}{_names(st.active_agents)}",
        f"  blocked agents: {len(st.blocked_agents)}{_names(st.blocked_agents)}",
        f"  findings: {st.findings_count}",
        "",
        "[SUMMARY]",
        f"  {' '.join(cp.context_summary.split()) or '(none)'}",
        "",
        "[NEXT ACTION]",
        f"  {' '.join(cp.next_action.split()) or '(none)'}",
    ]
    notes = cp.extra.get("notes")
    if isinstance(notes, str) and notes.strip():
        lines += ["", "[NOTES]", f"  {' '.join(notes.split())}"]
    if cp.plan:
        lines += ["", "[PLAN]", f"  {cp.plan}"]
    ids = _linked_entries(cp, store)
    lines += ["", "[MEMORY REFERENCES]"]
    lines += [_entry_line(i, store) for i in ids] or ["  (none)"]
    if cp.langgraph.thread_id:
        lines += [
            "",
            "[LANGGRAPH]",
            f"  thread {cp.langgraph.thread_id}"
            + (f", checkpoint {cp.langgraph.checkpoint_id}" if cp.langgraph.checkpoint_id else ""),
        ]
    return "\n".join(lines) + "\n"


def checkpoint_summary(cp: Checkpoint, path: Path | None = None) -> JsonObject:
    """A small JSON-able summary (for `status --json` and `checkpoint list --json`)."""
    return {
        "checkpoint_id": cp.checkpoint_id,
        "task_id": cp.task_id,
        "phase": cp.phase,
        "timestamp": cp.timestamp,
        "completed": len(cp.state.completed_subtasks),
        "pending": len(cp.state.pending_subtasks),
        "blocked": len(cp.state.blocked_agents),
        "findings_count": cp.state.findings_count,
        "next_action": cp.next_action,
        "path": str(path) if path else None,
    }
