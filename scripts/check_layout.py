"""Read the package's layout figures from its code: import cycles, private imports, sizes, ``Any``.

Usage::

    python scripts/check_layout.py            # print the figures and the offenders, exit 1 over a limit
    python scripts/check_layout.py --json     # the same as JSON

Every ``import`` and ``from ... import`` in ``numdiff/`` is read with :mod:`ast`, including the ones
inside functions (a lazy import is still a dependency); imports under ``if TYPE_CHECKING:`` are left
out (they never run). The figures:

- **cycles**: groups of modules (files) that import each other, directly or through others
  (strongly connected components of more than one file, or a file importing itself).
- **private imports**: a ``_private`` module, or a ``_private`` name of a module, imported from outside
  the package that owns it. A package's own subpackages are inside it, so ``numdiff/_core`` is shared
  by the whole package while ``numdiff/schema/_flatbuf.py`` is ``schema``'s alone.
- **long modules**: modules over ``MAX_LINES`` lines.
- **loose modules**: ``.py`` files directly in ``numdiff/`` besides ``__init__.py``.
- **plain Any**: parameters and returns annotated with bare ``Any`` (``dict[str, Any]`` is not bare).

The limits are issue 19's; the test suite runs :func:`main` and fails when one is exceeded.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "numdiff"

MAX_LINES = 500
LIMITS = {"cycles": 0, "private_imports": 0, "long_modules": 0, "loose_modules": 5, "plain_any": 120}


@dataclass(frozen=True)
class Module:
    """One ``.py`` file of the package."""

    name: str  # dotted, e.g. numdiff.schema.etdump (a package's __init__ is the package's name)
    path: Path
    is_package: bool

    @property
    def package(self) -> str:
        """The package this module belongs to (a package's __init__ belongs to the package itself)."""
        return self.name if self.is_package else self.name.rpartition(".")[0]


@dataclass
class Figures:
    cycles: list[list[str]] = field(default_factory=list)
    private_imports: list[str] = field(default_factory=list)
    long_modules: list[str] = field(default_factory=list)
    loose_modules: list[str] = field(default_factory=list)
    plain_any: list[str] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        return {key: len(getattr(self, key)) for key in LIMITS}


def discover(root: Path = ROOT) -> dict[str, Module]:
    """Every module of the package by dotted name."""
    modules: dict[str, Module] = {}
    for path in sorted((root / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts = parts[:-1]
        modules[".".join(parts)] = Module(".".join(parts), path, is_package)
    return modules


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement that can run (anywhere, functions included), TYPE_CHECKING blocks left out."""
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        stack.extend(ast.iter_child_nodes(node))


def _resolve(module: Module, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    base = module.package.split(".")
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _is_private(part: str) -> bool:
    return part.startswith("_") and not (part.startswith("__") and part.endswith("__"))


def _inside(importer: Module, owner_package: str) -> bool:
    return importer.name == owner_package or importer.name.startswith(owner_package + ".")


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    name: str | None  # the name imported from target, when it is not a module


def edges(modules: dict[str, Module]) -> list[Edge]:
    """Import edges between modules of the package (names resolved to submodules where they are ones)."""
    found: list[Edge] = []
    for module in modules.values():
        tree = ast.parse(module.path.read_text(encoding="utf-8"), str(module.path))
        for node in _imports(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] == PACKAGE and alias.name in modules:
                        found.append(Edge(module.name, alias.name, None))
                continue
            target = _resolve(module, node)
            if target.split(".")[0] != PACKAGE:
                continue
            for alias in node.names:
                submodule = f"{target}.{alias.name}"
                if submodule in modules:
                    found.append(Edge(module.name, submodule, None))
                elif target in modules:
                    found.append(Edge(module.name, target, alias.name))
    return found


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative; components of more than one node or with a self-loop."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    result: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1 or node in graph.get(node, ()):
                    result.append(sorted(component))
    return sorted(result)


def _annotation_is_any(annotation: ast.expr | None) -> bool:
    if annotation is None:
        return False
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        return annotation.value.strip() in {"Any", "typing.Any"}
    if isinstance(annotation, ast.Name):
        return annotation.id == "Any"
    return isinstance(annotation, ast.Attribute) and annotation.attr == "Any"


def plain_any(module: Module, tree: ast.AST, root: Path = ROOT) -> Iterator[str]:
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        arguments = node.args
        every = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]
        every += [a for a in (arguments.vararg, arguments.kwarg) if a is not None]
        where = f"{module.path.relative_to(root)}:{node.lineno} {node.name}"
        for argument in every:
            if _annotation_is_any(argument.annotation):
                yield f"{where}({argument.arg})"
        if _annotation_is_any(node.returns):
            yield f"{where} -> Any"


def measure(root: Path = ROOT) -> Figures:
    modules = discover(root)
    figures = Figures()
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for edge in edges(modules):
        source, target = modules[edge.source], modules[edge.target]
        if edge.source != edge.target:
            graph[edge.source].add(edge.target)
        # the module imported is private: owned by the package it sits in
        for depth, part in enumerate(target.name.split(".")):
            if depth and _is_private(part):
                owner = ".".join(target.name.split(".")[:depth])
                if not _inside(source, owner):
                    figures.private_imports.append(f"{source.name} imports module {target.name}")
                break
        else:
            if edge.name is not None and _is_private(edge.name) and not _inside(source, target.package):
                figures.private_imports.append(f"{source.name} imports {target.name}.{edge.name}")
    figures.cycles = strongly_connected(graph)
    for module in modules.values():
        text = module.path.read_text(encoding="utf-8")
        lines = text.count("\n") + (not text.endswith("\n") and bool(text))
        if lines > MAX_LINES:
            figures.long_modules.append(f"{module.path.relative_to(root)} ({lines} lines)")
        if module.path.parent == root / PACKAGE and not module.is_package:
            figures.loose_modules.append(module.path.name)
        figures.plain_any.extend(plain_any(module, ast.parse(text, str(module.path)), root))
    figures.private_imports = sorted(set(figures.private_imports))
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the figures and offenders as JSON")
    parser.add_argument("--all", action="store_true", help="list every plain-Any annotation too")
    args = parser.parse_args(argv)
    figures = measure()
    counts = figures.counts()
    over = {key: value for key, value in counts.items() if value > LIMITS[key]}
    if args.json:
        print(json.dumps({"counts": counts, "limits": LIMITS, **vars(figures)}, indent=2))
        return 1 if over else 0
    for key, value in counts.items():
        mark = "over" if key in over else "ok"
        print(f"{key:16} {value:5}  (limit {LIMITS[key]}) {mark}")
    for key in ("cycles", "private_imports", "long_modules", "loose_modules"):
        for item in getattr(figures, key):
            print(f"  {key}: {' <-> '.join(item) if isinstance(item, list) else item}")
    if args.all:
        for item in figures.plain_any:
            print(f"  plain_any: {item}")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
