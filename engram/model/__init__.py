"""The records Engram folds from events: memories, tasks and sessions, as plain values with the
rules that fold and check them. No I/O: the read model and the services build on them."""
