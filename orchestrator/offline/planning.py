"""The offline lead's plan: the workdir's files grouped into areas, ranked, one subtask each.

`ResearchPolicy` (`orchestrator.offline.policy`) calls `build_plan` once it has listed the
workdir: the listed files are grouped into areas (top-level folders, descending through
single-folder wrappers like `src/pkg`, splitting the largest area while there is room;
loose top-level files (and a split folder's own files) form one area of ten in reading
order for the objective, the rest going to further areas while there is room; folders a
cut listing only names become areas known by name and file count), the areas are ranked
by the objective's words in their paths, then by source files, then by a phase hint, and
each chosen area gets one subtask.
`_rank_files` orders an area's files for reading; subagents use it too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any

from memory.text.names import slugify
from orchestrator.offline.evidence import (
    _CODE_SUFFIXES,
    _DEFAULT_PHASE,
    _PHASES,
    Brief,
    _in_scope,
    _is_test,
)
from orchestrator.offline.filetext import _DRAWN_SUFFIXES
from orchestrator.offline.terms import (
    _path_words,
    area_subject,
    named_in,
    stem,
    stems,
    words,
)
from orchestrator.types import PLAN_CHECK, PhasePlan

if TYPE_CHECKING:
    from orchestrator.types import JsonObject

#: What a file named by an objective word counts for when none of the searched words is in
#: it (`resource-limits.md` for "where could a user limit ..." beside files that hold
#: "redirect" and "follow"): less than one of those words found.
NAME_ALONE = 0.1
_PRIORITY_STEMS = ("readme", "__init__", "main", "__main__", "index", "cli", "app", "core")
_TEXT_SUFFIXES = (
    *_CODE_SUFFIXES,
    *".md .rst .txt .toml .yaml .yml .json .h .hpp .sh .cfg .ini .gradle .sql .proto".split(),
)


@dataclass
class Area:
    """A group of files the lead can hand to one subagent."""

    name: str
    scope: list[str]
    files: list[str]
    count: int = 0
    """Its text files when the listing was cut before them (`files` is then empty)."""
    start: int | None = None
    """For loose files (the workdir's or a folder's own): where its files begin in their
    reading order."""
    folder: str | None = None
    """For a folder's own files (beside its subfolders): the folder."""


# -- areas (lead) ------------------------------------------------------------------------


def _dir_area(name: str, files: list[str]) -> Area:
    return Area(name, [name], files)


def group_areas(
    paths: Sequence[str],
    room: int,
    folders: dict[str, int] | None = None,
    goal: Sequence[str] = (),
    found: dict[str, int] | None = None,
) -> list[Area]:
    """Group listed files into areas; split the biggest area while `room` allows.

    `folders` (text files per top folder, from a listing cut short) adds an area for each
    folder the listing did not reach, known by its name and file count only. The loose
    top-level files are taken in reading order for the objective's words `goal`, ten to an
    area (a flat package such as `rich/`, 78 modules beside one folder, must not be
    surveyed by its first ten names alphabetically).
    """
    top: dict[str, list[str]] = {}
    loose: list[str] = []
    for p in paths:
        head, sep, _ = p.partition("/")
        (top.setdefault(head, []) if sep else loose).append(p)
    areas = [_dir_area(*_descend(name, files)) for name, files in sorted(top.items())]
    unseen = sorted(set(folders or {}) - set(top))
    areas += [Area(name, [name], [], (folders or {})[name]) for name in unseen]
    areas.sort(key=lambda a: a.name)
    found = found or {}
    if loose:  # the files holding the objective's names from the code first
        ranked = _rank_files(loose, goal)
        areas.append(_loose_area(sorted(ranked, key=lambda p: -found.get(p, 0)), 0))
    named = _telling({stem(w) for w in goal}, paths)
    areas = _share_dominant(areas, room, goal)
    while len(areas) < room:
        # the room goes where the objective's names from the code were found, where its
        # words point (in the files' paths), then to the biggest area
        order = sorted(
            areas,
            key=lambda a: (-_found_in(a, found), -_goal_score(a, named), -len(a.files), a.name),
        )
        for area in order:
            parts = _split(area, goal)
            free = room - len(areas) + 1  # the area's own slot and the ones left
            if parts and len(parts) > free >= 2:  # too many parts: the biggest, and the rest
                parts = _partial(area, parts, free)
            if parts and len(parts) <= free:
                areas = [a for a in areas if a is not area] + parts
                break
        else:
            break
    return areas


def _descend(name: str, files: list[str]) -> tuple[str, list[str]]:
    """Walk down wrappers like `src/` that hold a single folder and nothing else."""
    while True:
        rest = [f[len(name) + 1 :] for f in files]
        heads = {r.partition("/")[0] for r in rest}
        if len(heads) != 1 or any("/" not in r for r in rest):
            return name, files
        name = f"{name}/{heads.pop()}"


#: Loose files one subagent is given, the workdir's or a folder's own (more go to further
#: areas while there is room: a flat package such as `rich/` holds 78 modules).
LOOSE_SCOPE = 10


def _loose_area(files: list[str], start: int, folder: str | None = None) -> Area:
    """Loose files in reading order (the workdir's top-level ones, or `folder`'s own), from
    the `start`-th of them on; its scope is the first `LOOSE_SCOPE`."""
    shown = min(len(files), LOOSE_SCOPE)
    if folder is None:
        name = f"top-level files {start + 1}-{start + shown}" if start else "top-level files"
    else:
        name = f"{folder} (top level, files {start + 1}-{start + shown})" if start else ""
        name = name or f"{folder} (top level)"
    return Area(name, files[:LOOSE_SCOPE], files, start=start, folder=folder)


def _split(area: Area, goal: Sequence[str] = ()) -> list[Area]:
    """`area` as two or more areas, or [] when it cannot be split: a folder into its
    subfolders and its own files, loose files into the first `LOOSE_SCOPE` and the rest."""
    if area.start is not None:  # loose files: the first ones stay, the others go on
        if len(area.files) <= LOOSE_SCOPE:
            return []
        head, tail = area.files[:LOOSE_SCOPE], area.files[LOOSE_SCOPE:]
        return [
            _loose_area(head, area.start, area.folder),
            _loose_area(tail, area.start + LOOSE_SCOPE, area.folder),
        ]
    if area.scope != [area.name]:
        return []
    subdirs: dict[str, list[str]] = {}
    direct: list[str] = []
    for f in area.files:
        rest = f[len(area.name) + 1 :]
        head, sep, _ = rest.partition("/")
        (subdirs.setdefault(f"{area.name}/{head}", []) if sep else direct).append(f)
    parts = [_dir_area(*_descend(n, fs)) for n, fs in sorted(subdirs.items())]
    if direct:  # in reading order for the objective, as the workdir's loose files
        parts.append(_loose_area(_rank_files(direct, goal), 0, area.name))
    return parts if len(parts) >= 2 else []


def _partial(area: Area, parts: list[Area], slots: int) -> list[Area]:
    """`area` in `slots` areas when its parts are more: its biggest parts on their own,
    everything else in one area (which is not split again). A big folder with many small
    subfolders still gets the room, instead of a small folder elsewhere being split."""
    ranked = sorted(parts, key=lambda a: (-len(a.files), a.name))
    taken, rest = ranked[: slots - 1], ranked[slots - 1 :]
    scope = [path for a in rest for path in a.scope]
    files = [f for a in rest for f in a.files]
    return [*taken, Area(_other_than(area.name, taken), scope, files)]


def _other_than(name: str, taken: Sequence[Area]) -> str:
    """`gson (other than internal and gson's top level)`: the rest of `name` beside the
    areas `taken` from it, each named by its last folder (its full path is its own name)."""
    short = []
    for area in taken:
        rel = area.name[len(name) + 1 :] if area.name.startswith(name + "/") else area.name
        path, _, note = rel.partition(" (")
        tail = path.rsplit("/", 1)[-1]
        short.append(f"{tail}'s {note.rstrip(')')}" if note else tail)
    listed = ", ".join(short[:-1]) + f" and {short[-1]}" if len(short) > 1 else short[0]
    return f"{name} (other than {listed})"


#: Source files a module needs before it is cut into several areas when there is no room:
#: one subagent surveys fewer well enough (fd's `src/`, 22 modules, stays one area beside
#: its README, docs and tests).
MIN_CORE = 30
#: Folders of code that is not the project's own, however much of it there is.
_SIDE_FOLDERS = frozenset(
    "example examples sample samples demo demos doc docs benchmark benchmarks bench vendor "
    "third_party thirdparty fixtures testdata".split()
)


def _share_dominant(areas: list[Area], room: int, goal: Sequence[str]) -> list[Area]:
    """With no room left to split, an area holding at least half of the source files (a
    Maven module `gson/` of 210 files beside `extras/`, `proto/` and `metrics/`) is cut
    down until no part holds most of its source files, then into the `room // 2` parts
    holding the most and one area for the rest of it: the core of a project gets several
    subagents instead of one reading 3 of its files. The parts compete with the other
    areas for the room (`choose_areas`)."""
    want = room // 2
    if want < 2 or len(areas) < room:
        return areas
    total = sum(_source_count(a.files) for a in areas)
    big = max(areas, key=lambda a: (_source_count(a.files), a.name))
    if not total or 2 * _source_count(big.files) < total or _source_count(big.files) < MIN_CORE:
        return areas
    if big.name.split("/", 1)[0].lower() in _SIDE_FOLDERS:
        return areas  # express: 79 example apps beside a `lib/` of 6 modules
    # down through wrappers (`gson/src/main/java/com/google/gson`) until no part holds
    # most of its source files
    parts, whole = [big], _source_count(big.files)
    while True:
        target = max(parts, key=lambda p: (_source_count(p.files), p.name))
        split = _split(target, goal) if 2 * _source_count(target.files) > whole else []
        if not split:
            break
        parts = [p for p in parts if p is not target] + split
    if len(parts) == 1:
        return areas
    ranked = sorted(parts, key=lambda p: (-_source_count(p.files), p.name))
    taken, rest = ranked[:want], ranked[want:]
    if len(rest) > 1:
        rest = [
            Area(
                _other_than(big.name, taken),
                [path for a in rest for path in a.scope],
                [f for a in rest for f in a.files],
            )
        ]
    return [a for a in areas if a is not big] + taken + rest


def _telling(goal: set[str], paths: Sequence[str]) -> set[str]:
    """The objective's words that tell areas apart: not one in every path (the project's
    own name, such as "pip" in "pip/...", names them all)."""
    split = [_path_words(p) for p in paths]
    return {w for w in goal if not split or not all(named_in({w}, ws) for ws in split)}


#: Folders of code copied in from elsewhere (jq's `vendor/decNumber`).
_VENDORED = frozenset("vendor vendored third_party thirdparty third-party external deps".split())


def _vendored(area: Area) -> bool:
    return area.name.split("/", 1)[0].lower() in _VENDORED


def _found_in(area: Area, found: dict[str, int]) -> int:
    """Matching lines of a search for the objective's names from the code in `area`."""
    if not found:
        return 0
    return sum(n for path, n in found.items() if _in_scope(path, area.scope) or path in area.files)


def _source_count(files: Sequence[str]) -> int:
    """Code files that are not tests: how much of the project an area holds."""
    return sum(1 for f in files if PurePosixPath(f).suffix in _CODE_SUFFIXES and not _is_test(f))


def _goal_score(area: Area, goal: set[str]) -> float:
    """How strongly the objective's content words name an area (0: not at all)."""
    hits = sum(1 for f in area.files if named_in(goal, _path_words(f)))
    return 3.0 * len(named_in(goal, _path_words(area_subject(area.name)))) + min(5, hits)


def rank_areas(areas: Sequence[Area], brief: Brief) -> list[Area]:
    """Areas by relevance: objective words, then size in source files, then phase hint.

    Only content words count (filler like "how", "fit", "each" is a stop word). When no
    area matches them, the areas holding the most source files (the core packages) come
    first; the phase hint (docs when exploring, tests when reviewing) orders the rest.
    """
    goal = stems(brief.objective)
    hint = {stem(h) for h in _PHASES.get(brief.phase, _DEFAULT_PHASE)[3]}

    def key(area: Area) -> tuple:
        name_words = _path_words(area.name)
        affinity = 0.5 * bool(hint & name_words)
        # whole names only: README.md and docs/ count for "docs", test_docs.py does not
        affinity += 0.25 * any(
            {stem(part.lower()) for part in PurePosixPath(f).with_suffix("").parts} & hint
            for f in area.files
        )
        src = _source_count(area.files)
        return (
            -_goal_score(area, goal),
            -min(src, 1),
            -src,
            -affinity,
            -len(area.files),
            area.name,
        )

    return sorted(areas, key=key)


def _phase_position(brief: Brief) -> int:
    """0-based position of the phase: `Phase number: k of n`, else the default order."""
    if brief.phase_number:
        return brief.phase_number - 1
    order = list(_PHASES)
    return order.index(brief.phase) if brief.phase in order else 0


def choose_areas(
    areas: Sequence[Area], brief: Brief, limit: int, found: dict[str, int] | None = None
) -> tuple[list, list]:
    """`(chosen, left_out)`: areas holding the objective's names from the code (`found`,
    most lines first), areas named by its words, then source packages, then the rest.

    When more source packages than free slots remain, each phase takes the next window of
    them (by phase position), so that over the phases every package is covered once.
    """
    found = found or {}
    ranked = rank_areas(areas, brief)
    if len(ranked) <= limit:
        return ranked, []
    goal = stems(brief.objective)
    holding = sorted((a for a in ranked if _found_in(a, found)), key=lambda a: -_found_in(a, found))
    named = [*holding, *(a for a in ranked if _goal_score(a, goal) > 0 and a not in holding)]
    named = named[:limit]
    # vendored code is someone else's: after the project's own, unless the objective names it
    sources = [a for a in ranked if a not in named and _source_count(a.files) and not _vendored(a)]
    free = limit - len(named)
    if free and len(sources) > free:
        shift = (_phase_position(brief) * free) % len(sources)
        sources = sources[shift:] + sources[:shift]
    rest = [a for a in ranked if a not in named and a not in sources]
    rest.sort(key=_vendored)  # stable: the vendored ones last
    picked = (named + sources + rest)[:limit]
    chosen = [a for a in ranked if a in picked]
    return chosen, [a for a in ranked if a not in picked]


# -- files (subagent) ----------------------------------------------------------------------


def _rank_files(
    paths: Sequence[str],
    goal: Sequence[str],
    phase: str = "exploration",
    sizes: dict[str, int] | None = None,
    untested: Sequence[str] = (),
    central: dict[str, int] | None = None,
) -> list[str]:
    """Files in reading order for `phase`; near-empty files (< 40 bytes) always last.

    Exploring reads README/`__init__` files first, then files named like the goal;
    planning prefers goal-named docs, then files exploring would not read first;
    implementation goal-named code, then the biggest
    modules; review test files, then modules no test is named after (`untested`), then
    the biggest ones. So the phases read (and report) different files of one area.
    Outside review, the files where the objective's words were found most (`central`,
    `Evidence.centrality`) come first, a file named by one of them counting as one more
    (only `NAME_ALONE` of one when no searched word is in it): they are the ones that
    answer it.
    """
    central = central or {}
    goal_set = {stem(g) for g in goal}
    sizes = sizes or {}
    # planning reads on where exploration (3 reads by default) stopped
    explored = (
        set(_rank_files(paths, goal, "exploration", sizes)[:3]) if phase == "planning" else set()
    )

    def key(path: str) -> tuple:
        p = PurePosixPath(path)
        name = p.stem.lower()
        prio = _PRIORITY_STEMS.index(name) if name in _PRIORITY_STEMS else len(_PRIORITY_STEMS)
        hits = -len(named_in(goal_set, _path_words(path)))
        tiny = int(bool(sizes) and sizes.get(path, 1000) < 40)
        suffix = p.suffix.lower()
        data = int(suffix not in _TEXT_SUFFIXES)  # an image, a lock file: read last
        rest = (data, len(p.parts), path)
        code = int(suffix not in _CODE_SUFFIXES)
        big = -sizes.get(path, 0)
        if central and phase != "review":
            # a file named by the objective's word (`parser.py` for "parse") counts as one
            # more of its words found there
            found = central.get(path, 0.0)
            named = -hits if found else -hits * NAME_ALONE
            # a logo's markup and a lock file's package names match words too
            made = int(suffix in _DRAWN_SUFFIXES or _is_lock_file(p.name))
            # beside the code it tests, a test file repeats the words: the code first
            return (tiny, made, int(_is_test(path)), -(found + named), code, data, big, *rest)
        if phase == "planning":
            doc = int(suffix not in (".md", ".rst", ".txt"))
            return (tiny, hits, doc, int(path in explored), prio, *rest)
        if phase == "implementation":
            return (tiny, hits, code, int(name.startswith("__")), data, big, *rest)
        if phase == "review":
            return (
                tiny,
                int(not _is_test(path)),
                hits,
                int(path not in untested),
                code,
                data,
                big,
                *rest,
            )
        return (tiny, min(prio, 2), hits, prio, *rest)

    return sorted(paths, key=key)


def build_plan(
    brief: Brief,
    files: Sequence[str],
    folders: dict[str, int] | None = None,
    found: dict[str, int] | None = None,
    root: str = "",
    earlier: Sequence[tuple[str, str]] = (),
) -> PhasePlan:
    """The `PhasePlan` for this phase from the objective and the listed files (and, when
    the listing was cut, the file count of every top folder; `found`: matching lines per
    file of a search for the names from the code that the objective gives; `root`: the
    workdir's name, which the plan does not list among the objective's words; `earlier`:
    the `(phase, subtask id)` of the subtasks completed so far (`completed_subtasks`), so
    that an area this phase leaves out is not said to be left out of the task)."""
    action = _PHASES.get(brief.phase, _DEFAULT_PHASE)[1]
    limit = max(1, brief.max_subtasks)
    goal_words = words(brief.objective or "")
    found = found or {}
    areas = group_areas(files, limit, folders, goal_words, found)
    uncovered = [a for a in areas if not _covered(a, brief.covered)]
    if (brief.wave or 1) > 1:  # a later wave plans only what no finished subtask covered
        if not uncovered:
            return _phase_done(brief)
        areas = uncovered
    chosen, left_out = choose_areas(areas, brief, limit, found)
    more = [a for a in uncovered if a not in chosen]
    objective = (brief.objective or "the task").rstrip(" .?!")
    subtasks = _subtasks(brief, chosen, objective)
    goal = words(objective)
    named = any(_goal_score(a, set(map(stem, goal))) for a in chosen)
    project = stems(root.replace("-", " ").replace("_", " "))  # "how does express ..."
    said = [w for w in _one_per_stem(goal) if stem(w) not in project][:4]
    basis = (
        f" ranked by the objective's words ({', '.join(said)})"
        if named
        else " ranked by size (source files), as the objective names no area"
    )
    if found:  # the search for the objective's names from the code
        where = f"{sum(found.values())} matching line(s) in {len(found)} file(s)"
        basis = f" ranked by where the names it gives occur ({where}), then{basis[7:]}"
    names = ", ".join(a.name for a in chosen) or "the workdir"
    constraints = [
        "Read-only access to the workdir (list_files, read_file, grep_files).",
        "Cite real file paths in every finding.",
    ]
    if left_out:
        constraints.append(_left_out(brief.phase, left_out, earlier))
    if files and not folders and not any(_is_test(f) for f in files):  # a whole listing
        constraints.append(
            f"The workdir ships no test file ({len(files)} files listed): the findings make "
            "no claim about test coverage."
        )
    # the objective's words, not the objective again: the plan states it once, and every
    # copy of it is one more search hit that only repeats the question
    about = "the objective" + (f" ({', '.join(said)})" if said else "")
    questions = [f"Which files in {a.name} matter for {about}?" for a in chosen[:2]]
    questions.append(f"What should the {brief.phase} phase report for {about}?")
    return _plan(
        {
            "strategy": (
                f"{brief.phase.capitalize()} phase: {action} {len(subtasks)} area(s) of "
                f"the workdir{basis}: {names}; one subagent each, then merge the findings."
            ),
            "key_questions": questions,
            "subtasks": subtasks,
            "constraints": constraints,
            "next_actions": [
                f"Run the {len(subtasks)} subtask(s) in parallel.",
                "Merge the findings, write a checkpoint, "
                + (
                    f"then plan another wave ({len(more)} area(s) left)."
                    if more
                    else "advance to the next phase."
                ),
            ],
            "continue_phase": bool(more),
        }
    )


def _plan(values: dict) -> PhasePlan:
    """The plan of `values`, validated by its fields (the run's check of a plan against the
    workdir applies to the call the lead makes with it, not to the offline model's draft)."""
    token = PLAN_CHECK.set(None)
    try:
        return PhasePlan.model_validate(values)
    finally:
        PLAN_CHECK.reset(token)


def _covered(area: Area, covered: Sequence[str]) -> bool:
    """Whether every scope of `area` is inside a scope a finished subtask covered."""
    if not covered or not area.scope:
        return False
    roots = [c.strip("/") for c in covered]
    return all(
        any(s.strip("/") == c or s.strip("/").startswith(c + "/") or c in ("", ".") for c in roots)
        for s in area.scope
    )


def _phase_done(brief: Brief) -> PhasePlan:
    """The plan of a later wave when every area is covered: no subtasks, the phase ends."""
    return _plan(
        {
            "strategy": f"{brief.phase.capitalize()} phase, wave {brief.wave}: every area "
            "of the workdir is covered by an earlier wave; no more subtasks.",
            "next_actions": ["Advance to the next phase."],
        }
    )


def _left_out(phase: str, areas: Sequence[Area], earlier: Sequence[tuple[str, str]]) -> str:
    """The constraint naming the areas this phase leaves out, each with the earlier phases
    that surveyed it (`docs (surveyed in exploration, planning)`): the plan of a task that
    is done shows its last phase's constraints, which must not say that an area the task
    surveyed was left out."""
    named = []
    for area in areas:
        slug = slugify(area.name, 40, fallback="root")
        phases = list(dict.fromkeys(p for p, sid in earlier if sid == f"{p}-{slug}"))
        named.append(f"{area.name} (surveyed in {', '.join(phases)})" if phases else area.name)
    return f"Left out of the {phase} phase: {', '.join(named)}."


def _subtasks(brief: Brief, areas: Sequence[Area], objective: str) -> list[JsonObject]:
    """One subtask per area (or one over the whole workdir when nothing was listed)."""
    verb, action, report, _ = _PHASES.get(brief.phase, _DEFAULT_PHASE)
    agent = _pick_agent(brief)
    phase = slugify(brief.phase, 40, fallback="root")
    out: list[dict[str, Any]] = []
    ids: set[str] = set()
    for area in areas:
        sid = f"{phase}-{slugify(area.name, 40, fallback='root')}"
        while sid in ids:
            sid += "-2"
        ids.add(sid)
        examples = ", ".join(_rank_files(area.files, words(objective))[:3])
        count = len(area.files) or area.count
        what = f"{area.name} ({count} file(s){f', e.g. {examples}' if examples else ''})"
        out.append(
            {
                "id": sid,
                "title": f"{verb} {area.name}",
                "scope": area.scope,
                "description": f"{action.capitalize()} {what} for the objective: "
                f"{objective}. Report {report}.",
                "agent": agent,
            }
        )
    if not out:
        out.append(
            {
                "id": f"{phase}-workdir",
                "title": f"{verb} the workdir",
                "scope": [],
                "description": f"{action.capitalize()} the workdir for the objective: "
                f"{objective}. Report {report}.",
                "agent": agent,
            }
        )
    return out


def _pick_agent(brief: Brief) -> str:
    """The listed agent whose name starts like the phase (`reviewer`/review), else the first."""
    if not brief.agents:
        return "researcher"
    stem = brief.phase[:4]
    return next((a for a in brief.agents if stem and a.lower().startswith(stem)), brief.agents[0])


def _one_per_stem(found: Sequence[str]) -> list[str]:
    """`found` with one word per stem (`cookies, cookie` -> `cookies`)."""
    firsts: dict[str, str] = {}
    for w in found:
        firsts.setdefault(stem(w), w)
    return list(firsts.values())


_LOCK_NAMES = frozenset(
    "package-lock.json npm-shrinkwrap.json yarn.lock pnpm-lock.yaml go.sum composer.lock"
    " Gemfile.lock Pipfile.lock".split()
)


def _is_lock_file(name: str) -> bool:
    """A dependency lock file (`Cargo.lock`, `poetry.lock`, `package-lock.json`, ...):
    generated, and full of package names."""
    return name in _LOCK_NAMES or name.endswith(".lock")
