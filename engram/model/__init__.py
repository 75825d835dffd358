"""The records Engram folds from events: memories, tasks and sessions, as plain values with the
rules that fold and check them (and, for sessions, the heartbeat files that say a process is
alive). The read model and the services build on them."""
