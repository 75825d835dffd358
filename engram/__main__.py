"""`python -m engram`: the `engram` command, run as a module."""

from .cli.main import run

run()
