"""Which name a line of code defines: Python, Go (methods and types too), Rust, Kotlin,
Swift, the C-like keywords, Java/C#-like methods after a modifier, TypeScript's types and
JavaScript's methods and named functions. The offline model's outlines, call chains and
change sites read definitions through `def_name`."""

from __future__ import annotations

import re
from collections.abc import Sequence

#: Modifiers before a definition's keyword (`pub(crate) async fn`, `export default class`,
#: `public static final class`, `data class`, `suspend fun`).
_MODIFIERS = (
    r"(?:(?:export|default|pub(?:\([^)]*\))?|public|private|protected|internal|static|final"
    r"|abstract|sealed|open|override|async|unsafe|const|extern(?:\s+\"C\")?|data|inline"
    r"|suspend|partial|readonly|virtual)\s+)*"
)
_DEF_RE = re.compile(
    rf"^\s*{_MODIFIERS}"
    r"(class|def|function|func|fn|fun|interface|struct|enum|trait|protocol|object|record)\s+"
    r"(?:\([^()]*\)\s*)?"  # a Go method's receiver: `func (c *Command) Execute(`
    r"([A-Za-z_][A-Za-z0-9_]*)"
)
#: A type given a name: Go's `type Command struct {`, TypeScript's `export type Id = string`.
_TYPE_RE = re.compile(
    r"^\s*(?:export\s+)?type\s+([A-Za-z_]\w*)\s*(?:\[[^\]]*\]\s*)?"
    r"(?:(?:struct|interface)\b|(?:<[^>]*>\s*)?=)"
)
#: A Java/C#-like method: at least one modifier, a return type, the name and `(`
#: (`public static String joinPath(`); a call or an assignment has no modifier first.
_TYPED_METHOD_RE = re.compile(
    r"^\s*(?:(?:public|private|protected|internal|static|final|abstract|synchronized|override"
    r"|virtual|async|native)\s+)+[\w<>\[\],.? ]+?\s+([A-Za-z_]\w*)\s*\("
)
#: JavaScript's other definitions: a function or arrow function given a name
#: (`const f = async (a) => {`), and a class method (`async run (args) {` ending its line).
_ASSIGNED_FN_RE = re.compile(
    r"^\s*(?:export\s+)?(?:const|let|var)\s+([A-Za-z_$][\w$]*)\s*=\s*(?:async\s+)?"
    r"(?:function\b|\([^()]*\)\s*=>|[A-Za-z_$][\w$]*\s*=>)"
)
#: A function given to a property (`app.route = function route(path) {`,
#: `Router.prototype.handle = (req) => {`, `exports.parse = function`): its dotted target.
_PROPERTY_FN_RE = re.compile(
    r"^\s*((?:[A-Za-z_$][\w$]*\.)+[A-Za-z_$][\w$]*)\s*=\s*(?:async\s+)?"
    r"(?:function\b|\([^()]*\)\s*=>|[A-Za-z_$][\w$]*\s*=>)"
)
#: TypeScript's too: modifiers, a `#private` name, type parameters, parameters holding a
#: function type (one level of parentheses) and a return type (`async #retry<T>(fn: () =>
#: T): Promise<T> {`); a call with a callback (`setTimeout(function () {`) never closes
#: its parentheses before the brace.
_METHOD_RE = re.compile(
    r"^\s*(?:(?:public|private|protected|static|async|readonly|override|abstract)\s+)*"
    r"(?:[gs]et\s+)?"
    r"(?!(?:if|for|while|switch|catch|return|function|else|with|await|new|throw)\b)"
    r"#?([A-Za-z_$][\w$]*)\s*(?:<(?:[^()]|\([^()]*\))*?>)?\s*\((?:[^()]|\([^()]*\))*\)"
    r"\s*(?::\s*[^{};=]+?)?\s*\{\s*$"
)


def def_name(line: str) -> str | None:
    """The name a line of code defines (a function, class, method...), or None."""
    if m := _DEF_RE.match(line):
        return m.group(2)
    if target := property_target(line):
        return target.rpartition(".")[2]
    m = (
        _TYPE_RE.match(line)
        or _ASSIGNED_FN_RE.match(line)
        or _METHOD_RE.match(line)
        or _TYPED_METHOD_RE.match(line)
    )
    return m.group(1) if m else None


def property_target(line: str) -> str | None:
    """The property a line gives a function to, without `prototype`, `exports` and `this`
    (`app.route`, `Router.handle`, `parse`, `_stopRetry`), or None (also for
    `module.exports = function`, which names nothing)."""
    if not (m := _PROPERTY_FN_RE.match(line)):
        return None
    drop = ("prototype", "module", "exports", "this")
    parts = [p for p in m.group(1).split(".") if p not in drop]
    return ".".join(parts) or None


def defs_with_lines(lines: Sequence[str]) -> list[tuple[str, int]]:
    """`(name, line number)` of each definition in `lines`, in order, without repeats."""
    return list(dict.fromkeys((name, i) for i, ln in enumerate(lines, 1) if (name := def_name(ln))))


#: A test case declared by a call: `test('name', ...)`, `it("name", ...)`,
#: `test.serial(`...`)` (ava, mocha, jest, vitest, node:test), `it "name" do` (RSpec,
#: minitest's spec style).
_TEST_CALL_RE = re.compile(r"""^\s*(?:test|it|specify)(?:\.\w+)*(?:\s*\(\s*|\s+)(['"`])(.+?)\1""")


def test_calls(lines: Sequence[str]) -> list[tuple[str, int]]:
    """`(name, line number)` of each test case a JavaScript-like or Ruby test file declares
    by a call (`test('async hooks', ...)`, `it "matches" do`), which defines no function of
    its own name."""
    return [(m.group(2), i) for i, ln in enumerate(lines, 1) if (m := _TEST_CALL_RE.match(ln))]
