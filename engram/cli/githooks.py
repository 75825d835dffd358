"""What the git hooks run: `python -I -m engram.githooks pre-commit|refresh [--background]`.

`pre-commit` refuses a commit whose staged event files fail the check of `engram.git.hooks`;
`refresh` (run by post-merge, post-checkout and post-rewrite, detached with `--background`)
brings the store's read model and indexes up to date through the Engram facade. The stable
command path `engram.githooks` points here. The background refresh runs in the work tree, so it
is started with `-I` (or `-P`) as the hook itself was, never with that directory on its path.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from ..base.config import PROJECT_DIR, engram_home
from ..base.entries import child_command
from ..base.layout import CONFIG_FILE, HOOKS_LOG
from ..base.places import linked_store
from ..git.hooks import staged_problems
from ..storage.store import Store


def store_here() -> Store | None:
    """The store of the repository git runs this hook in, if it has one (never a `.engram`
    that is a symbolic link: every command refuses it, and a hook does nothing there)."""
    top = Path(os.environ.get("GIT_WORK_TREE") or Path.cwd())
    if linked_store(top) is None and (top / PROJECT_DIR / CONFIG_FILE).exists():
        return Store(top / PROJECT_DIR, "project")
    if (top / CONFIG_FILE).exists() and top.resolve() == engram_home().resolve():
        return Store(top, "personal")
    return None


def refresh(store: Store) -> dict[str, object]:
    from dataclasses import asdict

    from ..api import Engram  # the facade loads the read model: only when refreshing

    with Engram(cwd=store.work_tree, use=store.kind) as engram:
        return asdict(engram.refresh_indexes())


def refresh_in_background(store: Store) -> None:
    """Detach a refresh from git: the hook returns at once; output goes to a log file."""
    log_path = store.local_dir / HOOKS_LOG
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        subprocess.Popen(
            child_command("engram.githooks", "refresh"),
            cwd=store.work_tree,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
        )


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in ("pre-commit", "refresh"):
        print("usage: python -m engram.githooks pre-commit|refresh [--background]", file=sys.stderr)
        return 2
    store = store_here()
    if store is None:
        return 0
    if argv[0] == "pre-commit":
        problems = staged_problems(store)
        for problem in problems[:20]:
            print(f"engram: {problem}", file=sys.stderr)
        if problems:
            print(
                f"engram: commit refused: {len(problems)} problem(s) in staged event files "
                "(`engram verify` shows them all)",
                file=sys.stderr,
            )
            return 1
        return 0
    if "--background" in argv[1:]:
        refresh_in_background(store)
        return 0
    report = refresh(store)
    print(f"engram: caches refreshed: {report}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
