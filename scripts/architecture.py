"""The architecture rules of the `engram` package, declared once: its layers from top to bottom,
who may import whom, the size bound on a module, and what counts as a private name.

tests/test_architecture.py checks the code against these rules, and scripts/gen_arch_docs.py
writes the layers and the module table of docs/architecture.md from them, so the page, the tests
and the code cannot disagree. Everything here reads the source with `ast`; nothing imports Engram.
"""

from __future__ import annotations

import ast
import functools
import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "engram"

MAX_LINES = 600


@dataclass(frozen=True)
class Layer:
    name: str
    packages: tuple[str, ...]  # these modules or packages, with everything under them
    modules: tuple[str, ...]  # these modules exactly (`engram` is the package's own __init__)
    role: str  # one line: what belongs there


# Top to bottom. A module imports only from its own layer or from layers below it.
LAYERS: tuple[Layer, ...] = (
    Layer(
        "front ends",
        ("engram.cli", "engram.mcp"),
        ("engram", "engram.__main__", "engram.hooks", "engram.githooks"),
        "the `engram` command for people (click) and the MCP server for agents, with its "
        "installer into clients; the package's entry points: `from engram import Engram` "
        "(loaded lazily), `python -m engram`, and the stable `python -m` paths written into "
        "users' settings (`engram.hooks`) and git hooks (`engram.githooks`)",
    ),
    Layer(
        "api",
        ("engram.api",),
        (),
        "`engram.api.Engram`, the one object the front ends call: a thin facade that builds "
        "the workspace and the services and delegates to them, with results as declared "
        "types",
    ),
    Layer(
        "domain",
        ("engram.domain",),
        (),
        "what Engram does over the layers below: the workspace (stores, settings, actor, "
        "read model, ids, emit, commit) and the services given it: memories, continuity "
        "(tasks, checkpoints, sessions, resume), import and export, maintenance, sync; "
        "discovery, the timeline, browse, the doctor, verify, stores as of a commit, project "
        "identity",
    ),
    Layer(
        "search",
        ("engram.search",),
        (),
        "the tantivy and usearch indexes, embeddings and their cache, the recall pipeline and "
        "its ranking, near-duplicate detection",
    ),
    Layer(
        "readmodel",
        ("engram.readmodel",),
        (),
        "the SQLite projection of a store's events, kept fresh by file stat",
    ),
    Layer(
        "model",
        ("engram.model",),
        (),
        "the records folded from events (`Memory`, `Task`, `Session`) and the rules that fold "
        "and check them (and sessions' heartbeat files)",
    ),
    Layer(
        "git",
        ("engram.git",),
        (),
        "the store's repository (pygit2), sync with remotes, git hooks, compaction, events "
        "lost to git commands",
    ),
    Layer(
        "storage",
        ("engram.storage",),
        (),
        "event files: the write lock, the append path, reading files back, the event "
        "envelope, the line classifier, the ledger of lines written",
    ),
    Layer(
        "base",
        ("engram.base",),
        (),
        "errors, settings, the layout of a store's paths, the one atomic write, input "
        "validation, the vocabularies, secret scanning, showing store text as data",
    ),
)

# Private names of other libraries that are their public interface.
ALLOWED_PRIVATE = {"os": {"_exit"}, "sys": {"_getframe"}}


# ---- modules -------------------------------------------------------------------------------


def modules(package: Path = PACKAGE) -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its own name)."""
    found = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def layer_of(module: str) -> Layer | None:
    for layer in LAYERS:
        if module in layer.modules or any(
            module == p or module.startswith(p + ".") for p in layer.packages
        ):
            return layer
    return None


def rank(layer: Layer) -> int:
    return LAYERS.index(layer)


def display_path(module: str, path: Path) -> str:
    """`engram/search/` for a package, `engram/search/embed.py` for a module."""
    relative = path.relative_to(PACKAGE.parent).as_posix()
    return relative[: -len("__init__.py")] if path.name == "__init__.py" else relative


@functools.cache
def parse(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


# ---- imports -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Import:
    importer: str
    imported: str
    line: int

    def where(self, mods: dict[str, Path]) -> str:
        return f"{mods[self.importer].relative_to(ROOT).as_posix()}:{self.line}"


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def runtime_import_nodes(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement that runs, at module level or inside a function; the body of
    `if TYPE_CHECKING:` (annotations only) is left out, its `else:` is not."""
    found = []
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        stack.extend(ast.iter_child_nodes(node))
    return sorted(found, key=lambda n: n.lineno)


def _absolute(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".")
    if not is_package:
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _targets(
    module: str, is_package: bool, node: ast.Import | ast.ImportFrom, mods: dict[str, Path]
) -> list[str]:
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        source = _absolute(module, is_package, node)
        # `from pkg import sub` imports the module pkg.sub; `from mod import name` imports mod.
        names = [
            f"{source}.{a.name}" if f"{source}.{a.name}" in mods else source for a in node.names
        ]
    found = []
    for name in names:
        if name != "engram" and not name.startswith("engram."):
            continue
        while name not in mods and "." in name:
            name = name.rsplit(".", 1)[0]
        if name in mods and name != module:
            found.append(name)
    return found


def imports(mods: dict[str, Path] | None = None) -> list[Import]:
    """Every runtime import of one Engram module by another, with its line."""
    mods = modules() if mods is None else mods
    found = []
    for module, path in mods.items():
        tree = parse(path)
        for node in runtime_import_nodes(tree):
            for target in _targets(module, path.name == "__init__.py", node, mods):
                found.append(Import(module, target, node.lineno))
    return found


def cycles(edges: list[Import]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    graph: dict[str, set[str]] = defaultdict(set)
    for edge in edges:
        graph[edge.importer].add(edge.imported)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(start: str) -> None:
        # Iterative, so that a long chain cannot hit the recursion limit.
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


# ---- private names -------------------------------------------------------------------------


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def defined_names(tree: ast.AST) -> set[str]:
    """Names a module defines: functions, classes, assigned names and assigned attributes."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
    return names


def _library_aliases(tree: ast.AST) -> dict[str, str]:
    """Local name -> the module it is bound to, for `import x` and `import x as y`."""
    aliases = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    aliases[alias.asname] = alias.name
                else:
                    top = alias.name.split(".")[0]
                    aliases[top] = top
    return aliases


def private_uses(mods: dict[str, Path] | None = None) -> list[str]:
    """`path:line: what` for each private name a module takes from another: `from engram... import
    _x`, or `obj._x` where this module defines no `_x` (`self._x`, `cls._x` and dunders are fine,
    and so are the names of ALLOWED_PRIVATE on the module they belong to)."""
    mods = modules() if mods is None else mods
    found = []
    for module, path in mods.items():
        tree = parse(path)
        where = path.relative_to(ROOT).as_posix()
        own = defined_names(tree)
        aliases = _library_aliases(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                source = _absolute(module, path.name == "__init__.py", node)
                if source == "engram" or source.startswith("engram."):
                    for alias in node.names:
                        if _private(alias.name):
                            found.append(
                                f"{where}:{node.lineno}: from {source} import {alias.name}"
                            )
            elif (
                isinstance(node, ast.Attribute)
                and _private(node.attr)
                and not isinstance(node.ctx, ast.Store)
                and node.attr not in own
            ):
                owner = node.value
                if isinstance(owner, ast.Name):
                    if owner.id in ("self", "cls"):
                        continue
                    library = aliases.get(owner.id)
                    if library and node.attr in ALLOWED_PRIVATE.get(library, ()):
                        continue
                found.append(f"{where}:{node.lineno}: {ast.unparse(node)}")
    return sorted(found, key=by_location)


def by_location(entry: str) -> tuple[str, int]:
    path, line, _ = entry.split(":", 2)
    return path, int(line)


# ---- docstrings ----------------------------------------------------------------------------


def first_sentence(docstring: str) -> str:
    """The first sentence of a docstring's first paragraph, on one line."""
    paragraph = " ".join(docstring.strip().split("\n\n")[0].split())
    match = re.match(r"(.+?[.!?])(?=\s+[A-Z`(\"'])", paragraph)
    return match.group(1) if match else paragraph


def docstring(path: Path) -> str | None:
    return ast.get_docstring(parse(path))
