"""Which git attributes would change an event file's bytes, as git itself says (`git
check-attr`), and checking event files out again once none does.

A file's attributes come from every `.gitattributes` on its path (the most specific wins), from
`$GIT_DIR/info/attributes` and from git's config (`core.attributesFile`); macros such as
`binary` expand into others. Asking git rather than reading the files gets all of that exactly as
a checkout or a commit applies it. What changes bytes: `working-tree-encoding` (other than
UTF-8), `ident`, a `filter` driver, and line-ending conversion (`eol=crlf`, or `text` with
`core.autocrlf=true` or `core.eol=crlf` while `eol` is not set).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from pathlib import Path

from ..base.errors import EngramError
from ..base.files import atomic_write
from ..base.layout import EVENTS_DIR
from ..storage.store import Store

ASKED = ("working-tree-encoding", "ident", "filter", "eol", "text", "crlf")
_NOT_A_VALUE = ("unspecified", "unset", "set")


def _git(store: Store, *args: str, data: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", *args],
        cwd=store.work_tree,
        input=data,
        text=True,
        encoding="utf-8",
        errors="surrogateescape",
        capture_output=True,
        check=False,
        timeout=300,
        env={**os.environ, "GIT_TERMINAL_PROMPT": "0"},
    )


def _config(store: Store, key: str) -> str:
    done = _git(store, "config", "--get", key)
    return done.stdout.strip().lower() if done.returncode == 0 else ""


def converting(store: Store, rels: Sequence[str]) -> dict[str, list[str]]:
    """The event files among `rels` (store-relative) whose bytes git would change, each with
    the attributes (or settings) that would, as `name=value`. Raises OSError or
    subprocess.SubprocessError when git cannot be asked."""
    if not rels:
        return {}
    paths = {store.repo_path(rel): rel for rel in rels}
    done = _git(
        store, "check-attr", "-z", "--stdin", *ASKED, data="".join(f"{path}\0" for path in paths)
    )
    if done.returncode != 0:
        raise OSError(done.stderr.strip() or f"git check-attr exited with {done.returncode}")
    fields = done.stdout.split("\0")
    found: dict[str, dict[str, str]] = {}
    for at in range(0, len(fields) - 2, 3):
        path, name, value = fields[at : at + 3]
        found.setdefault(path, {})[name] = value
    autocrlf = _config(store, "core.autocrlf")
    core_eol = _config(store, "core.eol")
    out: dict[str, list[str]] = {}
    for path, values in found.items():
        causes = changes_bytes(values, autocrlf=autocrlf, core_eol=core_eol)
        if causes and path in paths:
            out[paths[path]] = causes
    return out


def changes_bytes(values: dict[str, str], *, autocrlf: str = "", core_eol: str = "") -> list[str]:
    """What in `values` (an attribute's value as `git check-attr` gives it, by name) would
    change a file's bytes on checkout or commit."""
    causes = []
    encoding = values.get("working-tree-encoding", "unspecified")
    if encoding not in _NOT_A_VALUE and encoding.lower().replace("-", "") != "utf8":
        causes.append(f"working-tree-encoding={encoding}")
    if values.get("ident") == "set":
        causes.append("ident")
    if values.get("filter", "unspecified") not in _NOT_A_VALUE:
        causes.append(f"filter={values['filter']}")
    text = values.get("text", "unspecified")
    if text == "unspecified":  # the obsolete `crlf` stands in for `text` only when it is unset
        text = {"set": "set", "unset": "unset"}.get(values.get("crlf", ""), "unspecified")
    eol = values.get("eol", "unspecified")
    if text != "unset":
        if eol == "crlf":
            causes.append("eol=crlf")
        elif eol == "unspecified":
            if autocrlf == "true":
                causes.append("core.autocrlf=true")
            elif core_eol == "crlf" and text in ("set", "auto"):
                causes.append(f"text{'=auto' if text == 'auto' else ''} with core.eol=crlf")
    return causes


def unchanged(store: Store) -> set[str]:
    """The tracked event files (store-relative) that git sees as they were checked out: what a
    new checkout of them cannot lose. Raises OSError when git cannot be asked."""
    top = store.repo_path(EVENTS_DIR)
    tracked = _git(store, "ls-files", "-z", "--", top)
    changed = _git(store, "diff", "--name-only", "-z", "--", top)
    if tracked.returncode != 0 or changed.returncode != 0:
        raise OSError((tracked.stderr or changed.stderr).strip() or "git ls-files failed")
    prefix = f"{store.prefix}/" if store.prefix else ""
    modified = set(changed.stdout.split("\0"))
    return {
        path[len(prefix) :]
        for path in tracked.stdout.split("\0")
        if path and path not in modified and path.startswith(prefix)
    }


def check_out_again(store: Store, rels: Sequence[str]) -> None:
    """Write the event files `rels` (store-relative, tracked) back as git's index holds them,
    byte for byte: what a checkout under the store's pinned attributes writes. (`git
    checkout-index` would read the attributes from the index, which still holds the old
    .gitattributes.) Raises OSError when git fails."""
    if not rels:
        return
    from .repo import open_repository, read_blob

    try:
        repo = open_repository(store.work_tree)
        index = repo.index
        blobs = {rel: read_blob(repo, index[store.repo_path(rel)].id).data for rel in rels}
    except (KeyError, EngramError) as exc:
        raise OSError(f"git's index does not hold the file ({exc})") from None
    for rel, data in blobs.items():
        path = store.root / rel
        atomic_write(path, data, temp=path.with_name(f".{path.name}.checkout.{os.getpid()}.tmp"))
    # The index still holds each file's size as git wrote it converted, and git takes a
    # changed size for changed content: record the files again (the same blobs).
    done = _git(
        store,
        "update-index",
        "-z",
        "--stdin",
        data="".join(f"{store.repo_path(rel)}\0" for rel in blobs),
    )
    if done.returncode != 0:
        raise OSError(done.stderr.strip() or "git update-index failed")


def sources(store: Store) -> list[Path]:
    """The attribute files that may still set attributes for event files over the store's own
    .gitattributes: `.gitattributes` files inside the store's events/, and the repository's
    `info/attributes`."""
    found = sorted(
        Path(folder) / ".gitattributes"
        for folder, _, names in os.walk(store.root / EVENTS_DIR)
        if ".gitattributes" in names
    )
    done = _git(store, "rev-parse", "--git-path", "info/attributes")
    if done.returncode == 0 and done.stdout.strip():
        info = Path(done.stdout.strip())
        info = info if info.is_absolute() else store.work_tree / info
        if info.is_file():
            found.append(info)
    return found
