"""Generate the layer table and the module table of docs/architecture.md from the code.

    .venv/bin/python scripts/gen_arch_docs.py           # rewrite the generated parts
    .venv/bin/python scripts/gen_arch_docs.py --check   # exit 1 if they are stale (tests run this)

The layers come from scripts/architecture.py, where the import rules that
tests/test_architecture.py checks are declared; the module table lists every module of `engram/`
with the first sentence of its docstring. Each generated part sits between `<!-- NAME -->` and
`<!-- /NAME -->` markers; the rest of the page is written by hand and left as it is.
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys

import architecture as arch

TARGET = arch.ROOT / "docs" / "architecture.md"


def cell(text: str) -> str:
    return text.replace("|", "\\|")


def layers_table() -> str:
    rows = ["| layer | where | what belongs there |", "|---|---|---|"]
    for layer in arch.LAYERS:
        where = [f"`{folder_or_file(p)}`" for p in layer.packages]
        where += [f"`{file_of(m)}`" for m in layer.modules]
        rows.append(f"| {layer.name} | {', '.join(where)} | {cell(layer.role)} |")
    order = " > ".join(f"{layer.name}" for layer in arch.LAYERS)
    return "\n".join(rows) + f"\n\nTop to bottom: {order}.\n"


def folder_or_file(module: str) -> str:
    """`engram/search/` for a package, `engram/api.py` for a module."""
    path = arch.modules().get(module)
    if path is None:
        return module.replace(".", "/") + "/"
    return arch.display_path(module, path)


def file_of(module: str) -> str:
    """A module's file, `engram/__init__.py` for the package itself."""
    path = arch.modules().get(module)
    if path is None:
        return module.replace(".", "/") + ".py"
    return path.relative_to(arch.ROOT).as_posix()


def modules_table() -> str:
    mods = arch.modules()
    rows = ["| module | layer | what it is for |", "|---|---|---|"]
    entries = []
    for module, path in mods.items():
        layer = arch.layer_of(module)
        text = arch.docstring(path)
        entries.append(
            (
                arch.rank(layer) if layer else len(arch.LAYERS),
                arch.display_path(module, path),
                layer.name if layer else "(none)",
                arch.first_sentence(text) if text else "(no docstring)",
            )
        )
    for _, where, layer_name, sentence in sorted(entries):
        rows.append(f"| `{where}` | {layer_name} | {cell(sentence)} |")
    return "\n".join(rows) + "\n"


PARTS = {"layers": layers_table, "modules": modules_table}


def render(page: str) -> str:
    for name, make in PARTS.items():
        pattern = re.compile(rf"(<!-- {name}: [^>]*-->\n)(.*?)(<!-- /{name} -->)", re.DOTALL)
        if not pattern.search(page):
            raise SystemExit(
                f"{TARGET.relative_to(arch.ROOT)} has no `<!-- {name}: ... -->` "
                f"... `<!-- /{name} -->` markers"
            )
        body = make()
        page = pattern.sub(lambda m, body=body: m.group(1) + body + m.group(3), page)
    return page


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--check", action="store_true", help="exit 1 if docs/architecture.md is stale"
    )
    args = parser.parse_args()
    old = TARGET.read_text(encoding="utf-8")
    new = render(old)
    if args.check:
        if new != old:
            name = TARGET.relative_to(arch.ROOT).as_posix()
            diff = difflib.unified_diff(
                old.splitlines(), new.splitlines(), name, "generated", lineterm="", n=0
            )
            print(f"{name} is stale; run `python scripts/gen_arch_docs.py`:", file=sys.stderr)
            print("\n".join(list(diff)[:60]), file=sys.stderr)
            return 1
        return 0
    if new != old:
        TARGET.write_text(new, encoding="utf-8")
        print(f"wrote {TARGET.relative_to(arch.ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
