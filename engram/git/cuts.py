"""Event lines a commit cut from a committed event file, noted so that they count as lost.

Engram only appends to event files and only ever removes whole files whose events it folded
into a merged file in the same commit (`engram compact`). A commit that takes event lines out
of an existing file (a hand edit, a careless conflict resolution, an old repair, a hostile
teammate) removes them from every clone it reaches, and nothing in the files says so. So every
commit on HEAD's history is looked at once: the events in the files it changed or removed that
are in none of the files it changed or added are cut, and are noted in the ledger
(`engram.storage.ledger`) with their lines. From there `status` and `doctor` count those that
are in no file of the store and no branch as lost, and `engram recover` writes them back (new
lines in new files; history is not rewritten). The commits already looked at are kept in
`<git-dir>/engram/cuts.json` (local state; a damaged one means looking again, which is safe).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import orjson

from ..base.files import atomic_write
from ..base.layout import EVENT_SUFFIX, EVENTS_DIR
from ..storage import ledger, lines

if TYPE_CHECKING:
    import pygit2

    from ..storage.store import Store

CUTS_STATE = "cuts.json"
MAX_TIPS = 32  # tips remembered as looked at (HEAD moves between branches)


def _events_of(repo: pygit2.Repository, oid: Any) -> dict[str, bytes]:
    """id -> line of every readable event in a blob."""
    out: dict[str, bytes] = {}
    try:
        data = repo[oid].read_raw()
    except (KeyError, ValueError, AttributeError):
        return out
    for line in lines.read(data)[0]:
        if line.problem is None and line.event is not None:
            out.setdefault(line.event.id, line.raw)
    return out


def _subtree(store: Store, tree: pygit2.Tree) -> pygit2.Tree | None:
    import pygit2

    try:
        found = tree[store.repo_path(EVENTS_DIR)]
    except (KeyError, ValueError):
        return None
    return found if isinstance(found, pygit2.Tree) else None


def cut_by(
    store: Store, repo: pygit2.Repository, commit: pygit2.Commit
) -> dict[str, tuple[str, bytes]]:
    """id -> (store-relative file, line) of the events `commit` cut (against its first
    parent): in a file it changed or removed, and in none it changed or added."""
    import pygit2

    if not commit.parents:
        return {}
    old = _subtree(store, commit.parents[0].tree)
    if old is None:
        return {}
    new = _subtree(store, commit.tree)
    removed: dict[str, tuple[str, bytes]] = {}
    kept: set[str] = set()
    deltas: list[tuple[pygit2.DiffFile | None, pygit2.DiffFile | None]]
    if new is None:
        diff = old.diff_to_tree(swap=False)  # everything removed
        deltas = [(d.old_file, None) for d in diff.deltas]
    else:
        diff = old.diff_to_tree(new)
        deltas = []
        for delta in diff.deltas:
            if delta.status == pygit2.GIT_DELTA_ADDED:
                deltas.append((None, delta.new_file))
            elif delta.status == pygit2.GIT_DELTA_DELETED:
                deltas.append((delta.old_file, None))
            else:
                deltas.append((delta.old_file, delta.new_file))
    for before, after in deltas:
        if after is not None and after.path.endswith(EVENT_SUFFIX):
            kept.update(_events_of(repo, after.id))
        if before is not None and before.path.endswith(EVENT_SUFFIX):
            rel = f"{EVENTS_DIR}/{before.path}"
            for event_id, raw in _events_of(repo, before.id).items():
                removed.setdefault(event_id, (rel, raw))
    return {i: found for i, found in removed.items() if i not in kept}


def note_cuts(store: Store, repo: pygit2.Repository) -> int:
    """Note in the ledger the events cut by the commits of HEAD's history not looked at yet;
    returns how many were noted."""
    import pygit2

    if repo.head_is_unborn:
        return 0
    head = repo.head.target
    path = store.local_dir / CUTS_STATE
    try:
        tips = [t for t in orjson.loads(path.read_bytes()) if isinstance(t, str)][:MAX_TIPS]
    except (OSError, orjson.JSONDecodeError, TypeError):
        tips = []
    if str(head) in tips:
        return 0
    walker = repo.walk(head, pygit2.enums.SortMode.TOPOLOGICAL)
    for tip in tips:
        try:
            walker.hide(tip)
        except (KeyError, ValueError, pygit2.GitError):
            continue
    noted = 0
    for commit in walker:
        for _event_id, (rel, raw) in sorted(cut_by(store, repo, commit).items()):
            ledger.note(store, rel, raw + b"\n")
            noted += 1
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, orjson.dumps([str(head), *tips][:MAX_TIPS]), durable=False)
    except OSError:
        pass  # looked at again next time
    return noted
