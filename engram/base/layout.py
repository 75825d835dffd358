"""Every path Engram uses in a store and in a clone's local state, named in one place.

A store root (`~/.engram`, or `.engram/` in a project's work tree) holds what is committed:

    config.yaml                      settings
    README.md, .gitattributes        for people browsing the repository
    events/YYYY/MM/<writer>.jsonl    the events
    handoffs/                        handoff notes written for people

Per-clone state that must never be committed lives in the git directory, `<git-dir>/engram/`
(`LOCAL_DIR`): the write lock, the writer's position, caches, torn lines and quarantined files, the
journals of what client hooks captured;
the ledger of events that could go missing lives in the git directory every work tree shares,
`<common-git-dir>/engram/ledger/`.
"""

from __future__ import annotations

from pathlib import Path

CONFIG_FILE = "config.yaml"
PROJECT_DIR = ".engram"  # a project store, at the top of its repository

# -- committed, under a store root ---------------------------------------------------------------

EVENTS_DIR = "events"
EVENT_SUFFIX = ".jsonl"
HANDOFFS_DIR = "handoffs"
README_FILE = "README.md"
GITATTRIBUTES_FILE = ".gitattributes"
# What must hold for event files, whatever a repository's other .gitattributes or git's config
# say (a more specific file wins, so the store's own pins it): LF-only text, never re-encoded,
# never given `$Id$` expansion or a filter; merged as a union of lines. And forges fold them as
# generated in a pull request (GitHub and Gitea read `linguist-generated`, GitLab
# `gitlab-generated`); the handoff notes under handoffs/ stay shown.
GITATTRIBUTES_LINE = "*.jsonl text eol=lf merge=union -working-tree-encoding -ident -filter"
GITATTRIBUTES_GENERATED = "*.jsonl linguist-generated=true gitlab-generated"
GITATTRIBUTES_LINES = (GITATTRIBUTES_LINE, GITATTRIBUTES_GENERATED)
# Paths under a store root that Engram owns and commits. Anything else is left alone.
TRACKED = (CONFIG_FILE, README_FILE, GITATTRIBUTES_FILE, EVENTS_DIR, HANDOFFS_DIR)

# -- local state, under <git-dir>/engram/ ---------------------------------------------------------

LOCAL_DIR = "engram"  # in the git directory
WRITE_LOCK = "write.lock"
WRITER_STATE = "writer.json"
OBSERVED_CLOCK = "observed-clock"  # the highest clock seen in any event
CONFIG_PARSED = "config-parsed.json"  # config.yaml as last parsed
COMMITTED_STAT = "committed-stat.json"  # stat of event files as last committed
HOOKS_LOG = "hooks.log"
TORN_DIR = "torn"  # torn last lines set aside after a crash
QUARANTINE_DIR = "quarantine"  # damaged lines `doctor --fix` set aside
SESSIONS_DIR = "sessions"
CAPTURE_DIR = "capture"  # what client hooks captured, a journal per session
ASOF_DIR = "asof"  # snapshots of the store at a past commit
ASOF_MARK = "asof.json"  # in a snapshot's own local dir
CACHE_DIR = "cache"
INDEX_LOCK = "index.lock"  # in CACHE_DIR: the search indexes' lock
PROJECTION_DB = "projection.sqlite3"
EMBEDDINGS_DB = "embeddings.sqlite3"
TEXT_INDEX_DIR = "text"
VECTOR_INDEX = "vectors.usearch"
VECTOR_META = "vectors.json"  # beside VECTOR_INDEX: identity, dimension, count
REINDEX_MARK = "reindexing.json"  # in CACHE_DIR while `engram reindex` rebuilds it
PROJECTS_CACHE = "projects.json"  # in the personal store's cache: project ids by repository

# -- the ledger, under <common-git-dir>/engram/ledger/ -------------------------------------------

LEDGER_DIR = (LOCAL_DIR, "ledger")
MAIN_WORKTREE = ".main"  # the main work tree's name in ledger file names (git never starts one
#                          with a dot)


def local_dir(git_dir: Path) -> Path:
    """Per-clone state of the clone whose git directory is `git_dir`."""
    return git_dir / LOCAL_DIR


def cache_dir(local: Path) -> Path:
    """Caches rebuilt from the events (read model, search indexes, embeddings)."""
    return local / CACHE_DIR


def ledger_file(common_dir: Path, worktree: str, kind: str) -> Path:
    """The ledger of one work tree's store of one kind."""
    return common_dir.joinpath(*LEDGER_DIR, f"{worktree}-{kind}.tsv")


def session_file(local: Path, session_id: str, suffix: str = ".json") -> Path:
    """A session's heartbeat (`.json`) or the memories it recalled (`.recalled`)."""
    return local / SESSIONS_DIR / f"{session_id}{suffix}"
