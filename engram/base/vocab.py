"""Every closed vocabulary of Engram, declared once with its data: memory kinds, sources, task and
progress statuses, checkpoint reasons, session agents, interruption reasons, outcomes, resume
depths and restore modes, import and export formats.

The command line's `click.Choice` lists, the MCP server's `Literal` types, the settings' defaults
(the decay of each kind) and every check are derived from these tables, so a new value is added
in one place. `Vocabulary.one_of` is the one check, with one wording:
`unknown task status 'x'; use one of: open, in_progress, blocked, done, abandoned`.

Plain data, importable without the rest of Engram: the command line builds its options from it
before anything heavy is loaded.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from .errors import UsageError, quote


@dataclass(frozen=True)
class Term:
    """One value of a vocabulary, with what it means and the data that goes with it."""

    name: str
    description: str = ""
    data: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)


@dataclass(frozen=True)
class Vocabulary:
    """A closed list of names. `what` names the vocabulary in messages ("task status")."""

    what: str
    terms: tuple[Term, ...]
    default: str | None = None

    def __post_init__(self) -> None:
        names = [term.name for term in self.terms]
        if len(set(names)) != len(names) or (
            self.default is not None and self.default not in names
        ):
            raise ValueError(f"vocabulary {self.what}: duplicate names or an unknown default")

    @property
    def given(self) -> str:
        """The default of a vocabulary that declares one."""
        if self.default is None:
            raise ValueError(f"vocabulary {self.what} has no default")
        return self.default

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(term.name for term in self.terms)

    def __iter__(self) -> Iterator[str]:
        return iter(self.names)

    def __contains__(self, value: object) -> bool:
        return value in self.names

    def __len__(self) -> int:
        return len(self.terms)

    def describe(self, name: str) -> str:
        return self[name].description

    def __getitem__(self, name: str) -> Term:
        for term in self.terms:
            if term.name == name:
                return term
        raise KeyError(name)

    def descriptions(self) -> dict[str, str]:
        return {term.name: term.description for term in self.terms}

    def one_of(self, value: Any, *, what: str | None = None) -> str:
        """`value` when it is one of the names, else a UsageError in the one wording."""
        if isinstance(value, str) and value in self.names:
            return value
        raise UsageError(one_of_message(what or self.what, value, self.names))


def one_of_message(what: str, value: Any, names: tuple[str, ...] | list[str]) -> str:
    """The one wording of a value outside a closed list (also used for schema errors)."""
    return f"unknown {what} {quote(value)}; use one of: {', '.join(names)}"


def _vocabulary(
    what: str,
    *terms: tuple[str, str] | tuple[str, str, dict[str, Any]] | str,
    default: str | None = None,
) -> Vocabulary:
    made = []
    for term in terms:
        if isinstance(term, str):
            made.append(Term(term))
        else:
            made.append(Term(*term))
    return Vocabulary(what, tuple(made), default)


MEMORY_KIND = _vocabulary(
    "memory kind",
    # name, what it is, days for it to fade to 37% strength (the `decay.<kind>` setting)
    ("fact", "something true about the code, the project or the world", {"decay_days": 180}),
    ("decision", "a choice that was made, ideally with why", {"decay_days": 365}),
    ("preference", "how the user likes things done", {"decay_days": 730}),
    ("convention", "how this codebase does things", {"decay_days": 730}),
    ("gotcha", "a trap: something surprising that cost time", {"decay_days": 365}),
    ("failure", "something that failed, and why", {"decay_days": 120}),
    ("lesson", "what to do differently next time", {"decay_days": 365}),
    ("procedure", "steps that work for a recurring job", {"decay_days": 730}),
    ("note", "anything else worth keeping", {"decay_days": 60}),
    default="fact",
)
SOURCE = _vocabulary(
    "source",
    ("user-said", "the user said it"),
    ("agent-inferred", "the agent concluded it"),
    default="agent-inferred",
)
TASK_STATUS = _vocabulary(
    "task status",
    ("open", "not started", {"active": True}),
    ("in_progress", "being worked on", {"active": True}),
    ("blocked", "waiting on something", {"active": True}),
    ("done", "finished", {"active": False}),
    ("abandoned", "given up", {"active": False}),
    default="open",
)
PROGRESS_STATUS = _vocabulary(
    "progress status",
    ("done", "the feature works"),
    ("in_progress", "being worked on"),
    ("blocked", "waiting on something"),
    ("todo", "still to do"),
    default="done",
)
CHECKPOINT_REASON = _vocabulary(
    "checkpoint reason",
    ("handoff", "the agent hands the task over", {"asked": True}),
    ("failure", "a failure was recorded", {"asked": False}),
    ("plan_change", "the plan changed", {"asked": False}),
    ("working_set", "the files being worked on changed", {"asked": False}),
    ("quiet", "nothing happened for a while", {"asked": False}),
    ("overflow", "the context window is about to be compacted", {"asked": False}),
    ("session_end", "the session ended", {"asked": False}),
    ("manual", "someone asked for one", {"asked": True}),
    default="handoff",
)
AGENT = _vocabulary("agent", "claude-code", "cursor", "codex", "cli", "other", default="cli")
INTERRUPTION = _vocabulary(
    "interruption reason",
    ("crash", "the process died"),
    ("overflow", "the context window filled"),
    ("rate_limit", "a rate limit or quota stopped the agent"),
    ("tool_failure", "a tool failed"),
    ("user_away", "the user left"),
    ("unknown", "no cause could be told"),
    default="unknown",
)
OUTCOME = _vocabulary(
    "outcome",
    ("success", "the session did what it set out to do"),
    ("failure", "it did not"),
    ("unknown", "no one said"),
)
DEPTH = _vocabulary(
    "depth",
    # how much resume brings: events and summaries of earlier checkpoints (None: all), the token
    # budget filled by priority (None: none), memories: of the task, and others, each at most
    (
        "brief",
        "the last handoff, what happened since, the task's decisions; a small budget",
        {"events": 5, "summaries": 0, "tokens": 1000, "memories": 5},
    ),
    (
        "standard",
        "recent history, within a budget",
        {"events": 30, "summaries": 4, "tokens": 4000, "memories": 20},
    ),
    (
        "full",
        "the whole history, no budget",
        {"events": None, "summaries": None, "tokens": None, "memories": 200},
    ),
    default="standard",
)
RESTORE = _vocabulary(
    "restore mode",
    ("full", "every memory the task needs"),
    ("selective", "the important memories and the traps"),
    ("none", "no memories"),
    default="selective",
)
SESSION_STATE = _vocabulary("session state", "open", "ended", "interrupted")
IMPORT_FORMAT = _vocabulary(
    "import format",
    ("mcp-engram", "an mcp-engram data directory (events/events-YYYYMMDD.jsonl[.gz])"),
    ("mcp-memory", "the MCP memory server's knowledge graph (memory.jsonl)"),
    ("engram", "Engram's own JSON Lines export (engram export)"),
    ("engram-go", "the Go engram's export (engram-export.json) or sync folder (.engram/)"),
)
EXPORT_FORMAT = _vocabulary("export format", "jsonl", "markdown", default="jsonl")
