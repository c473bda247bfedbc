"""One finding as it travels: `FindingRecord`, from a subagent's `SubmitFindings` to the answer.

A finding is defined once (`orchestrator.types.Finding`); `FindingRecord` is that finding
with who wrote it and where it is (the subtask's key, agent, title, phase and id, its file,
the tokens spent). It is the one object every step takes:

* the subagent builds it from its `SubmitFindings` call, the files its tool calls wrote
  (`submitted`, `with_written`: typed tool results, never the tools' prose) and its tool
  log (`with_tools`: the calls it made, the workdir files it read);
* the artifact registry stores `finding()` under its `findings:` key
  (`orchestrator.artifacts.registry.Keys.findings`), its file is written from it
  (`orchestrator.artifacts.findings.write_finding`), and the graph state keeps `ref()`,
  a `FindingRef` (identity, status and counts; no texts);
* every later reader expands a reference back into the record (`expand`): the merge
  (`merged_input`), and the four digests, each ONE method with its bound stated once below:
  `for_lead` (the lead's findings digest, `LEAD_DISCOVERIES`), `for_answer` (the answer
  call, `ANSWER_CHARS`, `ANSWER_DISCOVERIES`, `ANSWER_FILES`), `for_subagent` (a later
  subagent's "earlier findings", `EARLIER_SUMMARY_CHARS`, `EARLIER_FILES`) and
  `for_snapshot` (a context snapshot's "What was found", `ITEM_CHARS`, `MAX_CITES`).

Grounding: a finding states what it rests on (`grounding`). It is `grounded` when its
tool log (`Finding.tools`, read from the agent's own transcript by
`orchestrator.graph.written.tool_log`) holds at least one tool call, `ungrounded` when the
log holds none (the agent wrote it from nothing), `unknown` when there is no log (a record
written before tether kept one, a remote agent whose messages it did not see). Only files
the log says were read are "examined"; a file the agent listed but never read moves to
`files_unread`, marked `not read` (it exists) or `not found` (it does not), and a file it
read but did not list is added to the examined ones. Every view marks an ungrounded finding
and names the files listed but not read.

Invariant: a record read from anywhere (a registry payload, a findings file, a reference
of an older run) is built leniently by `of` (a missing or empty field is its default), so
old memories stay readable; the digests copy the finding's words, cut only by the bounds
named here.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from pydantic import BaseModel, ValidationError

from orchestrator.artifacts.render import md_code
from orchestrator.types import (
    INLINE_FIELDS,
    MERGED_FIELDS,
    FileNote,
    Finding,
    FindingRef,
    ToolLog,
    finding_values,
)

# -- the bounds of the views -----------------------------------------------------------
LEAD_DISCOVERIES = 5
"""Key discoveries of each finding in the lead's digest (`for_lead`)."""
ANSWER_CHARS = 1200
"""Characters of one finding in the answer call's digest, at most (`for_answer`)."""
ANSWER_DISCOVERIES = 6
ANSWER_FILES = 8
"""Key discoveries and examined files of each finding in the answer call's digest."""
EARLIER_SUMMARY_CHARS = 300
EARLIER_FILES = 5
"""Characters of the summary and examined files of a finding a later subagent is told of
(`for_subagent`)."""
ITEM_CHARS = 180
"""Longest quoted sentence of a snapshot's digest (`for_snapshot`; also its turns and
questions)."""
MAX_CITES = 3
"""`file:line` citations of each finding a snapshot's digest shows (the rest counted)."""

GROUNDED, UNGROUNDED, UNKNOWN = "grounded", "ungrounded", "unknown"
"""A finding's grounding (`FindingRecord.grounding`)."""
READ_NOTE = "read by its tool calls (not described in the finding)"
"""The note of a file the agent read but did not list as examined."""


def grounding(tools: ToolLog | Mapping[str, Any] | None) -> str:
    """`grounded` (its tool log holds a call), `ungrounded` (it holds none) or `unknown`
    (no tool log)."""
    if tools is None:
        return UNKNOWN
    calls = tools.calls if isinstance(tools, ToolLog) else tools.get("calls") or {}
    return GROUNDED if any(n > 0 for n in calls.values()) else UNGROUNDED


def grounding_line(tools: ToolLog | None) -> str:
    """What a finding rests on, in one line (a findings file's `**Grounding**`)."""
    kind = grounding(tools)
    if tools is None:
        return f"{UNKNOWN}: tether saw no tool log of this agent"
    if kind == UNGROUNDED:
        return f"{UNGROUNDED}: the agent made no tool call; nothing here rests on the workdir"
    total = sum(tools.calls.values())
    by_name = ", ".join(f"{name} {n}" for name, n in sorted(tools.calls.items()))
    read = (
        "files read not known"
        if tools.read is None
        else f"{len(tools.read)} workdir file{'' if len(tools.read) == 1 else 's'} read"
    )
    return f"{GROUNDED}: {total} tool call{'' if total == 1 else 's'} ({by_name}); {read}"


def unread_mark(tools: ToolLog | None, path: str) -> str:
    """`not found` or `not read`: why a file the agent listed is not among those examined."""
    return "not found" if tools is not None and path in tools.not_found else "not read"


#: The identity a record adds to a finding, with its defaults.
IDENTITY: dict[str, Any] = {
    "key": "",
    "agent": "researcher",
    "title": "",
    "phase": "",
    "id": "",
    "path": "",
    "tokens": 0,
    "partial_reason": "",
}


class FindingRecord(Finding):
    """A finding with its identity: what travels from `SubmitFindings` to the answer."""

    key: str = ""
    """The subtask's state key, `phase/id`."""
    agent: str = "researcher"
    title: str = ""
    phase: str = ""
    id: str = ""
    """The subtask's id."""
    path: str = ""
    """The findings file, relative to the memory root ("" before it is written)."""
    tokens: int = 0
    partial_reason: str = ""
    """Why tether marked it partial (its agent stopped at its token cap), "" otherwise; kept
    in its registry record beside the finding."""

    # -- building ----------------------------------------------------------------------
    @classmethod
    def of(cls, values: Mapping[str, Any] | BaseModel) -> FindingRecord:
        """A record from any mapping holding a finding's fields (a registry payload, a
        findings file's values, a state reference), leniently: missing or empty fields are
        their defaults, file notes in any of their forms, unknown keys ignored."""
        if isinstance(values, FindingRecord):
            return values
        if isinstance(values, BaseModel):
            values = values.model_dump()
        data: dict[str, Any] = {k: _notes(v) for k, v in finding_values(values).items()}
        for name, default in IDENTITY.items():
            value = values.get(name)
            data[name] = type(default)(value) if value else default
        if not data["key"] and values.get("subtask_id"):
            data["key"] = str(values["subtask_id"])
        try:
            return cls.model_validate(data)
        except ValidationError:  # an odd old record: kept as it is rather than lost
            return cls.model_construct(**data)

    @classmethod
    def submitted(
        cls, final: BaseModel | Mapping[str, Any], sub: Mapping[str, Any], key: str, tokens: int
    ) -> FindingRecord:
        """The record of subtask `sub` (`key`) from its agent's final call."""
        values = final.model_dump() if isinstance(final, BaseModel) else dict(final)
        return cls.of(
            {
                **values,
                "key": key,
                "agent": sub["agent"],
                "title": sub.get("title"),
                "phase": sub.get("phase") or key.split("/", 1)[0],
                "id": sub["id"],
                "tokens": tokens,
            }
        )

    @classmethod
    def expand(
        cls,
        key: str,
        ref: Mapping[str, Any],
        recorded: Mapping[str, Any] | None,
        read_file: Callable[[str], Mapping[str, Any] | None],
    ) -> FindingRecord:
        """The whole finding of subtask `key` from its state reference.

        Args:
            recorded: its registry record (`Keys.findings(key)`), whose `findings` hold the
                finding as the agent submitted it (`finding()`); None when there is none.
            read_file: `path -> the values a findings file was written with`, or None when
                it cannot be read (used when the registry has no record, an older task).
        """
        payload = (recorded or {}).get("findings")
        if payload is None and ref.get("path"):
            payload = read_file(str(ref["path"]))
        # a reference of an older run may still carry the texts: they stand when nothing else does
        texts = payload if payload is not None else ref
        values = {**ref, **finding_values(texts, exclude=("status",)), "key": key}
        if payload is not None and payload.get("status") and not ref.get("status"):
            values["status"] = payload["status"]
        return cls.of(values)

    def capped(self, reason: str) -> FindingRecord:
        """This record marked partial by tether for `reason` (its agent's token cap)."""
        return self.model_copy(update={"status": "partial", "partial_reason": reason})

    def with_written(self, written: Iterable[FileNote]) -> FindingRecord:
        """This record with the files the agent's tool calls wrote apart from those it
        examined: a file both listed and written moves to `files_written`, keeping its note."""
        written = list(written)
        if not written:
            return self
        paths = {w.path for w in written}
        notes = {f.path: f.description for f in self.files}
        return self.model_copy(
            update={
                "files": [f for f in self.files if f.path not in paths],
                "files_written": [
                    FileNote(path=w.path, description=notes.get(w.path) or w.description)
                    for w in written
                ],
            }
        )

    def with_tools(self, log: ToolLog, exists: Callable[[str], bool]) -> FindingRecord:
        """This record with its agent's tool log: of the files it listed as examined, those
        it read stay (under the path the tool read; a memory file it read with
        `memory_read` as it named it), the others move to `files_unread`
        (`exists(path)` False: `not_found`, else `not_read`); the files it read and did not
        list (nor wrote) are added as examined, with `READ_NOTE`. A log whose reads are
        unknown (`read` None) leaves the files as the agent listed them."""
        if log.read is None:
            return self.model_copy(update={"tools": log})
        read = {_normal(p): p for p in log.read}
        memory = {_normal(p) for p in log.memory}
        written = {_normal(f.path) for f in self.files_written}
        examined: dict[str, FileNote] = {}
        unread: list[FileNote] = []
        not_read: list[str] = []
        not_found: list[str] = []
        for note in self.files:
            path = _normal(note.path)
            if path in read:
                kept = FileNote(path=read[path], description=note.description)
                examined.setdefault(read[path], kept)
            elif path in memory:  # a memory file it read with memory_read
                examined.setdefault(note.path, note)
            elif path:
                unread.append(note)
                (not_read if exists(path) else not_found).append(note.path)
        for path in read.values():
            if path not in examined and _normal(path) not in written:
                examined[path] = FileNote(path=path, description=READ_NOTE)
        log = log.model_copy(update={"not_read": not_read, "not_found": not_found})
        return self.model_copy(
            update={"files": list(examined.values()), "files_unread": unread, "tools": log}
        )

    @property
    def grounding(self) -> str:
        """`grounded`, `ungrounded` or `unknown` (see the module docstring)."""
        return grounding(self.tools)

    def unread(self) -> list[str]:
        """The files it listed but did not read, each as `path (not read)` or `path (not
        found)`."""
        return [f"{f.path} ({unread_mark(self.tools, f.path)})" for f in self.files_unread]

    # -- what is stored --------------------------------------------------------------------
    def finding(self) -> dict[str, Any]:
        """The finding alone (`Finding`'s fields, JSON): what the registry stores."""
        return self.model_dump(mode="json", include=set(Finding.model_fields))

    def ref(self) -> FindingRef:
        """What the graph state keeps of this finding: its identity, status and counts."""
        return FindingRef(
            path=self.path,
            agent=self.agent,
            title=self.title,
            phase=self.phase,
            id=self.id,
            tokens=self.tokens,
            status=self.status or "completed",
            grounding=self.grounding,
            counts={
                "key_discoveries": len(self.key_discoveries),
                "files": len(self.files),
                "files_written": len(self.files_written),
            },
        )

    def file_fields(self, task_id: str) -> dict[str, Any]:
        """The values of its findings file (`findings_text`'s arguments but the name and
        timestamp)."""
        return {
            "task": f"[{self.key}] {self.title or self.id}",
            **finding_values(self.finding()),
            "task_id": task_id,
            "subtask_id": self.key,
            "phase": self.phase,
        }

    def merged_input(self, task_id: str) -> dict[str, Any]:
        """This finding as a merged batch holds it (`write_merged`'s entries)."""
        values = {k: getattr(self, k) for k in MERGED_FIELDS}
        out = {k: v for k, v in values.items() if v is not None}
        return {**out, "task": self.title, "subtask_id": self.key, "task_id": task_id}

    def examined(self) -> list[str]:
        """The paths of the files it examined."""
        return [f.path for f in self.files if f.path]

    # -- the views -----------------------------------------------------------------------
    def for_lead(self) -> list[str]:
        """Its lines in the lead's digest of a batch: key, status, summary and file, then
        its first `LEAD_DISCOVERIES` discoveries."""
        where = f" ({self.path})" if self.path else ""
        lines = [f"- {self.key} [{self._marks()}]: {_flat(self.summary)}{where}"]
        lines += [f"  * {_flat(d)}" for d in self.key_discoveries[:LEAD_DISCOVERIES]]
        return lines + self._unread_lines()

    def for_answer(self, limit: int = ANSWER_CHARS) -> str:
        """Its digest for the answer call: file, status and grounding, summary, the files it
        listed but did not read, discoveries and files examined, within `limit`
        characters."""
        lines = [f"- {self.path or self.key} [{self._marks()}]: {_flat(self.summary)}"]
        lines += self._unread_lines()
        lines += [f"  * {_flat(d)}" for d in self.key_discoveries[:ANSWER_DISCOVERIES]]
        files = self.examined()[:ANSWER_FILES]
        if files:
            lines.append(f"  files: {', '.join(files)}")
        text = "\n".join(lines)
        return text if len(text) <= limit else text[: limit - 4] + " ..."

    def _marks(self) -> str:
        """Its status, with `ungrounded: no tool call` when it rests on none."""
        status = self.status or "completed"
        return f"{status}; {UNGROUNDED}: no tool call" if self.grounding == UNGROUNDED else status

    def _unread_lines(self) -> list[str]:
        unread = self.unread()
        return [f"  listed but not examined: {', '.join(unread)}"] if unread else []

    def for_subagent(self) -> str:
        """Its line among a later subagent's earlier findings: summary, file and files."""
        files = ", ".join(self.examined()[:EARLIER_FILES])
        where = f"{self.path or self.key}{'; files: ' + files if files else ''}"
        if self.grounding == UNGROUNDED:
            where += f"; {UNGROUNDED}: no tool call"
        return f"- {_flat(self.summary)[:EARLIER_SUMMARY_CHARS]} ({where})"

    def for_snapshot(self, objective: str | None = None, limit: int | None = None) -> list[str]:
        """Its item in a snapshot's "What was found": the first sentence of its summary, its
        `file:line` citations and one (cited) discovery; with `limit`, one line of about
        `limit` characters without citations."""
        key = self.key or self.agent or "?"
        where = f" {md_code(self.path)}" if self.path else ""
        summary = objective_shortened(self.summary, objective)
        if limit is not None:
            head = f"- {key} ({self._marks()}){where}: "
            sentence = first_sentence(summary, ITEM_CHARS)
            return [head + (clip(sentence, max(limit - len(head) - 1, 40)) or "_no summary_")]
        inline = [self._marks()]
        inline += [str(v) for k in INLINE_FIELDS if k != "status" and (v := getattr(self, k))]
        head = f"- {key} ({', '.join(inline)}){where}: "
        head += first_sentence(summary) or "_no summary_"
        cites = self.citations()
        if cites:
            shown = ", ".join(md_code(c) for c in cites[:MAX_CITES])
            more = f" (+{len(cites) - MAX_CITES} more)" if len(cites) > MAX_CITES else ""
            head += f" Cites {shown}{more}."
        discoveries = [str(d) for d in self.key_discoveries]
        cited = [d for d in discoveries if citations(d)] or discoveries
        return [head, *(f"  - {clip(objective_shortened(d, objective))}" for d in cited[:1])]

    def citations(self) -> list[str]:
        """The `file:line` citations of its discoveries and file notes, without repeats."""
        cites: list[str] = []
        for d in self.key_discoveries:
            cites += citations(str(d))
        for note in self.files:
            cites += citations(note.description, note.path)
        return list(dict.fromkeys(cites))


def _notes(value: Any) -> Any:
    """A list of file notes in any of their forms (`FileNote`, `{path, description}`,
    `(path, description)`) as `FileNote`s; anything else as it is."""
    if not isinstance(value, list) or not value:
        return value
    if not all(isinstance(v, FileNote | Mapping | tuple) for v in value):
        return value
    out = []
    for v in value:
        if isinstance(v, FileNote):
            out.append(v)
        elif isinstance(v, Mapping):
            out.append(FileNote(path=str(v.get("path") or ""), description=_text(v)))
        else:
            out.append(FileNote(path=str(v[0]), description=str(v[1]) if len(v) > 1 else ""))
    return out


def _text(note: Mapping[str, Any]) -> str:
    value = note.get("description")
    return "" if value is None else str(value)


def _normal(path: str) -> str:
    """A workdir path as the tools show it: forward slashes, no `./`, no trailing `/`."""
    text = str(path or "").strip().replace("\\", "/")
    return posixpath.normpath(text).lstrip("/") if text else ""


def _flat(text: Any) -> str:
    return " ".join(str(text or "").split())


# -- text helpers of the snapshot's view -----------------------------------------------
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z`\[(])")
#: File extensions a citation's path may end with when it has no `/` (a bare `Class.method`
#: name must not pass for a file).
_EXTENSIONS = (
    "py pyi md rst txt toml json yaml yml cfg ini j2 html css js jsx ts tsx go rs java kt c h "
    "cc cpp hpp cs rb php sh sql xml swift scala ex exs lua pl vue proto tf ipynb"
)
_PATH = (
    r"(?:(?:[\w.-]+/)+[\w.-]*\w\.[A-Za-z][A-Za-z0-9]{0,7}"
    rf"|[\w.-]*\w\.(?:{'|'.join(_EXTENSIONS.split())}))"
)
_FILE_LINE = re.compile(rf"(?<![\w/.-])({_PATH}):(\d+)\b")
_PATH_OR_LINE = re.compile(rf"(?<![\w/.-])(?P<path>{_PATH})(?![\w/-])|\(line (?P<line>\d+)\b")


def clip(text: str, limit: int = ITEM_CHARS) -> str:
    """`text` on one line, cut at a word boundary with ` ...` when longer than `limit`."""
    flat = " ".join(str(text).split())
    if len(flat) <= limit:
        return flat
    cut = flat.rfind(" ", 0, limit - 4)
    return flat[: cut if cut > limit // 2 else limit - 4] + " ..."


def first_sentence(text: str, limit: int = ITEM_CHARS) -> str:
    """The first sentence of `text` (clipped)."""
    flat = " ".join(str(text).split())
    return clip(_SENTENCE_END.split(flat, maxsplit=1)[0], limit)


def citations(text: str, path: str | None = None) -> list[str]:
    """The `file:line` citations `text` carries, in order, without repeats.

    Explicit `path:12` citations count, and so does `(line 12` after a path named earlier
    in the same text (or after `path`, the file a note is about), as findings write
    `Change sites in a.py: f (line 12)` and `defines f (line 12)`.
    """
    found: list[str] = [f"{p}:{n}" for p, n in _FILE_LINE.findall(text)]
    current = path
    for match in _PATH_OR_LINE.finditer(text):
        if match.group("path"):
            current = match.group("path")
        elif current:
            found.append(f"{current}:{match.group('line')}")
    return list(dict.fromkeys(found))


def objective_shortened(text: str, objective: str | None) -> str:
    """`text` with a quoted copy of the objective (stated once in the snapshot) shortened."""
    if not objective:
        return text
    for quoted in (repr(objective), f'"{objective}"', f"'{objective}'"):
        text = text.replace(quoted, "the objective")
    return text
