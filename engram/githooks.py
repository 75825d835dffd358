"""`python -I -m engram.githooks pre-commit|refresh [--background]`: the command the git hooks in
users' repositories run (written by `engram hooks install`). The name is kept stable because
installed hook scripts hold it; what it runs is `engram.cli.githooks`, the hooks themselves
`engram.git.hooks`. (`-I` keeps the work tree git runs hooks in off the import path.)"""

from __future__ import annotations

import sys

from .cli.githooks import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
