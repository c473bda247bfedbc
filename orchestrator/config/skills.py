"""Skills: `SKILL.md` files with YAML front matter, shipped with tether or in a project.

A skill is a folder `skills/<name>/SKILL.md` (plus optional `references/`). Its front
matter says what it is (`name`, `description`, optional `triggers` and other keys); the
body is the instructions. Agents see only `name: description` lines (`skills_index`) and
load a body when they need it (`load_skill`), so skills cost almost nothing in context
until used.

Discovery merges tether's shipped `skills/` with the project's `skills/` folder; a project
skill with the same name replaces the shipped one. The `external-memory` skill's
`triggers` configure the orchestrator's monitor (`external_memory_triggers`).

Invariant: every `Skill` returned has a valid name and description; any malformed front
matter raises `SkillError` with one line naming the file and the problem.
"""

from __future__ import annotations

import copy
import functools
import os
import re
import reprlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from memory.errors import PathEscapeError
from memory.paths import read_bounded
from memory.resources import shipped_dir
from orchestrator.config import _yaml
from orchestrator.config.defaults import TOKEN_THRESHOLD, WARNING_RATIO
from orchestrator.errors import SkillError

if TYPE_CHECKING:
    from orchestrator.types import JsonObject

SKILL_FILE = "SKILL.md"
EXTERNAL_MEMORY = "external-memory"
NAME_RE = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?$")
MAX_DESCRIPTION = 1024
MAX_SKILL_BYTES = 8_000_000
"""A skill file larger than this is not even read (its front matter is bounded again, by
`orchestrator.config._yaml`)."""
_FRONT_END = re.compile(r"^(?:---|\.\.\.)[ \t]*$", re.MULTILINE)


@dataclass(frozen=True)
class Triggers:
    """When the orchestrator saves memory (the external-memory skill's `triggers`)."""

    token_threshold: int = TOKEN_THRESHOLD
    """Tokens of lead context at which a snapshot is written and the lead starts fresh."""
    warning_ratio: float = WARNING_RATIO
    """Fraction of `token_threshold` where the warning zone starts."""
    phase_transition: bool = True
    agent_completion: bool = True
    before_spawning: bool = True

    @property
    def warning_tokens(self) -> int:
        """The first token count in the warning zone (120,000 by default)."""
        return int(self.token_threshold * self.warning_ratio)


TRIGGER_KEYS = (
    "token_threshold",
    "warning_ratio",
    "warning_zone",
    "phase_transition",
    "agent_completion",
    "before_spawning",
)


@dataclass
class Skill:
    """One skill; `body` is read from disk on first use."""

    name: str
    description: str
    triggers: dict[str, Any]
    path: Path
    source: str = "shipped"
    """`shipped` or `project`."""
    metadata: dict[str, Any] = field(default_factory=dict)
    """The whole front matter, including keys tether does not interpret."""

    @functools.cached_property
    def body(self) -> str:
        """The instructions after the front matter."""
        return _split(_read(self.path), self.path)[1]

    @property
    def folder(self) -> Path:
        return self.path.parent


#: How error messages show a value from a front matter: a project's file may hold a huge one.
_SHOW = reprlib.Repr()
_SHOW.maxstring = _SHOW.maxother = 80
_SHOW.maxlist = _SHOW.maxtuple = _SHOW.maxdict = 4
_SHOW.maxlevel = 2


def _shown(value: Any) -> str:
    return _SHOW.repr(value)


# -- parsing --------------------------------------------------------------------------
def _read(path: Path) -> str:
    """A skill file's text: a regular file inside its skills folder, at most
    `MAX_SKILL_BYTES` (a project's skill is untrusted: a FIFO or a link to a device must
    not hang or exhaust a run)."""
    try:
        data = read_bounded(path, MAX_SKILL_BYTES, within=path.parent.parent)
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise SkillError(f"skill file {str(path)!r} is not UTF-8 text") from None
    except PathEscapeError:
        raise SkillError(
            f"skill file {str(path)!r} resolves outside its skills folder (a symlink); "
            "put the skill's file itself there"
        ) from None
    except OSError as exc:
        raise SkillError(f"cannot read skill file {str(path)!r}: {exc.strerror}") from None


def _split(text: str, path: Path) -> tuple[str, str]:
    """(front matter YAML, body) of a SKILL.md."""
    text = text.replace("\r\n", "\n")
    if not text.startswith("---\n"):
        raise SkillError(
            f"skill file {str(path)!r} has no YAML front matter; start it with a '---' line, "
            "'name:' and 'description:', then another '---' line"
        )
    end = _FRONT_END.search(text, 4)
    if end is None:
        raise SkillError(
            f"skill file {str(path)!r}: front matter is not closed; add a '---' line after it"
        )
    return text[4 : end.start()], text[end.end() :].lstrip("\n")


def yaml_problem(exc: yaml.YAMLError, lines_before: int = 0) -> str:
    """One line saying what is wrong in a YAML text and where (1-based line numbers).

    `lines_before` counts lines in the file above the parsed text (front matter: the `---`).
    """
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or " ".join(str(exc).split())
    return f"{problem} at line {mark.line + 1 + lines_before}" if mark is not None else problem


@functools.lru_cache(maxsize=64)
def _load_yaml(text: str) -> Any:
    """The front matter parsed within `_yaml`'s limits (a project's skills are untrusted),
    once per distinct text (skills are read on every run and workflow load; parsing the
    shipped one took most of a `discover_skills` call)."""
    return _yaml.load(text)


def parse_skill(path: Path, source: str = "shipped") -> Skill:
    """Parse one `SKILL.md`.

    Raises:
        SkillError: unreadable file, missing or malformed front matter, missing or
            ill-typed `name`/`description`/`triggers`.
    """
    path = Path(path)
    front, _ = _split(_read(path), path)
    try:
        meta = copy.deepcopy(_load_yaml(front))
    except yaml.YAMLError as exc:
        problem = yaml_problem(exc, lines_before=1)  # the opening '---'
        raise SkillError(
            f"skill file {str(path)!r}: invalid YAML front matter: {problem}"
        ) from None
    if not isinstance(meta, dict):
        raise SkillError(
            f"skill file {str(path)!r}: front matter must be a mapping with 'name' and "
            f"'description', got {type(meta).__name__}"
        )
    name, description = meta.get("name"), meta.get("description")
    for key, value in (("name", name), ("description", description)):
        if value is None:
            raise SkillError(f"skill file {str(path)!r}: front matter has no {key!r}; add one")
        if not isinstance(value, str) or not value.strip():
            raise SkillError(
                f"skill file {str(path)!r}: {key!r} must be a non-empty string, got {_shown(value)}"
            )
    if not NAME_RE.match(name):
        raise SkillError(
            f"skill file {str(path)!r}: name {_shown(name)} must be lowercase letters, digits and "
            "'-' (at most 64 characters)"
        )
    if len(description) > MAX_DESCRIPTION:
        raise SkillError(
            f"skill file {str(path)!r}: description is {len(description)} characters; "
            f"keep it under {MAX_DESCRIPTION} and move details into the body"
        )
    triggers = normalize_triggers(meta.get("triggers"), path)
    return Skill(
        name=name,
        description=" ".join(description.split()),
        triggers=triggers,
        path=path,
        source=source,
        metadata=meta,
    )


def normalize_triggers(raw: object, path: Path) -> JsonObject:
    """`triggers` as a mapping; a list of one-key mappings is accepted too."""
    if raw is None:
        return {}
    if isinstance(raw, dict):
        return {str(k): v for k, v in raw.items()}
    if isinstance(raw, list):
        out: dict[str, Any] = {}
        for item in raw:
            if isinstance(item, str):
                out[item] = True
            elif isinstance(item, dict) and len(item) == 1:
                out.update({str(k): v for k, v in item.items()})
            else:
                raise SkillError(
                    f"skill file {str(path)!r}: trigger {_shown(item)} must be 'name: value'"
                )
        return out
    raise SkillError(
        f"skill file {str(path)!r}: 'triggers' must be a mapping, got {type(raw).__name__}"
    )


# -- discovery ------------------------------------------------------------------------
def _skill_files(folder: Path) -> list[Path]:
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.glob(f"*/{SKILL_FILE}") if not p.parent.name.startswith("."))


def discover_skills(project_dir: str | os.PathLike[str] | None = None) -> list[Skill]:
    """Shipped skills plus `{project_dir}/skills/*/SKILL.md`, sorted by name.

    A project skill replaces a shipped one of the same name. `project_dir` defaults to
    the current directory.

    Raises:
        SkillError: a skill file is malformed, or two project skills share a name.
    """
    shipped = shipped_dir("skills")
    project = Path(project_dir) if project_dir is not None else Path.cwd()
    project_skills = project / "skills"
    found: dict[str, Skill] = {}
    for path in _skill_files(shipped):
        skill = parse_skill(path, "shipped")
        found[skill.name] = skill
    same_folder = project_skills.is_dir() and project_skills.resolve() == shipped.resolve()
    if not same_folder:
        seen: dict[str, Path] = {}
        for path in _skill_files(project_skills):
            skill = parse_skill(path, "project")
            if skill.name in seen:
                raise SkillError(
                    f"skill file {str(path)!r}: name {skill.name!r} is also used by "
                    f"{str(seen[skill.name])!r}; give each skill its own name"
                )
            seen[skill.name] = path
            found[skill.name] = skill
    return [found[name] for name in sorted(found)]


def skills_index(skills: list[Skill]) -> str:
    """One `- name: description` line per skill, for an agent's system prompt."""
    return "\n".join(f"- {s.name}: {s.description}" for s in skills)


def find_skill(name: str, project_dir: str | os.PathLike[str] | None = None) -> Skill:
    """The skill called `name`.

    Raises:
        SkillError: no such skill (the message lists the available ones).
    """
    skills = discover_skills(project_dir)
    for skill in skills:
        if skill.name == name:
            return skill
    available = ", ".join(s.name for s in skills) or "none"
    raise SkillError(f"unknown skill {name!r}; available: {available}")


def load_skill(name: str, project_dir: str | os.PathLike[str] | None = None) -> str:
    """The body (instructions) of the skill called `name`."""
    return find_skill(name, project_dir).body


# -- external-memory triggers ---------------------------------------------------------
def triggers_from(raw: JsonObject, path: Path) -> Triggers:
    """Validate an external-memory `triggers` mapping into `Triggers`.

    `warning_zone` (tokens) is accepted instead of `warning_ratio`.
    """
    unknown = sorted(set(raw) - set(TRIGGER_KEYS))
    if unknown:
        raise SkillError(
            f"skill file {str(path)!r}: unknown trigger {_shown(unknown[0])}; "
            f"known: {', '.join(TRIGGER_KEYS)}"
        )
    defaults = Triggers()
    threshold = raw.get("token_threshold", defaults.token_threshold)
    if isinstance(threshold, bool) or not isinstance(threshold, int) or threshold <= 0:
        raise SkillError(
            f"skill file {str(path)!r}: token_threshold must be a positive integer, "
            f"got {_shown(threshold)}"
        )
    ratio = raw.get("warning_ratio", defaults.warning_ratio)
    if "warning_zone" in raw and "warning_ratio" not in raw:
        zone = raw["warning_zone"]
        if isinstance(zone, bool) or not isinstance(zone, int) or not 0 < zone <= threshold:
            raise SkillError(
                f"skill file {str(path)!r}: warning_zone must be a token count between 1 and "
                f"token_threshold ({threshold}), got {_shown(zone)}"
            )
        ratio = zone / threshold
    if isinstance(ratio, bool) or not isinstance(ratio, int | float) or not 0 < ratio <= 1:
        raise SkillError(
            f"skill file {str(path)!r}: warning_ratio must be a number in (0, 1], "
            f"got {_shown(ratio)}"
        )
    flags = {}
    for key in ("phase_transition", "agent_completion", "before_spawning"):
        value = raw.get(key, getattr(defaults, key))
        if not isinstance(value, bool):
            raise SkillError(
                f"skill file {str(path)!r}: trigger {key!r} must be true or false, "
                f"got {_shown(value)}"
            )
        flags[key] = value
    return Triggers(token_threshold=threshold, warning_ratio=float(ratio), **flags)


def external_memory_triggers(project_dir: str | os.PathLike[str] | None = None) -> Triggers:
    """The monitor's triggers, read from the external-memory skill's front matter.

    A project's own `skills/external-memory/SKILL.md` takes precedence; without any
    external-memory skill the built-in defaults apply.
    """
    for skill in discover_skills(project_dir):
        if skill.name == EXTERNAL_MEMORY:
            return triggers_from(skill.triggers, skill.path)
    return Triggers()
