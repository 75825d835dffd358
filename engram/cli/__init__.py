"""Front end for people: the `engram` command (click), one module per family of commands."""
