"""Capture: what a coding agent did, recorded from its client's hooks without an LLM.

A client hook (Claude Code's `PostToolUse`, or `engram capture` fed by any other harness) hands
over one tool call at a time. `events` reads it into a harness-neutral `Captured` (a file edited
or written, a command that failed), strictly: anything it cannot read is skipped and counted.
`journal` keeps them per session in local state (never committed, never an event, no embedding
model): files for the working set, failed commands as failure candidates, repeats folded into
one with a count. A checkpoint (the `PreCompact` hook's, a failure's) reads the journal so that
its working set and failed attempts are current. `prompt` puts the few relevant memories in
front of the agent when the user submits a prompt, within a token budget, each once a session.
"""
