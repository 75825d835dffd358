"""The package keeps its architecture: layers that import only downwards, no import cycle, modules
of a readable size, no private name reached across modules, and an API whose results are declared
types. The rules themselves are declared once, in scripts/architecture.py (which also writes them
into docs/architecture.md); each test names every offending module and line."""

from __future__ import annotations

import ast
import inspect
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))

import architecture as arch

MODULES = arch.modules()
IMPORTS = arch.imports(MODULES)


def fail_with(headline: str, problems: list[str]) -> None:
    if problems:
        pytest.fail(f"{headline} ({len(problems)}):\n  " + "\n  ".join(problems), pytrace=False)


def relative(module: str) -> str:
    return MODULES[module].relative_to(arch.ROOT).as_posix()


def test_every_module_is_in_a_layer() -> None:
    fail_with(
        "modules in no layer of scripts/architecture.py LAYERS",
        [relative(m) for m in MODULES if arch.layer_of(m) is None],
    )


def test_no_import_cycle() -> None:
    problems = []
    for component in arch.cycles(IMPORTS):
        members = set(component)
        edges = sorted(
            {
                f"{edge.where(MODULES)}: {edge.importer} imports {edge.imported}"
                for edge in IMPORTS
                if edge.importer in members and edge.imported in members
            },
            key=arch.by_location,
        )
        problems.append(f"among {', '.join(component)}:\n      " + "\n      ".join(edges))
    fail_with(
        "import cycles (imports inside functions count; `if TYPE_CHECKING:` ones do not)", problems
    )


def test_each_layer_imports_only_from_itself_and_the_layers_below() -> None:
    problems = set()
    for edge in IMPORTS:
        importer, imported = arch.layer_of(edge.importer), arch.layer_of(edge.imported)
        if importer and imported and arch.rank(imported) < arch.rank(importer):
            problems.add(
                f"{edge.where(MODULES)}: {edge.importer} ({importer.name}) imports "
                f"{edge.imported} ({imported.name}), a layer above it"
            )
    order = " > ".join(layer.name for layer in arch.LAYERS)
    fail_with(
        f"imports upwards (layers, top to bottom: {order})", sorted(problems, key=arch.by_location)
    )


def test_no_module_is_over_the_size_bound() -> None:
    sizes = {m: len(p.read_text(encoding="utf-8").splitlines()) for m, p in MODULES.items()}
    fail_with(
        f"modules over {arch.MAX_LINES} lines",
        [
            f"{relative(m)}: {n} lines"
            for m, n in sorted(sizes.items(), key=lambda i: -i[1])
            if n > arch.MAX_LINES
        ],
    )


def test_no_private_name_is_used_across_modules() -> None:
    fail_with(
        "private names used outside the module that defines them (make them public, or "
        "move the code that needs them)",
        arch.private_uses(MODULES),
    )


def test_every_module_says_what_it_is_for() -> None:
    """docs/architecture.md's module table is built from each docstring's first sentence."""
    fail_with(
        "modules without a docstring",
        [relative(m) for m, p in MODULES.items() if not arch.docstring(p)],
    )


UNDECLARED = {"Any", "dict", "Dict", "Mapping", "MutableMapping"}


def public_methods(cls: type) -> dict[str, object]:
    """Public methods and properties of `cls`, its mixins' included, by name."""
    found = {}
    for name in sorted(dir(cls)):
        if name.startswith("_"):
            continue
        value = inspect.getattr_static(cls, name)
        if isinstance(value, property):
            value = value.fget
        elif isinstance(value, (staticmethod, classmethod)):
            value = value.__func__
        if inspect.isfunction(value):
            found[name] = value
    return found


def source_path(function: object) -> str:
    path = Path(inspect.getsourcefile(function)).resolve()  # type: ignore[arg-type]
    return path.relative_to(arch.ROOT).as_posix() if path.is_relative_to(arch.ROOT) else str(path)


def test_the_public_api_returns_declared_types() -> None:
    """Every public method of `engram.api.Engram` declares its result, and no result is a bare
    `dict`, a list of them or `Any`: callers get named types whose fields are checked."""
    from engram.api import Engram

    problems = []
    for name, method in public_methods(Engram).items():
        where = f"{source_path(method)}:{inspect.getsourcelines(method)[1]}"  # type: ignore[arg-type]
        annotation = inspect.get_annotations(method).get("return")  # type: ignore[arg-type]
        if annotation is None:
            problems.append(f"{where}: Engram.{name} has no return annotation")
            continue
        text = annotation if isinstance(annotation, str) else inspect.formatannotation(annotation)
        names = {
            node.id if isinstance(node, ast.Name) else node.attr
            for node in ast.walk(ast.parse(text, mode="eval"))
            if isinstance(node, (ast.Name, ast.Attribute))
        }
        if names & UNDECLARED:
            problems.append(f"{where}: Engram.{name} -> {text}")
    fail_with(
        "public methods of Engram whose result is not a declared type (no "
        + ", ".join(sorted(UNDECLARED))
        + ")",
        problems,
    )
