"""`engram compact`: fold a month's closed event files into one file, in one commit.

Every commit leaves its event files for good (a writer never extends a file an earlier commit
created, see `engram.storage.store`), so a busy store gathers a file per commit. Compaction folds
the closed files of a month (every committed file no writer can append to any more) into one file
and removes them, in a single commit that adds the merged file and deletes the old ones:

- Lines are kept byte for byte, ordered by (clock, id); exact duplicate lines are dropped
  (readers dedupe events by id anyway). Nothing else changes.
- A file whose lines would be half or more of the merged file (a large merged file from an
  earlier compaction, say) is left as it is: git would take its removal for a rename into the
  merged file, and two clones folding it into different files for a rename/rename conflict. So
  merged files of similar size are folded together later, and a month keeps a few files of
  growing size rather than one that is rewritten every time.
- A file with a line readers cannot read (invalid JSON, a conflict marker, a torn tail) is not
  folded: its lines would have to be dropped or carried unread, and a committed line is its
  writer's. It stays as it is (`engram doctor` explains it and sets the line aside in this
  clone); the month's other files are folded.
- Two merged files that share most of their lines (two clones compacted the same files at once,
  each adding some of its own) are folded by the next compaction: the smaller goes, its lines the
  larger holds are dropped, and the rest (less than half its bytes, so no rename for git) go to a
  new merged file. Two clones doing so at once make the same change.
- The merged file is named after its content (`compacted-<sha1>.jsonl`), which no writer uses:
  two clones that compact the same lines make the same file (git merges identical additions),
  and clones that compact different lines make different files (readers dedupe the overlap).
- Order on disk: write the merged file (fsynced), remove the old files, then commit. Killed in
  between, the store reads the same events (the merged file holds them all) and the next
  `engram compact` finishes the job.
- The commit says what it is: subject `engram compact: ...` and a `Engram-Compaction:` trailer.
  It is the one kind of commit that removes event files; the pre-commit hook accepts it because
  no event line is lost (see `engram.git.hooks.lost_lines`).

A clone that appended to a file another clone compacted away meets a modify/delete conflict on
merge; `engram sync` keeps the appended file (its lines are a superset; readers dedupe), and
`engram doctor` explains it after a plain `git merge`.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from ..base.errors import GitError
from ..base.files import atomic_write, fsync_dir
from ..storage import lines
from ..storage.local import WriterState
from ..storage.store import MAX_FILE_BYTES, Store

if TYPE_CHECKING:
    from .repo import StoreRepo

PREFIX = "compacted-"
SUBJECT = "engram compact:"
TRAILER = "Engram-Compaction"
# A compacted file at least this big is settled: later compactions leave it as it is, so that
# a month of many megabytes is not rewritten whole each time.
SETTLED_BYTES = MAX_FILE_BYTES // 2
# A file is folded only if its lines are less than this share of the file they go to: git's
# rename detection pairs a removed and an added file from 50% similarity (leave a margin for its
# approximate, chunk-hashed measure).
RENAME_SHARE = 0.4
_NAME_RE = re.compile(r"^compacted-[0-9a-f]{16}\.jsonl$")


def is_compacted(rel: str) -> bool:
    return bool(_NAME_RE.match(rel.rsplit("/", 1)[-1]))


@dataclass
class MonthPlan:
    month: str  # events/YYYY/MM
    sources: list[str]  # store-relative files folded
    outputs: list[tuple[str, bytes]]  # store-relative merged files and their bytes
    events: int = 0
    duplicates: int = 0  # exact duplicate lines dropped
    heavy: list[str] = field(default_factory=list)  # sources git could take for renamed


@dataclass
class CompactResult:
    store: str
    commit: str | None = None
    months: list[dict[str, Any]] = field(default_factory=list)
    files_before: int = 0
    files_after: int = 0
    events: int = 0
    skipped: list[str] = field(default_factory=list)  # months left alone, and why

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _month_of(rel: str) -> str:
    return rel.rsplit("/", 1)[0]


def closed_counts(store: Store, repo: StoreRepo) -> dict[str, int]:
    """Per month, how many committed event files there are (from the tree: no blob is read)."""
    tree = repo.head_tree()
    if tree is None:
        return {}
    counts: dict[str, int] = {}
    for rel in repo.committed_event_files(tree):
        counts[_month_of(rel)] = counts.get(_month_of(rel), 0) + 1
    return counts


def plan(
    store: Store, repo: StoreRepo, *, months: set[str] | None = None
) -> tuple[list[MonthPlan], list[str]]:
    """What compaction would do now: the months to fold, and the months left alone with why.

    Only committed files are folded, from their committed bytes; a file whose work-tree copy
    differs (new lines not committed yet, or a change) is still open and stays."""
    import pygit2

    tree = repo.head_tree()
    if tree is None:
        return [], []
    committed = repo.committed_event_files(tree)
    state = WriterState.load(store)
    live = state.segment if state.head == store.head_id() else None
    by_month: dict[str, list[str]] = {}
    for rel in committed:
        by_month.setdefault(_month_of(rel), []).append(rel)
    plans: list[MonthPlan] = []
    skipped: list[str] = []
    for month in sorted(by_month):
        if months is not None and month not in months:
            continue
        sources = []
        for rel in sorted(by_month[month]):
            if rel == live:
                continue  # this clone's writer may still append to it
            blob = repo.blob(committed[rel])
            if is_compacted(rel) and blob.size >= SETTLED_BYTES:
                continue
            path = store.root / rel
            if path.is_symlink() or (
                path.exists()
                and (path.stat().st_size != blob.size or pygit2.hash(path.read_bytes()) != blob.id)
            ):
                continue  # not as committed: still open
            why = _unreadable(blob.data)
            if why is not None:
                skipped.append(
                    f"{month}: {rel} not compacted: {why}; it is left as it is "
                    "(`engram doctor` says what it holds), the month's other files "
                    "are folded"
                )
                continue
            sources.append(rel)
        while sources:
            if len(sources) < 2 and all((store.root / rel).exists() for rel in sources):
                break  # nothing to gain (a file removed by an interrupted run still counts)
            found = _fold(store, repo, month, sources, committed)
            if isinstance(found, str):
                skipped.append(found)
                break
            if not found.heavy:
                plans.append(found)
                break
            sources = [rel for rel in sources if rel not in found.heavy]
        taken = {rel for p in plans if p.month == month for rel in p.sources}
        merged = [
            rel
            for rel in sorted(by_month[month])
            if is_compacted(rel)
            and rel not in taken
            and rel != live
            and (store.root / rel).exists()
        ]
        overlap = _overlap(month, merged, {rel: repo.blob(committed[rel]).data for rel in merged})
        if overlap is not None:
            plans.append(overlap)
    return plans, skipped


def _overlap(month: str, merged: list[str], data: dict[str, bytes]) -> MonthPlan | None:
    """Two merged files that share most of their lines (two clones compacted the same files at
    once, each with some of its own): the smaller is folded away. Its lines the larger holds are
    dropped, the rest go to a new merged file, which holds less than half of its bytes (so git
    sees no rename, and two clones doing this at once make the same change)."""
    held = {rel: set(data[rel].split(b"\n")[:-1]) for rel in merged}
    if any(_unreadable(data[rel]) for rel in merged):
        return None
    order = sorted(merged, key=lambda rel: (len(data[rel]), rel))
    for small in order:
        for other in reversed(order):
            if other == small or len(data[other]) < len(data[small]):
                continue
            shared = held[small] & held[other]
            rest = held[small] - held[other]
            if not shared or sum(len(raw) + 1 for raw in rest) * 2 >= len(data[small]):
                continue
            keyed = {}
            for raw in rest:
                event = lines.classify(raw).event
                assert event is not None  # `_unreadable` let the file through
                keyed[raw] = (event.clock, event.id)
            part = sorted(rest, key=lambda raw: (keyed[raw], raw))
            outputs = [_named(month, part)] if part else []
            return MonthPlan(
                month,
                [small],
                outputs,
                events=len({k[1] for k in keyed.values()}),
                duplicates=len(shared),
                heavy=[],
            )
    return None


def _unreadable(data: bytes) -> str | None:
    """Why a committed file cannot be folded (a line readers skip), or None."""
    if data and not data.endswith(b"\n"):
        return "it ends in a torn line"
    for number, raw in enumerate(data.split(b"\n")[:-1], 1):
        found = lines.classify(raw, number)
        if found.event is None:
            return f"line {number}: {found.problem}"
    return None


def _fold(
    store: Store, repo: StoreRepo, month: str, sources: list[str], committed: dict[str, Any]
) -> MonthPlan | str:
    keyed: dict[bytes, tuple[int, str]] = {}
    total = 0
    for rel in sources:
        data = repo.blob(committed[rel]).data
        if data and not data.endswith(b"\n"):
            return (
                f"{month}: not compacted: {rel} ends in a torn line; run `engram doctor` "
                "(it says how to set it aside)"
            )
        for number, raw in enumerate(data.split(b"\n")[:-1], 1):
            found = lines.classify(raw, number)
            if found.event is None:
                return (
                    f"{month}: not compacted: {rel}:{number}: {found.problem}; run "
                    "`engram doctor`, which sets damaged lines aside, then compact again"
                )
            total += 1
            keyed.setdefault(raw, (found.event.clock, found.event.id))
    ordered = sorted(keyed, key=lambda raw: (keyed[raw], raw))
    outputs: list[tuple[str, bytes]] = []
    part_of: dict[bytes, int] = {}
    part: list[bytes] = []
    size = 0
    for raw in ordered:
        if part and size + len(raw) + 1 > MAX_FILE_BYTES:
            outputs.append(_named(month, part))
            part, size = [], 0
        part.append(raw)
        part_of[raw] = len(outputs)
        size += len(raw) + 1
    if part:
        outputs.append(_named(month, part))
    # git takes a removed file for renamed into an added one that holds half its bytes or more
    # (`git merge` detects renames): two clones folding one file into different files would
    # then meet a rename/rename conflict, and a clone that appended to it an edit of the merged
    # file. So no file is folded into one where its bytes are that large a share.
    heavy = []
    for rel in sources:
        data = repo.blob(committed[rel]).data
        shared = [0] * len(outputs)
        for raw in set(data.split(b"\n")[:-1]):
            shared[part_of[raw]] += len(raw) + 1
        if any(
            n >= RENAME_SHARE * max(len(data), len(outputs[i][1])) for i, n in enumerate(shared)
        ):
            heavy.append(rel)
    return MonthPlan(
        month,
        sources,
        outputs,
        events=len({k[1] for k in keyed.values()}),
        duplicates=total - len(keyed),
        heavy=heavy,
    )


def _named(month: str, part: list[bytes]) -> tuple[str, bytes]:
    data = b"".join(raw + b"\n" for raw in part)
    return f"{month}/{PREFIX}{hashlib.sha1(data).hexdigest()[:16]}.jsonl", data


def message(plans: list[MonthPlan]) -> str:
    before = sum(len(p.sources) for p in plans)
    after = sum(len(p.outputs) for p in plans)
    events = sum(p.events for p in plans)
    lines_ = [f"{SUBJECT} fold {before} event files into {after} ({events:,} events)", ""]
    for p in plans:
        names = ", ".join(rel.rsplit("/", 1)[1] for rel, _ in p.outputs)
        lines_.append(
            f"- {p.month}: {len(p.sources)} files into {names}"
            + (f" ({p.duplicates} duplicate lines dropped)" if p.duplicates else "")
        )
    lines_ += [
        "",
        "Every line of the removed files is in the added ones, byte for byte.",
        "",
        f"{TRAILER}: {before} files into {after}",
    ]
    return "\n".join(lines_) + "\n"


def apply(store: Store, repo: StoreRepo, plans: list[MonthPlan], *, author: str) -> str:
    """Write the merged files, remove the folded ones, commit. Call under the store's lock."""
    import pygit2
    from pygit2.enums import FileMode

    from .repo import IndexLock, StatCache, git_identity, signature

    reason = repo.busy()
    if reason:
        raise GitError(f"{reason}; finish it, then run `engram compact`")
    outputs = {rel: data for p in plans for rel, data in p.outputs}
    removed = [rel for p in plans for rel in p.sources if rel not in outputs]
    # 1. The merged files, durably: from here on every event is in them.
    for rel, data in outputs.items():
        path = store.root / rel
        if path.exists() and path.read_bytes() == data:
            continue
        atomic_write(path, data, hidden=True)
    # 2. The folded files.
    for rel in removed:
        (store.root / rel).unlink(missing_ok=True)
    for folder in {_month_of(rel) for rel in removed}:
        fsync_dir(store.root / folder)
    # 3. One commit: HEAD's tree less the folded files, plus the merged ones.
    blobs = {rel: repo.repo.create_blob(data) for rel, data in outputs.items()}
    index = pygit2.Index()
    tree = repo.head_tree()
    assert tree is not None
    index.read_tree(tree)
    for rel in removed:
        index.remove(store.repo_path(rel))
    for rel, oid in blobs.items():
        index.add(pygit2.IndexEntry(store.repo_path(rel), oid, FileMode.BLOB))
    new_tree = index.write_tree(repo.repo)
    committer = signature(git_identity(store.work_tree) or author)
    with IndexLock(repo.repo) as user_index:
        try:
            oid = repo.repo.create_commit(
                "HEAD",
                signature(author),
                committer,
                message(plans),
                new_tree,
                [repo.repo.head.target],
            )
        except (pygit2.GitError, ValueError) as exc:
            raise GitError(
                f"could not commit the compaction ({exc}); every event is on disk "
                "(in the merged file); run `engram compact` again"
            ) from None
        for rel in removed:
            try:
                user_index.remove(store.repo_path(rel))
            except (OSError, KeyError, pygit2.GitError):
                pass
        for rel, blob_id in blobs.items():
            user_index.add(pygit2.IndexEntry(store.repo_path(rel), blob_id, FileMode.BLOB))
    cache = StatCache(store)
    for rel in removed:
        if cache.entries.pop(rel, None) is not None:
            cache.dirty = True
    for rel, blob_id in blobs.items():
        st = (store.root / rel).stat()
        cache.put(rel, [st.st_size, st.st_mtime_ns, st.st_ino, str(blob_id)])
    cache.save()
    return str(oid)


def compact(
    store: Store,
    repo: StoreRepo,
    *,
    author: str,
    dry_run: bool = False,
    months: set[str] | None = None,
) -> CompactResult:
    """Plan and apply a compaction of `store` (call under its lock, pending events committed)."""
    result = CompactResult(store=store.kind)
    plans, result.skipped = plan(store, repo, months=months)
    tree = repo.head_tree()
    files = list(repo.committed_event_files(tree)) if tree is not None else []
    result.files_before = len(files)
    result.files_after = (
        len(files)
        - sum(len(p.sources) for p in plans)
        + sum(len({rel for rel, _ in p.outputs} - set(p.sources)) for p in plans)
    )
    result.events = sum(p.events for p in plans)
    result.months = [
        {
            "month": p.month,
            "files": len(p.sources),
            "into": [r for r, _ in p.outputs],
            "events": p.events,
            "duplicates": p.duplicates,
        }
        for p in plans
    ]
    if plans and not dry_run:
        result.commit = apply(store, repo, plans, author=author)
    return result


def due_months(store: Store, repo: StoreRepo, threshold: int) -> set[str]:
    """The months with at least `threshold` committed event files (0: never)."""
    if threshold <= 0:
        return set()
    return {m for m, n in closed_counts(store, repo).items() if n >= threshold}
