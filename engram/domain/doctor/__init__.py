"""`engram doctor`: what is wrong with a store, where, and the command that fixes it.

It looks at everything a crash, a bad merge, a full disk or a hand edit can leave behind:

- event files: a torn last line, damaged lines (conflict markers, invalid JSON or UTF-8, a line
  cut short in the middle), files changed in their committed part or gone from the work tree;
- crash leftovers: a lock held by a process that hangs, temporary files of processes that died,
  git's `index.lock` left by a killed commit;
- git: events not committed yet, a merge or rebase in progress, events that git took away (a
  clean, a dropped stash, a reset, a revert, a rebase, a removed worktree: see `engram.lost`);
- derived state in `<git-dir>/engram/`: damaged or missing caches, damaged bookkeeping files,
  vectors the vector index's graph cannot reach (memories no search by meaning returns);
- the disk: a read-only or full file system;
- the store's own files: config.yaml (and what in it every command leaves out: not YAML, an
  unknown key, a value out of its range; a `search.model` no model answers to), README.md,
  .gitattributes (and Engram's lines in it), and every git attribute that would change an event
  file's bytes (a re-encoding, `ident`, a filter, line-ending conversion), wherever it is set;
- memories whose cited files changed since they were written (a note: `engram stale`);
- a project's `.engram` that is a symbolic link, which every command refuses (`refused`);
- the commands Engram installed (MCP client configs, Claude Code hooks, git hooks) that still
  run `python -m engram…` from the working directory, and Engram's entries in a project's
  configs that are not exactly as Engram writes them, with the command that rewrites them.

Diagnosis repairs nothing (it writes a probe file, removed at once, to learn whether the disk
takes writes, and brings the read model and the ledger of lost events up to date, as any read
does). `--fix` applies only the repairs that lose nothing, and never takes a line someone
committed out of a file (nor prints a commit that would): a damaged committed line is set aside in
this clone (`<git-dir>/engram/set-aside.json`, `engram.storage.set_aside`), and readers read
around it; damaged lines and torn tails only this clone has move to
`<git-dir>/engram/quarantine/<time>/` (with a copy of the file as it was) and the file is
rewritten without them; empty event files, dead processes' temporary files and a stale
`index.lock` are removed, and git's index entries for Engram's files are brought up to HEAD;
damaged bookkeeping files are removed and damaged caches rebuilt; unreachable vectors are added to
the graph again; missing store files are
recreated and committed; lost events are written back and committed (`engram recover`).
Everything else is reported with the command a person should run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeGuard

from ...base.errors import LinkedStoreError, NoStoreError
from ...base.layout import CONFIG_FILE, EVENTS_DIR, PROJECT_DIR
from ...git.recovery import git_lock_files, recover_interrupted_commit
from ...storage import events as ev
from ...storage.store import Store
from .attribute_checks import check_attributes
from .cache_checks import check_caches, check_local_state, damaged_caches
from .citation_checks import check_citations
from .config_checks import check_config, check_model
from .entry_checks import check_entries
from .event_checks import Scan, check_events, scan
from .git_checks import check_git, check_lost
from .repair import repair, same_facade
from .report import (
    DoctorReport,
    Finding,
    Fresh,
    Host,
    Level,
    StoreDiagnosis,
    StoreReport,
    restore_command,
)
from .store_checks import (
    check_disk,
    check_layout,
    check_links,
    check_locks,
    check_shapes,
    check_temp_files,
)
from .vector_checks import check_vectors

# -- which stores -------------------------------------------------------------------------------


def _present(store: Store | None) -> TypeGuard[Store]:
    """A store worth examining: its directory exists and holds something of a store."""
    if store is None or not store.root.is_dir():
        return False
    return any((store.root / name).exists() for name in (CONFIG_FILE, EVENTS_DIR, ".git"))


def stores_to_examine(engram: Host) -> list[Store]:
    """Like `Engram.stores()`, but a store that lost its config.yaml is examined, not refused."""
    personal, project = engram.personal, engram.project
    if engram.use == "project":
        if project is None and engram.foreign is not None:
            engram.project_store()  # refuses, saying whose the .engram/ folder is
        if project is None or not project.root.is_dir():
            raise NoStoreError(
                "no project store here; run `engram init --project` at the top of the repository"
            )
        return [project]
    if engram.use == "personal":
        if not _present(personal):
            raise NoStoreError("no personal store yet; run `engram init` to create one")
        return [personal]
    found = [s for s in (project, personal) if _present(s)]
    if not found:
        raise NoStoreError(
            "no Engram store yet; run `engram init` (personal) or "
            "`engram init --project` (inside a git repository)"
        )
    return found


# -- the whole run ------------------------------------------------------------------------------


def run(
    engram: Host, *, fix: bool = False, reopen: Callable[[Store], Fresh] | None = None
) -> DoctorReport:
    """Diagnose every store selected; with `fix`, repair what can be repaired safely and
    diagnose again. `reopen` opens a new facade over one store for the repairs that run one of
    its commands (by default, one of the same class as `engram`)."""
    if reopen is None:
        reopen = same_facade(engram)
    reports = []
    for store in stores_to_examine(engram):
        report = StoreReport(store, diagnose(engram, store))
        if fix:
            report.fixed = repair(engram, store, report.findings, reopen)
            report.findings = diagnose(engram, store)
        reports.append(report)
    return DoctorReport(ok=all(r.ok for r in reports), stores=tuple(r.result() for r in reports))


def refused(error: LinkedStoreError) -> DoctorReport:
    """The verdict where no facade opens because the project's `.engram` is a symbolic link
    (`engram.base.places.find_project_store` refuses it): that one finding, with its fix."""
    fix = error.fix.cli if error.fix else ""
    finding = Finding(
        "store-link", "error", f"{PROJECT_DIR} is {error.why}", fix, path=str(error.path)
    )
    diagnosis = StoreDiagnosis("project", str(error.path), False, (finding,), ())
    return DoctorReport(ok=False, stores=(diagnosis,))


def diagnose(engram: Host, store: Store) -> list[Finding]:
    """Every finding for one store."""
    out: list[Finding] = []
    checks = (
        check_layout,
        check_config,
        check_model,
        check_links,
        check_shapes,
        check_disk,
        check_locks,
        check_temp_files,
        check_attributes,
        check_events,
        check_git,
        check_caches,
        check_vectors,
        check_local_state,
        check_lost,
        check_entries,
        check_citations,
    )
    for check in checks:
        try:
            out.extend(check(engram, store))
        except Exception as exc:  # one failing check must not hide what the others find
            out.append(
                Finding(
                    "doctor",
                    "warning",
                    f"could not run the {check.__name__[6:]} check: {ev.one_line(exc, 200)}",
                    "report this as a bug",
                )
            )
    # A file with damaged lines is also one whose committed part changed: say it once, with
    # the fix for its lines.
    damaged = {f.path for f in out if f.check in ("damaged-line", "torn-line", "line-endings")}
    # A file git converts (an attribute changes its bytes) is said once, with the attribute.
    converted = {f.path for f in out if f.check == "attributes" and f.level == "error"}
    return [
        f
        for f in out
        if not (f.check == "committed-changed" and f.path in damaged)
        and not (f.path in converted and f.check in CONVERTED_SHOWS)
    ]


# What a file whose bytes git converted also shows as, said once as the attribute instead.
CONVERTED_SHOWS = ("damaged-line", "torn-line", "line-endings", "committed-changed", "event-file")


__all__ = [
    "DoctorReport",
    "Finding",
    "Fresh",
    "Host",
    "Level",
    "Scan",
    "StoreDiagnosis",
    "StoreReport",
    "damaged_caches",
    "diagnose",
    "git_lock_files",
    "recover_interrupted_commit",
    "refused",
    "repair",
    "restore_command",
    "run",
    "scan",
    "stores_to_examine",
]
