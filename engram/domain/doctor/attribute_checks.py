"""The doctor's check of git attributes: a store .gitattributes without Engram's lines for event
files, and every attribute in effect that would change an event file's bytes, with its fix.

A `.gitattributes` one push can change (the repository's own, at its top) can ask git to
re-encode event files, expand `$Id$` in them, run a filter or convert their line endings; a
clone then reads other bytes than were committed, sees damaged lines, and cannot commit. The
store's own file pins each of these (`engram.storage.attributes`); the doctor names any that is
still in effect (`engram.git.attributes` asks git), and `--fix` writes the pins back and checks
out again the files git converted and nobody changed since. Nothing is removed: a file that
changed since its checkout is left as it is and named.
"""

from __future__ import annotations

import shlex
import subprocess

from ...base.errors import EngramError
from ...base.layout import GITATTRIBUTES_FILE, GITATTRIBUTES_LINES
from ...git import attributes as attrs
from ...storage import attributes
from ...storage.store import Store
from .report import Finding, Host, flag

WHAT = {
    "working-tree-encoding": "re-encodes it",
    "ident": "rewrites the $Id$ in it",
    "filter": "runs a filter on it",
    "eol": "converts its line endings",
    "core": "converts its line endings",
    "text": "converts its line endings",
}


def _pinned(store: Store) -> bool | None:
    """Whether the store's .gitattributes holds Engram's lines (None: no such file, or a link,
    which other checks report)."""
    path = store.root / GITATTRIBUTES_FILE
    if path.is_symlink() or not path.is_file():
        return None
    return attributes.is_pinned(path.read_bytes().decode("utf-8", "replace"))


def _shown(cause: str) -> str:
    return f"`{cause}` ({WHAT.get(cause.split('=')[0].split('.')[0], 'converts it')})"


def check_attributes(engram: Host, store: Store) -> list[Finding]:
    out = []
    pinned = _pinned(store)
    lines = " and ".join(f"`{line}`" for line in GITATTRIBUTES_LINES)
    if pinned is False:
        out.append(
            Finding(
                "attributes",
                "warning",
                "the store's .gitattributes does not hold Engram's lines for event files, so a "
                "repository's .gitattributes or git's config can change their bytes",
                f"`engram doctor --fix {flag(store)}` (or `engram init`) writes {lines} back, "
                f"last; then `engram commit {flag(store)}`",
                path=GITATTRIBUTES_FILE,
                auto=True,
            )
        )
    try:
        converted = attrs.converting(store, [store.rel(p) for p in store.event_files()])
    except (OSError, subprocess.SubprocessError, EngramError) as exc:
        return [
            *out,
            Finding(
                "attributes",
                "note",
                f"git could not say which attributes apply to event files ({exc})",
                "install git, then run this again",
            ),
        ]
    if not converted:
        return out
    if pinned is False:
        fix = (
            f"`engram doctor --fix {flag(store)}` pins the store's .gitattributes and checks "
            "the file out again as it was committed"
        )
    else:
        where = (
            ", ".join(shlex.quote(str(p)) for p in attrs.sources(store))
            or "a .gitattributes on its path or git's info/attributes"
        )
        fix = (
            f"these are set over the store's .gitattributes (in {where}): remove them there "
            f"(`git check-attr -a -- <file>` shows what applies), then `engram doctor --fix "
            f"{flag(store)}` checks the file out again as it was committed"
        )
    for rel, causes in sorted(converted.items()):
        out.append(
            Finding(
                "attributes",
                "error",
                "git changes this event file's bytes on checkout and commit: "
                f"{', '.join(_shown(c) for c in causes)}; its lines are then not read as they were "
                "written, and commits of it fail or change it",
                fix,
                path=rel,
                auto=True,
            )
        )
    return out


def fix_attributes(store: Store) -> list[str]:
    """Pin the store's .gitattributes, then check out again the event files git converted and
    that are unchanged since (the caller holds the store's write lock)."""
    done = []
    try:
        before = attrs.converting(store, [store.rel(p) for p in store.event_files()])
        safe = attrs.unchanged(store) if before else set()
    except (OSError, subprocess.SubprocessError, EngramError) as exc:
        before, safe = {}, set()
        done.append(f"could not ask git which attributes apply to event files ({exc})")
    if store.pin_attributes():
        done.append(
            f"{GITATTRIBUTES_FILE}: Engram's lines for event files written back, last "
            f"({'; '.join(GITATTRIBUTES_LINES)}); `engram commit {flag(store)}` "
            "commits it"
        )
    if not before:
        return done
    try:
        after = attrs.converting(store, list(before))
        again = sorted(rel for rel in before if rel not in after and rel in safe)
        attrs.check_out_again(store, again)
    except (OSError, subprocess.SubprocessError) as exc:
        return [*done, f"could not check the converted event files out again ({exc})"]
    if again:
        causes = ", ".join(sorted({cause for rel in again for cause in before[rel]}))
        done.append(
            f"checked {len(again)} event file(s) out again as they were committed "
            f"(git had converted them: {causes})"
        )
    kept = sorted(rel for rel in before if rel not in after and rel not in safe)
    if kept:
        done.append(
            f"{len(kept)} event file(s) changed since git converted them, so they are "
            f"not checked out again: {', '.join(kept[:5])}"
            f"{' ...' if len(kept) > 5 else ''}"
        )
    return done
