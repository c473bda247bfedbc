"""The structure ARCHITECTURE.md describes holds in the code: no import cycles, no import of
a `_x` module from outside its folder, imports between orchestrator's wings and between
memory's wings run one way, top-level module counts, module sizes, no mixins cutting the
facade, and the modules a package's docstring names exist.

Imports are read from the source (module level and inside functions; those under
`if TYPE_CHECKING:` and a package face importing its own children do not count).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("orchestrator", "memory")

#: The layers of ARCHITECTURE.md, lowest first: a module imports only its own or lower ones.
LAYERS = {
    "orchestrator.types": 0, "orchestrator.errors": 0, "orchestrator.faults": 0,
    "orchestrator.state": 1, "orchestrator.events": 1, "orchestrator.artifacts": 2,
    "orchestrator.approvals": 3, "orchestrator.config": 4, "orchestrator.tools": 5,
    "orchestrator.offline": 6, "orchestrator.agents": 7, "orchestrator.graph": 8,
    "orchestrator.recovery": 9, "orchestrator.result": 10, "orchestrator.api": 11,
    "orchestrator.server": 12, "orchestrator.mcp_tools": 11, "orchestrator.cli": 13,
    "orchestrator": 14,
}  # fmt: skip

#: memory's layers (ARCHITECTURE.md, "The wings of `memory/`"), lowest first.
MEMORY_LAYERS = {
    "memory.errors": 0, "memory.clock": 0, "memory.resources": 0, "memory.cachedir": 0,
    "memory.text": 1, "memory.paths": 1, "memory.durable": 1, "memory.templating": 1,
    "memory.contract": 2, "memory.search": 3, "memory.backends": 4,
    "memory.store": 5, "memory.task": 5, "memory.facts": 5,
    "memory.window": 6, "memory.mcp": 6, "memory.cli": 7, "memory": 8,
}  # fmt: skip


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            if "_shipped" in path.parts:
                continue
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            found[name.removesuffix(".__init__")] = path
    return found


MODULES = _modules()


def _resolve(name: str) -> str | None:
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        if ".".join(parts[:i]) in MODULES:
            return ".".join(parts[:i])
    return None


def _type_checking(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            return True
    return False


def _imports(module: str) -> set[str]:
    tree = ast.parse(MODULES[module].read_text())
    parents = {c: n for n in ast.walk(tree) for c in ast.iter_child_nodes(n)}
    package = module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, *([node.module] if node.module else [])])
            names = [base, *(f"{base}.{a.name}" for a in node.names)]
        else:
            continue
        if _type_checking(node, parents):
            continue
        for name in names:
            target = _resolve(name) if name.split(".")[0] in PACKAGES else None
            if target and target != module:
                out.add(target)
    return out


GRAPH = {m: _imports(m) for m in MODULES}


def _own_child(face: str, target: str) -> bool:
    return MODULES[face].name == "__init__.py" and target.startswith(face + ".")


def test_no_import_cycles():
    edges = {m: {t for t in ts if not _own_child(m, t)} for m, ts in GRAPH.items()}
    cycles, state = [], {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = "open"
        for target in sorted(edges[node]):
            if state.get(target) == "open":
                cycles.append([*path[path.index(target) :], target])
            elif target not in state:
                visit(target, [*path, target])
        state[node] = "done"

    for module in sorted(edges):
        if module not in state:
            visit(module, [module])
    assert cycles == []


def test_no_private_module_is_imported_from_outside_its_folder():
    reaches = [
        (m, t)
        for m, ts in GRAPH.items()
        for t in ts
        if t.rpartition(".")[2].startswith("_")
        and MODULES[t].name != "__init__.py"
        and MODULES[t].parent != MODULES[m].parent
    ]
    assert reaches == []


def test_tests_import_no_private_module():
    bad = []
    for path in (ROOT / "tests").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            for name in names:
                if name.split(".")[0] in PACKAGES and any(
                    p.startswith("_") and not p.startswith("__") for p in name.split(".")
                ):
                    bad.append(f"{path.relative_to(ROOT)}: {name}")
    assert bad == []


def _layer(module: str, layers: dict[str, int] = LAYERS) -> int | None:
    parts = module.split(".")
    for i in range(len(parts), 0, -1):
        if ".".join(parts[:i]) in layers:
            return layers[".".join(parts[:i])]
    return None


def test_imports_between_orchestrator_wings_run_one_way():
    upward = [
        (m, t)
        for m, ts in GRAPH.items()
        if m.startswith("orchestrator")
        for t in ts
        if t.startswith("orchestrator") and (_layer(t) or 0) > (_layer(m) or 0)
    ]
    assert upward == []


def test_imports_between_memory_wings_run_one_way():
    upward = [
        (m, t)
        for m, ts in GRAPH.items()
        if m.startswith("memory")
        for t in ts
        if t.startswith("memory")
        and not _own_child(m, t)
        and (_layer(t, MEMORY_LAYERS) or 0) > (_layer(m, MEMORY_LAYERS) or 0)
    ]
    assert upward == []


def test_memory_never_imports_orchestrator():
    assert [(m, t) for m, ts in GRAPH.items() if m.startswith("memory") for t in ts
            if t.startswith("orchestrator")] == []  # fmt: skip


def test_top_levels_stay_small_and_modules_under_800_lines():
    assert len(list((ROOT / "orchestrator").glob("*.py"))) <= 12
    assert len(list((ROOT / "memory").glob("*.py"))) <= 10
    big = {m: n for m, p in MODULES.items() if (n := len(p.read_text().splitlines())) > 800}
    assert big == {}


def test_no_mixin_cuts_a_class_of_the_orchestrator():
    mixins = [
        f"{m}.{node.name}"
        for m, p in MODULES.items()
        if m.startswith("orchestrator")
        for node in ast.walk(ast.parse(p.read_text()))
        if isinstance(node, ast.ClassDef) and node.name.endswith("Mixin")
    ]
    assert mixins == []


#: The packages whose docstrings are checked by the next test (orchestrator's join once
#: its stale names are gone: `orchestrator/graph/nodes/__init__.py` names `_runtime`,
#: `_core`, `_lead` and `_snapshot`).
DOCSTRING_CHECKED = ("memory",)


def _named_modules(docstring: str) -> list[str]:
    """What a package docstring names as its modules: backticked `x.py` or `a/b.py`, the
    backticked name opening a bullet (`* `name`: ...`), names in a `(+ `a`, `b`)` aside, and
    any backticked `_private` name (a private module, maybe with an attribute after it)."""
    names = [f"{n}.py" for n in re.findall(r"`([\w/]+)\.py`", docstring)]
    names += [f"{n}.py" for n in re.findall(r"^\s*[*-] `(\w+)`", docstring, re.M)]
    for aside in re.findall(r"\(\+ ([^)]*)\)", docstring):
        names += [f"{n}.py" for n in re.findall(r"`(\w+)`", aside)]
    names += [f"{n}.py" for n in re.findall(r"`(_[a-z]\w*)[.`]", docstring)]
    return names


def _exists(folder: Path, name: str) -> bool:
    bases = [ROOT, folder] if "/" in name else [folder]
    stem = name.removesuffix(".py")
    return any((b / name).exists() or (b / stem / "__init__.py").exists() for b in bases)


def test_modules_a_package_docstring_names_exist():
    missing = [
        f"{init.relative_to(ROOT)}: {name}"
        for package in DOCSTRING_CHECKED
        for init in sorted((ROOT / package).rglob("__init__.py"))
        if "_shipped" not in init.parts
        for name in _named_modules(ast.get_docstring(ast.parse(init.read_text())) or "")
        if not _exists(init.parent, name)
    ]
    assert missing == []


def _wing_named(doc: str) -> set[str]:
    """The module names a wing's docstring gives in backticks: `name.py`, `name/`, a list's
    heading (`name`: ...), a private `_name` (or `_name.Thing`), a dotted
    `orchestrator.x.y`."""
    heads = set(re.findall(r"`([a-z_][a-z0-9_]*)`:", doc))
    named = {t for t in re.findall(r"`([^`\s]+)`", doc) if re.fullmatch(r"[\w./]+", t)}
    files = {t for t in named if t.endswith((".py", "/")) and "/" not in t.rstrip("/")}
    private = {t.split(".")[0] for t in named if re.fullmatch(r"_[a-z]\w*(\.\w+)*", t)}
    dotted = {t for t in named if t.startswith("orchestrator.")}
    return heads | files | private | dotted


def _wing_exists(folder: Path, name: str) -> bool:
    if name.startswith("orchestrator."):  # a module, then attributes of it
        parts = name.split(".")
        for i in range(len(parts), 0, -1):
            module = ".".join(parts[:i])
            if module in MODULES:
                rest = parts[i:]
                face = MODULES[module].name == "__init__.py"
                # after a package, a lowercase name is a module unless its face defines it
                return not (face and rest and rest[0].islower()) or (
                    re.search(rf"\b{rest[0]}\b", MODULES[module].read_text()) is not None
                )
        return False
    bare = name.rstrip("/").removesuffix(".py")
    return (folder / f"{bare}.py").is_file() or (folder / bare / "__init__.py").is_file()


def test_orchestrator_wing_docstrings_name_existing_modules():
    """What a wing's `__init__.py` docstring names is there: a module moved or deleted
    takes its name out of the wing's description."""
    missing = []
    for init in sorted((ROOT / "orchestrator").rglob("__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        missing += [
            f"{init.relative_to(ROOT)}: {name}"
            for name in sorted(_wing_named(doc))
            if not _wing_exists(init.parent, name)
        ]
    assert missing == []


REGISTRY_PREFIXES = (
    "findings:", "approval:", "remote:", "transcript:", "merged:", "answer:", "toolcall:",
)  # fmt: skip


def test_registry_keys_are_spelled_only_by_the_registry():
    """A registry key's prefix is a literal of `orchestrator/artifacts/registry.py` alone
    (`Keys`): every other module builds and reads keys through it."""
    owner = ROOT / "orchestrator" / "artifacts" / "registry.py"
    found = []
    for path in sorted((ROOT / "orchestrator").rglob("*.py")):
        if path == owner:
            continue
        tree = ast.parse(path.read_text())
        docs = {id(d) for d in _docstrings(tree)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                if node.value.startswith(REGISTRY_PREFIXES) and id(node) not in docs:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value!r}")
    assert found == []


def _docstrings(tree: ast.AST) -> list[ast.AST]:
    """The docstring nodes of a module and of its classes and functions."""
    kinds = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    return [
        node.body[0].value
        for node in ast.walk(tree)
        if isinstance(node, kinds)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    ]


def test_the_registry_key_test_sees_a_key_literal(tmp_path):
    """The check above finds a key spelled by hand (`f"findings:{key}"`, `"remote:"`)."""
    source = 'KEY = "remote:"\ndef f(key):\n    return f"findings:{key}"\n'
    values = [
        n.value
        for n in ast.walk(ast.parse(source))
        if isinstance(n, ast.Constant) and isinstance(n.value, str)
    ]
    assert [v for v in values if v.startswith(REGISTRY_PREFIXES)] == ["remote:", "findings:"]
