"""A child process that folds a store's vectors into its vector index and is killed with
SIGKILL at the moment it would save the index for the N-th time.

Usage: python folder.py DIR reindex|recall|cli-reindex N
- reindex: `Engram.reindex()`, saving every batch of 64 (a long reindex, shortened);
- recall: one recall, which folds the memories changed since the last save (256 or more);
- cli-reindex: `engram reindex` as the command line runs it, stopped with SIGINT (Ctrl-C)
  instead of killed.
"""

import os
import signal
import sys

from engram.api import Engram
from engram.search import folding, retrieval

directory, command, kill_at = sys.argv[1], sys.argv[2], int(sys.argv[3])
folding.CHECKPOINT_SECONDS = 0.0
folding.FOLD_BATCH = 64
save = retrieval.StoreSearch._save_vectors
calls = 0


def save_or_die(self: retrieval.StoreSearch, index: object, folded: list[tuple[str, int]]) -> bool:
    global calls
    calls += 1
    if calls == kill_at:
        print("killed", flush=True)
        os.kill(os.getpid(), signal.SIGINT if command == "cli-reindex" else signal.SIGKILL)
    return save(self, index, folded)


retrieval.StoreSearch._save_vectors = save_or_die
if command == "cli-reindex":
    from engram.cli.main import main

    main(["-C", directory, "reindex"])
engram = Engram(cwd=directory)
if command == "reindex":
    engram.reindex()
else:
    engram.recall("elephants crossing a river", k=3)
