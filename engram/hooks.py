"""`python -I -m engram.hooks <hook>`: the command Claude Code's settings run (written by
`engram mcp install claude --hooks`). The name is kept stable because users' settings files
hold it; the hooks themselves are `engram.cli.hooks`. (`-I` keeps the
project directory Claude Code runs hooks in off the import path.)"""

from __future__ import annotations

import sys

from .cli.hooks import main

if __name__ == "__main__":
    sys.exit(main())
