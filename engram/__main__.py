"""`python -m engram`: the `engram` command, run as a module."""

from .cli.main import main

main(prog_name="engram")
