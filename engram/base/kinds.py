"""The kinds of memory and their defaults: plain data, importable without the rest of Engram
(the command line builds its options from them before anything heavy is loaded)."""

from __future__ import annotations

MEMORY_KINDS: dict[str, str] = {
    "fact": "something true about the code, the project or the world",
    "decision": "a choice that was made, ideally with why",
    "preference": "how the user likes things done",
    "convention": "how this codebase does things",
    "gotcha": "a trap: something surprising that cost time",
    "failure": "something that failed, and why",
    "lesson": "what to do differently next time",
    "procedure": "steps that work for a recurring job",
    "note": "anything else worth keeping",
}
SOURCES = ("user-said", "agent-inferred")
DEFAULT_KIND = "fact"
DEFAULT_SOURCE = "agent-inferred"
DEFAULT_IMPORTANCE = 0.5
