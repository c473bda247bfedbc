"""What a file says about itself: its first prose line (a docstring, a comment, a heading,
a README's first sentence past its badges) and the names it defines, for the offline
model's findings. Drawings (`.svg`) say nothing; prose defines nothing."""

from __future__ import annotations

import ast
import re
from collections.abc import Collection, Sequence
from pathlib import PurePosixPath

from orchestrator.offline.comments import _PROSE_SUFFIXES
from orchestrator.offline.defs import defs_with_lines, property_target

_PROSE_RE = re.compile(r"^(\"\"\"|'\'\'|#+\s|#$|//|/\*|\*|--|;|<!--|[rbu]?\"\"\")")
_CLOSING_QUOTES_RE = re.compile(r"\"\"\"|'''")
_MARKER_RE = re.compile(r"^([rbu]?\"\"\"|'\'\'|#+|//+!?|/\*+!?|\*+|--|;+|<!--|\{#-?)\s*")
#: A licence header's lines: the comment block they open is not the file's description.
_LICENSE_RE = re.compile(
    r"copyright|licen[cs]ed?\b|spdx-license|all rights reserved|permission is hereby granted",
    re.IGNORECASE,
)


#: A comment that talks to a tool, not to a reader (`//go:build darwin`, `// eslint-disable`).
_DIRECTIVE_RE = re.compile(
    r"^(go:\w+|\+build\b|nolint\b|eslint[- ]|@ts-|prettier-ignore|tslint:|jshint\b"
    r"|istanbul ignore|type:\s*ignore|pylint:|mypy:|noqa\b|fmt:\s*(off|on|skip)|#(end)?region\b"
    r"|frozen_string_literal:|typed:\s*\w+$|rubocop:|warn_indent:|shareable_constant_value:)",
    re.IGNORECASE,
)
_GENERIC_HEADINGS = frozenset({"name", "synopsis", "contents", "table of contents", "toc"})
_DRAWN_SUFFIXES = (".svg", ".map")
#: Files whose first line of text may describe them (no suffix: README, LICENSE, NEWS).
_READ_AS_TEXT = frozenset(
    (*_PROSE_SUFFIXES, "", ".markdown", ".adoc", ".org", ".htm", ".tex", ".json", ".yaml",
     ".yml", ".toml", ".cfg", ".ini", ".xml", ".csv", ".tsv", ".in", ".spec", ".properties")
)  # fmt: skip
_IMAGE_RE = re.compile(r"!\[[^\]]*\]\([^)]*\)")
_LINK_RE = re.compile(r"\[([^\]]*)\]\([^)]*\)")
_TAG_RE = re.compile(r"<[^>]*>")
_SENTENCE_END = re.compile(r"[.!?](?=\s|$)")
_EMPHASIS_RE = re.compile(r"(\*\*|__)(\S.*?)\1")
#: A reference-style link (`[WSGI]`, `[text][ref]`): its text.
_REF_LINK_RE = re.compile(r"\[([^\]]+)\](?:\[[^\]]*\])?(?![(:])")
_TEMPLATE_TAG_RE = re.compile(r"\{%.*?%\}|\{\{.*?\}\}|\{#.*?#\}")  # Jinja, Liquid, Handlebars
#: Small print and links: a sponsor's note in `<sup>`, a logo or a tagline inside `<a>`.
_ASIDE_SPAN_RE = re.compile(r"<(sup|sub|small)\b[^>]*>.*?</\1\s*>", re.IGNORECASE)
_ASIDE_OPEN_RE = re.compile(r"<(?:a|sup|sub|small)\b[^>]*>", re.IGNORECASE)
_ASIDE_CLOSE_RE = re.compile(r"</(?:a|sup|sub|small)\s*>", re.IGNORECASE)


def _visible(text: str) -> str:
    """What a reader sees of a markdown/HTML line: no images (badges), links as their
    text, no tags (`<p align="center">`); nothing for a line of links alone (a row of
    badges, a language switch `[[Deutsch](...)]`, a menu `[Docs](...) | [API](...)`)."""
    text = _TAG_RE.sub("", _IMAGE_RE.sub("", _TEMPLATE_TAG_RE.sub("", text)))
    if not re.search(r"[^\W\d_]", _LINK_RE.sub("", text)):
        return ""
    return _REF_LINK_RE.sub(r"\1", _LINK_RE.sub(r"\1", text)).strip(" \t-|:")


def _is_words(text: str) -> bool:
    """Mostly letters and at least one real word (not ASCII art such as `/__)  _  _`)."""
    visible = [c for c in text if not c.isspace()]
    letters = sum(c.isalpha() for c in visible)
    return bool(re.search(r"[A-Za-z]{3}", text)) and letters * 2 >= len(visible)


def outline(
    lines: Sequence[str], path: str = "", breaks: Collection[int] = ()
) -> list[tuple[str, int, str]]:
    """`(name, line, first docstring line)` of the definitions in the lines read.

    Python is parsed with `ast` (classes, functions and their methods as `Class.method`)
    up to the last top-level definition that makes the lines parse (a read cut short ends
    inside one); the rest, and anything that is not Python, goes through `qualified_defs`
    with an empty docstring. `breaks` are the lines where a later read of the file starts.
    """
    if PurePosixPath(path).suffix in (".py", ".pyi"):
        cut = min(breaks, default=len(lines) + 1) - 1  # `ast` reads the first read only
        for _ in range(_PARSE_TRIES):
            try:
                tree = ast.parse("\n".join(lines[:cut]))
            except (SyntaxError, ValueError):
                cut = next((i for i in range(cut - 1, 0, -1) if _TOP_LEVEL_RE.match(lines[i])), 0)
                if not cut:
                    break
                continue
            parsed = [d for node in tree.body for d in _ast_defs(node, "")]
            rest = qualified_defs(lines[cut:], path, {b - cut for b in breaks})
            return parsed + [(n, i + cut, "") for n, i in rest]
    return [(n, i, "") for n, i in qualified_defs(lines, path, breaks)]


def _ast_defs(node: ast.AST, prefix: str) -> list[tuple[str, int, str]]:
    if not isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
        return []
    doc = clip((ast.get_docstring(node) or "").strip().split("\n")[0], 100)
    out = [(prefix + node.name, node.lineno, doc)]
    if isinstance(node, ast.ClassDef):
        for child in node.body:
            out += _ast_defs(child, f"{node.name}.")
    return out


def clip(text: str, limit: int) -> str:
    """`text` in at most `limit` characters, cut at a word boundary with `…` marking the cut."""
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    if space >= limit // 2:
        cut = cut[:space]
    return cut.rstrip(" ,;:.") + "…"


def describe(lines: Sequence[str], path: str = "") -> tuple[str, list[str]]:
    """The first prose line of a file and the names it defines.

    Prose is a docstring, a comment or a heading; in text files (`.md`, `.txt`, ...) any
    line counts. YAML front matter and shebang/encoding lines are skipped. Code before the
    first prose line means the file has no description (an empty string).
    """
    first = ""
    if PurePosixPath(path).suffix.lower() in _DRAWN_SUFFIXES:
        return "", []  # markup that draws: its first text is a style or a path
    if lines and lines[0].strip() == "---":  # YAML front matter
        end = next((i for i, ln in enumerate(lines[1:], 1) if ln.strip() == "---"), 0)
        lines = lines[end + 1 :]
    suffix = PurePosixPath(path).suffix.lower()
    shebang = bool(lines) and lines[0].startswith("#!")  # a script, whatever its name
    # text for people or data: any line may say what it is; anything else (code, also in a
    # language not listed: `builtin.jq`, `parser.y`) only says so in a comment
    prose = suffix in _READ_AS_TEXT and not shebang
    text_file = prose  # markdown, HTML, plain text: badges and tags are not a description
    license = False  # inside a licence header (to its first blank line)
    aside = 0  # inside a link or small print spanning lines (a banner's sponsors)
    readme = PurePosixPath(path).name.lower().startswith("readme")
    title = ""  # a README's title is the project's name: what follows says what it is
    for i, raw in enumerate(lines):
        s = raw.strip()
        if not s:
            license = False
            aside = 0  # a blank line ends an HTML block, closed or not
            continue
        if text_file:
            s = _ASIDE_SPAN_RE.sub("", s)
            opened = len(_ASIDE_OPEN_RE.findall(s)) - len(_ASIDE_CLOSE_RE.findall(s))
            was, aside = aside, max(0, aside + opened)
            if was or aside:  # its text is a link's or small print, not the file's
                continue
            s = re.sub(r"^(>\s*)+", "", s)  # a tagline quoted as `> ...`
            s = _EMPHASIS_RE.sub(r"\2", s)  # `**Requests** is ...`
            if s.startswith((".. ", "% ")):  # a reStructuredText directive, a pandoc title
                continue
        if s.startswith(("#!", "# -*-", "#-*-", "{{", "{%")) or "coding:" in s[:30]:
            continue
        if not prose and not _PROSE_RE.match(s):
            break
        if license or (not text_file and _LICENSE_RE.search(s)):
            license = True
            continue
        s = _MARKER_RE.sub("", s).strip()
        s = _CLOSING_QUOTES_RE.split(s, maxsplit=1)[0].rstrip("\"'").strip()  # text after `"""x"""`
        s = re.sub(r"\s*(-?#\}|\*/|-->)$", "", s)  # comment closers
        if not text_file and _DIRECTIVE_RE.match(s):
            continue
        if text_file:
            s = _visible(s)
        if s.lower() in _GENERIC_HEADINGS:  # a man page's "NAME", a "Table of Contents"
            continue
        if len(s) >= 3 and _is_words(s):
            heading = raw.lstrip().startswith("#") or _underlined(lines, i)
            if readme and not title and heading and len(s.split()) <= 3:
                title = s
                continue
            if title and heading:  # straight into its sections: the title alone
                break
            if text_file:
                s = _sentence(s, lines[i + 1 :])
            if title and not s.lower().startswith(title.lower()):
                s = f"{title}: {s}"
            first = clip(s, 160)
            break
        if len(s) >= 3:  # an ASCII-art banner or a rule: not a description
            continue
        prose = prose or raw.strip() in ('"""', "'''", 'r"""')  # docstring text follows
    # prose ("object storage is...") defines nothing, even where it reads like code
    return first or title, list(dict.fromkeys(n for n, _ in code_defs(lines, path)))


def _sentence(start: str, following: Sequence[str]) -> str:
    """The first sentence of the paragraph `start` opens, its wrapped lines joined
    ("Sinatra is a DSL for" / "quickly creating web applications in Ruby with minimal
    effort:" is one sentence), at most about 160 characters."""
    text = start
    for raw in following:
        line = raw.strip()
        if _SENTENCE_END.search(text) or len(text) >= 160:
            break
        if not line or line.startswith(("#", "- ", "* ", "|", "```", "<", ">", "=")):
            break
        text = f"{text} {_visible(line)}"
    end = _SENTENCE_END.search(text)
    return text[: end.start() + 1] if end else text


def _underlined(lines: Sequence[str], i: int) -> bool:
    """Is line `i` a reStructuredText or setext title (the next line a rule of = - ~)?"""
    following = lines[i + 1].strip() if i + 1 < len(lines) else ""
    return len(following) >= 3 and set(following) <= set("=-~^")


def is_prose(path: str) -> bool:
    """A text for people (`.md`, `.rst`, `.txt`, `.html`): its code-like lines define nothing."""
    return PurePosixPath(path).suffix.lower() in _PROSE_SUFFIXES


#: Build scripts and configuration: `def check = tasks.create('check')` defines no function.
_CONFIG_SUFFIXES = frozenset(
    ".gradle .cmake .mk .toml .cfg .ini .json .yaml .yml .xml .properties .lock .in".split()
)
_PY_DEF_RE = re.compile(r"^\s*(?:async\s+)?(?:def|class)\s+([A-Za-z_]\w*)")


def code_defs(lines: Sequence[str], path: str) -> list[tuple[str, int]]:
    """`(name, line)` of the definitions in a file's lines read; none in prose. Python's
    are its `def`s and `class`es only (a docstring's "object to send" defines nothing)."""
    if is_prose(path) or PurePosixPath(path).suffix.lower() in _CONFIG_SUFFIXES:
        return []
    if PurePosixPath(path).suffix in (".py", ".pyi"):
        return [(m.group(1), i) for i, ln in enumerate(lines, 1) if (m := _PY_DEF_RE.match(ln))]
    return defs_with_lines(lines)


#: A Python line that starts a top-level statement a read may be cut back to.
_TOP_LEVEL_RE = re.compile(r"(?:@|class\s|def\s|async\s+def\s)")
_PARSE_TRIES = 4
_PY_CLASS_RE = re.compile(r"class\s")
#: A Rust `impl` block's type: `impl Error {`, `impl<'de> Deserialize<'de> for Number {`.
_RUST_IMPL_RE = re.compile(
    r"impl\b(?:\s*<[^{]*?>)?\s+(?:(?:dyn\s+)?[\w:]+(?:<[^{]*?>)?\s+for\s+)?&?(?:[\w]+::)*([A-Za-z_]\w*)"
)
_RUST_ASSOCIATED_RE = re.compile(r"\s+type\s")
#: Languages whose methods sit indented inside a class-like block.
_CLASS_SUFFIXES = frozenset(
    ".java .kt .kts .cs .swift .scala .ts .tsx .js .jsx .mjs .cjs .php .dart".split()
)
#: A class-like block's first line (`public final class Paths {`, `export class Client {`,
#: `data class User(`, `object Registry {`, `interface Hook {`, `enum State {`).
_CLASS_LIKE_RE = re.compile(
    r"(?:(?:export|default|public|private|protected|internal|abstract|final|sealed|open"
    r"|data|static|partial|inner|enum)\s+)*(?:class|interface|enum|record|struct|object"
    r"|trait|protocol|extension)\s"
)
_GO_RECEIVER_RE = re.compile(r"\s*func\s*\(\s*(?:\w+\s+)?\*?\s*([A-Za-z_]\w*)")


def qualified_defs(
    lines: Sequence[str], path: str, breaks: Collection[int] = ()
) -> list[tuple[str, int]]:
    """`code_defs`, a method named after its type: in Python the classes it is indented
    under (`Route.__init__`, as `outline` names it), so that a read cut short, which `ast`
    cannot parse, still tells one `__init__` from another (a function inside a function
    keeps its own name), and likewise in the languages of `_CLASS_SUFFIXES` (`Paths.join`,
    `Client.create`); in Go its receiver's type (`LevelHooks.Fire`), in Rust its `impl`
    block's (`Number.as_f64`); in JavaScript the property it is given to (`app.route`).
    `breaks` are the lines where a later read starts: what was open above them is not
    known to hold them."""
    defs = code_defs(lines, path)
    suffix = PurePosixPath(path).suffix
    if suffix == ".go":  # a method is named after its receiver's type: `LevelHooks.Fire`
        return [
            (f"{m.group(1)}.{n}" if (m := _GO_RECEIVER_RE.match(lines[i - 1])) else n, i)
            for n, i in defs
        ]
    if suffix == ".rs":  # a method is named after the type of its `impl` block
        return _rust_qualified(lines, defs)
    if suffix in (".py", ".pyi"):
        is_class = _PY_CLASS_RE.match
    elif suffix in _CLASS_SUFFIXES:  # Java, Kotlin, C#, Swift, TypeScript...: by indentation
        is_class = _CLASS_LIKE_RE.match
    else:
        return defs
    # `app.route = function route(path) {` is named by its property: `app.route`
    names = {i: (property_target(lines[i - 1]) or n, n) for n, i in defs}
    out = []
    scopes: list[tuple[int, str]] = []  # (indentation, class name or "" for a function)
    for i, line in enumerate(lines, 1):
        if i in breaks:
            scopes.clear()
        text = line.lstrip()
        if not text or not (text[0].isalpha() or text[0] in "_@#$"):
            continue  # blank, a comment, a string, a bracket closing a signature or block
        indent = len(line) - len(text)
        while scopes and scopes[-1][0] >= indent:
            scopes.pop()
        if (named := names.get(i)) is not None:
            shown, name = named
            classes = [n for _, n in scopes]
            qualify = all(classes) and shown == name
            out.append((".".join([*classes, name]) if qualify else shown, i))
            scopes.append((indent, name if is_class(text) else ""))
    return out


def _rust_qualified(lines: Sequence[str], defs: list[tuple[str, int]]) -> list[tuple[str, int]]:
    """Rust's `fn`s indented inside an `impl` block named after its type (`Number.as_f64`);
    the block ends at the next line starting in its first column."""
    owner_at: dict[int, str] = {}
    owner = ""
    for i, line in enumerate(lines, 1):
        if line[:1].strip():  # a line in the first column opens or closes a block
            m = _RUST_IMPL_RE.match(line)
            owner = m.group(1) if m else ""
        elif owner:
            owner_at[i] = owner
    return [
        (f"{owner_at[i]}.{n}" if i in owner_at and n != owner_at[i] else n, i)
        for n, i in defs
        # an impl's associated type (`type Error = Error;`) names what a trait asks for
        if not (i in owner_at and _RUST_ASSOCIATED_RE.match(lines[i - 1]))
    ]
