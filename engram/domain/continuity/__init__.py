"""Continuity: tasks, checkpoints (handoffs), sessions, rehydration and its metrics.

All of it is events in the store, so it travels with `git push` / `git clone` and reads like code
in a diff. The modules here fold those events into state and render it; `engram.api.Engram`
writes the events.
"""
