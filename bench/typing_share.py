"""How many functions of a package have `Any` in their signature.

    python -m bench.typing_share                 # orchestrator/, by folder
    python -m bench.typing_share memory --top 20 # another package, the 20 worst modules

What counts: every `def` and `async def` in the package's `.py` files (methods and nested
functions included; lambdas have no annotations). A function counts as *with Any* when an
annotation of its signature (a parameter's, `*args`', `**kwargs`' or the return's) names
`Any` (`Any`, `typing.Any`, `t.Any`), also inside a container (`dict[str, Any]`), or names
a type alias that does: a module-level `X = <type>`, `X: TypeAlias = <type>` or
`type X = <type>` of the package whose right side names `Any` or another such alias
(resolved by name across the package, transitively). An alias is counted by what it
expands to, not by its name: `Payload = dict[str, Any]` is Any.

Two columns: **strict** expands every alias, `JsonObject` (`orchestrator.types`: a dict
of JSON values, validated as such) included; **JSON typed** counts `JsonObject` as the JSON
type it is checked to be, every other alias as strict does. The share is functions with
Any over all functions. Annotations as strings (`"dict[str, Any]"`) are parsed too.
"""

from __future__ import annotations

import argparse
import ast
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
JSON_TYPES = frozenset({"JsonObject"})
"""Aliases validated as JSON at runtime (the 'JSON typed' column does not expand them)."""


def _names(node: ast.AST | None) -> set[str]:
    """The names a type expression uses (`Any` for `typing.Any`; strings parsed)."""
    out: set[str] = set()
    for sub in ast.walk(node) if node is not None else ():
        if isinstance(sub, ast.Name):
            out.add(sub.id)
        elif isinstance(sub, ast.Attribute):
            out.add(sub.attr if sub.attr == "Any" else "")
        elif isinstance(sub, ast.Constant) and isinstance(sub.value, str):
            try:
                out |= _names(ast.parse(sub.value, mode="eval").body)
            except SyntaxError:
                continue
    out.discard("")
    return out


def _aliases(trees: dict[Path, ast.Module]) -> dict[str, set[str]]:
    """Module-level type aliases of the package: name -> names its definition uses."""
    found: dict[str, set[str]] = {}
    for tree in trees.values():
        for node in tree.body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1:
                target, value = node.targets[0], node.value
            elif isinstance(node, ast.AnnAssign) and "TypeAlias" in ast.unparse(node.annotation):
                target, value = node.target, node.value
            elif isinstance(node, getattr(ast, "TypeAlias", ())):  # Python 3.12+
                target, value = node.name, node.value
            else:
                continue
            if isinstance(target, ast.Name) and value is not None and _is_type(value):
                found.setdefault(target.id, set()).update(_names(value))
    return found


def _is_type(value: ast.expr) -> bool:
    """Whether an assignment's right side looks like a type (a subscript such as
    `dict[str, Any]`, a union `A | B`, or the bare name `Any`)."""
    if isinstance(value, ast.Name):
        return value.id == "Any"
    if isinstance(value, ast.BinOp) and isinstance(value.op, ast.BitOr):
        return True
    return isinstance(value, ast.Subscript)


def _any_names(aliases: dict[str, set[str]], keep: frozenset[str]) -> set[str]:
    """`Any` and every alias that expands to something naming it (but those in `keep`)."""
    bad = {"Any"}
    grew = True
    while grew:
        grew = False
        for name, used in aliases.items():
            if name not in bad and name not in keep and used & bad:
                bad.add(name)
                grew = True
    return bad


def _signature(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    a = fn.args
    params = [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg]
    names: set[str] = set()
    for p in params:
        if p is not None:
            names |= _names(p.annotation)
    return names | _names(fn.returns)


def measure(package: str) -> list[tuple[str, int, int, int]]:
    """Per module: (module, functions, with Any strict, with Any JSON typed)."""
    files = sorted((ROOT / package).rglob("*.py"))
    trees = {p: ast.parse(p.read_text(), str(p)) for p in files}
    aliases = _aliases(trees)
    strict, typed = _any_names(aliases, frozenset()), _any_names(aliases, JSON_TYPES)
    rows = []
    for path, tree in trees.items():
        fns = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
        sigs = [_signature(f) for f in fns]
        rows.append(
            (
                str(path.relative_to(ROOT)),
                len(fns),
                sum(1 for s in sigs if s & strict),
                sum(1 for s in sigs if s & typed),
            )
        )
    return rows


def _pct(part: int, whole: int) -> str:
    return f"{100 * part / whole:5.1f}%" if whole else "    -"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("package", nargs="?", default="orchestrator")
    parser.add_argument("--top", type=int, default=0, help="also list the N worst modules")
    args = parser.parse_args()
    rows = measure(args.package)
    folders: Counter[str] = Counter()
    by = {"fns": Counter(), "strict": Counter(), "typed": Counter()}
    for module, n, strict, typed in rows:
        parts = Path(module).parts
        folder = "/".join(parts[:2]) if len(parts) > 2 else parts[0] + " (top level)"
        folders[folder] += n
        by["strict"][folder] += strict
        by["typed"][folder] += typed
    print(f"{'folder':32} {'functions':>9} {'strict':>15} {'JSON typed':>15}")
    for folder in sorted(folders):
        n, s, t = folders[folder], by["strict"][folder], by["typed"][folder]
        print(f"{folder:32} {n:9} {s:7} {_pct(s, n)} {t:7} {_pct(t, n)}")
    n = sum(r[1] for r in rows)
    s, t = sum(r[2] for r in rows), sum(r[3] for r in rows)
    print(f"{'total':32} {n:9} {s:7} {_pct(s, n)} {t:7} {_pct(t, n)}")
    if args.top:
        print(f"\n{'module':48} {'functions':>9} {'strict':>7}")
        for module, n, strict, _t in sorted(rows, key=lambda r: -r[2])[: args.top]:
            print(f"{module:48} {n:9} {strict:7}")


if __name__ == "__main__":
    main()
