"""Credential files kept from agents: what no workdir tool reads, lists, searches or writes.

A project often holds secrets beside its code (`.env`, `prod.env`, `.npmrc`, `.netrc`,
`.aws/credentials`, SSH keys, certificates' private keys). What an agent reads goes to the
provider and into the memory (messages, findings, the index), so these files are kept from
every workdir tool: `read_file` and the write tools refuse them by name (naming the rule,
never the content), `list_files` and `grep_files` leave them out as they leave out hidden
files. The workflow's `secret_files` adds patterns of the user's own to `DEFAULT_SECRET_FILES`.

A pattern is one of:

* `name/`: a folder; everything under any folder of that name is kept (`.ssh/`);
* a glob without `/`: matched against a file's name (`*.pem`, `.env*`);
* a glob with `/`: matched against the path relative to the workdir (`config/prod/*.yaml`).

Matching ignores case (`ID_RSA`, `Prod.ENV`). SSH private keys are kept by their usual names
(`id_rsa`, `id_ed25519`, ...); their public halves (`id_rsa.pub`) are not secrets and stay
readable, and a source file named `id_utils.py` is no key.

Invariant: a path a rule matches is never opened by a workdir tool.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Sequence

#: The patterns every run keeps from agents (the workflow's `secret_files` adds to them).
DEFAULT_SECRET_FILES: tuple[str, ...] = (
    ".env*",
    "*.env",
    ".envrc",
    ".netrc",
    "_netrc",
    ".pgpass",
    ".npmrc",
    ".pypirc",
    ".git-credentials",
    ".aws/",
    ".ssh/",
    ".gnupg/",
    "id_rsa",
    "id_dsa",
    "id_ecdsa",
    "id_ecdsa_sk",
    "id_ed25519",
    "id_ed25519_sk",
    "*.pem",
    "*.key",
    "*.p12",
    "*.pfx",
    "credentials*.json",
)


def check_pattern(pattern: str) -> str:
    """`pattern` if it is a usable rule (see the module docstring).

    Raises:
        ValueError: empty, absolute, or climbing out with `..`.
    """
    text = pattern.strip()
    if not text or text == "/":
        raise ValueError(f"{pattern!r} is empty; give a file name, a glob or a folder/")
    if text.startswith("/") or ".." in text.split("/"):
        raise ValueError(f"{pattern!r} must be relative to the workdir (no leading /, no ..)")
    return text


class SecretFiles:
    """The rules of one run (the defaults, then the workflow's `secret_files`), compiled
    once: a walk of 20,000 files asks about each.

    Args:
        extra: the workflow's `secret_files`.
    """

    def __init__(self, extra: Iterable[str] = ()) -> None:
        self.rules = tuple(dict.fromkeys((*DEFAULT_SECRET_FILES, *extra)))
        self._names = [r for r in self.rules if "/" not in r]
        self._folders = [r for r in self.rules if r.endswith("/")]
        self._paths = [r for r in self.rules if "/" in r.rstrip("/")]
        self._any_name = _one_regex(self._names)
        self._any_folder = _one_regex([r.rstrip("/") for r in self._folders if "/" not in r[:-1]])

    def rule(self, parts: Sequence[str], *, is_dir: bool = False) -> str | None:
        """The rule that keeps the workdir path `parts` (its names relative to the workdir,
        folders first) from agents, or None. A folder is matched by the folder rules, a
        file by every rule (its folders by the folder rules)."""
        if not parts:
            return None
        folders = parts if is_dir else parts[:-1]
        for name in folders:
            if self._any_folder is not None and self._any_folder.match(name):
                return next(r for r in self._folders if _glob(name, r.rstrip("/")))
        for i in range(len(folders)):
            prefix = "/".join(folders[: i + 1])
            for r in self._folders:
                if "/" in r.rstrip("/") and _glob(prefix, r.rstrip("/")):
                    return r
        if is_dir:
            return None
        if self._any_name is not None and self._any_name.match(parts[-1]):
            return next(r for r in self._names if _glob(parts[-1], r))
        rel = "/".join(parts)
        return next((r for r in self._paths if not r.endswith("/") and _glob(rel, r)), None)

    def name_kept(self, name: str) -> bool:
        """Whether a file name alone is kept (the walk's quick test; path rules aside)."""
        return self._any_name is not None and self._any_name.match(name) is not None

    @property
    def has_path_rules(self) -> bool:
        return any(not r.endswith("/") for r in self._paths)


def _glob(text: str, pattern: str) -> bool:
    return fnmatch.fnmatchcase(text.lower(), pattern.strip().lower())


def _one_regex(patterns: Sequence[str]) -> re.Pattern[str] | None:
    if not patterns:
        return None
    return re.compile("|".join(f"(?:{fnmatch.translate(p.strip())})" for p in patterns), re.I)


def kept_message(raw: str, rule: str) -> str:
    """The refusal an agent gets for a kept path: the rule, never the content."""
    return (
        f"path {raw!r} is kept from agents: it may hold credentials (secret_files rule "
        f"{rule!r}); tether never reads, searches or writes such files"
    )
