"""Every setting Engram has, declared once: its key, default, type, range (for a number) and the
help line `engram config list` and a new store's config.yaml show; and which settings only the
user's own configuration may set. Reading and checking config files is `config.py`'s.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .vocab import MEMORY_KIND

SettingValue = str | int | float | bool | None  # a setting's value (None: not set)


@dataclass(frozen=True)
class Setting:
    key: str
    default: Any
    type: type
    help: str
    minimum: float | None = None  # a number setting has both bounds (a test holds every one to it)
    maximum: float | None = None

    @property
    def bounds(self) -> str:
        """The range of a number setting as messages give it: "1 to 10000"."""
        return f"{number_text(self.minimum)} to {number_text(self.maximum)}"


def number_text(value: Any) -> str:
    """A number as messages show it: 0.5, 10000, 1e+20."""
    return f"{value:g}" if isinstance(value, float) and abs(value) < 1e15 else str(value)


SETTINGS: dict[str, Setting] = {
    s.key: s
    for s in [
        Setting(
            "actor",
            None,
            str,
            "Who writes events and authors commits, as 'Name <email>'. "
            "Unset: ENGRAM_ACTOR, then the store repository's git user, then user@host.",
        ),
        Setting(
            "commit.auto",
            True,
            bool,
            "Commit pending events automatically (batched). A session's start and end alone "
            "never make a commit: they go with the next one.",
        ),
        Setting(
            "commit.every_events",
            20,
            int,
            "Commit once this many events are pending. Session start and end do not count.",
            minimum=1,
            maximum=10_000,
        ),
        Setting(
            "commit.every_seconds",
            300,
            int,
            "Commit when the oldest pending event is this old: checked on each write, by the "
            "MCP server's timer, and when a command exits.",
            minimum=0,
            maximum=86_400,
        ),
        Setting(
            "clock.max_skew",
            300,
            int,
            "Seconds ahead of this machine's clock that the clock of new events follows "
            "events read from elsewhere; a line dated further ahead is read in its place "
            "but never drags this clone's clock. Only from your own configuration.",
            minimum=0,
            maximum=3600,
        ),
        Setting(
            "compact.files",
            64,
            int,
            "Fold a month's closed event files into one file (`engram compact`) once it has "
            "this many, checked at each commit and sync; 0 never compacts automatically.",
            minimum=0,
            maximum=100_000,
        ),
        Setting(
            "limits.content_bytes",
            32768,
            int,
            "Largest memory content, in UTF-8 bytes.",
            minimum=1,
            maximum=1_048_576,
        ),
        Setting(
            "limits.text_bytes",
            8000,
            int,
            "Longest task goal, progress note, failure (error, root cause, fix), or handoff "
            "summary or goal, in UTF-8 bytes.",
            minimum=1,
            maximum=262_144,
        ),
        Setting(
            "limits.item_bytes",
            4000,
            int,
            "Longest single item: a progress feature, a forget reason, a session note, one "
            "entry of a handoff list (a step, a command, an artifact), in UTF-8 bytes.",
            minimum=1,
            maximum=65_536,
        ),
        Setting(
            "limits.list_items",
            200,
            int,
            "Most entries in one handoff list, and most files in a working set or a "
            "progress record.",
            minimum=1,
            maximum=1_000,
        ),
        Setting(
            "limits.title_chars",
            200,
            int,
            "Longest task name or commit subject, in characters.",
            minimum=1,
            maximum=1_000,
        ),
        Setting("limits.tags", 32, int, "Most tags on one record.", minimum=0, maximum=256),
        Setting(
            "limits.name_chars",
            64,
            int,
            "Longest tag, scope or component, in characters.",
            minimum=1,
            maximum=256,
        ),
        Setting(
            "limits.path_chars",
            1024,
            int,
            "Longest file path in a working set or a citation, in characters.",
            minimum=1,
            maximum=4_096,
        ),
        Setting(
            "limits.query_bytes",
            8192,
            int,
            "Longest recall query, in UTF-8 bytes.",
            minimum=1,
            maximum=65_536,
        ),
        Setting(
            "limits.package_bytes",
            1_048_576,
            int,
            "Largest handoff package file (`engram handoff --from`), in bytes.",
            minimum=1,
            maximum=16_777_216,
        ),
        Setting(
            "limits.citation_lines",
            200,
            int,
            "Most lines one discovery citation may cite.",
            minimum=1,
            maximum=10_000,
        ),
        Setting(
            "limits.import_line_bytes",
            16_777_216,
            int,
            "Longest line `engram import` reads, in bytes; a longer line is skipped and reported.",
            minimum=1,
            maximum=268_435_456,
        ),
        Setting(
            "limits.import_bytes",
            268_435_456,
            int,
            "Most bytes one `engram import` reads, counted after decompression; over it, "
            "nothing is imported.",
            minimum=1,
            maximum=17_179_869_184,
        ),
        Setting(
            "secrets.scan",
            True,
            bool,
            "Refuse content that looks like a credential before it reaches disk.",
        ),
        Setting(
            "secrets.entropy",
            False,
            bool,
            "Also refuse high-entropy strings (noisy: commit hashes and ids look random).",
        ),
        Setting(
            "search.model",
            "builtin",
            str,
            "Embedding model: 'builtin' (all-MiniLM-L6-v2 int8, shipped with Engram), "
            "the absolute path of a folder with an ONNX model and its tokenizer.json "
            "(never downloads; see docs/search.md), any fastembed model name (downloaded "
            "on first use), or 'off' for BM25 only.",
        ),
        Setting(
            "search.vector_flush",
            256,
            int,
            "Fold changed memories into the saved vector index once this many are pending.",
            minimum=1,
            maximum=100_000,
        ),
        Setting(
            "search.exact_below",
            10_000,
            int,
            "Below this many saved vectors, recall compares the query with every one "
            "(exact, no memory unreachable); from it on, it searches the HNSW graph.",
            minimum=0,
            maximum=10_000_000,
        ),
        Setting(
            "recall.weight_vector",
            0.4,
            float,
            "Meaning against words in relevance: 0.5 counts both in full, 1 meaning only, "
            "0 words only.",
            minimum=0,
            maximum=1,
        ),
        Setting(
            "recall.weight_strength",
            0.15,
            float,
            "How much memory strength (recency, importance, reinforcement) moves the rank.",
            minimum=0,
            maximum=1,
        ),
        Setting(
            "recall.strength_floor",
            0.0,
            float,
            "Memories whose strength decayed below this are left out of recall (not "
            "deleted); 0, the default, leaves none out for its age: age only orders.",
            minimum=0,
            maximum=1,
        ),
        Setting(
            "recall.min_relevance",
            0.05,
            float,
            "Results less relevant than this are dropped (calibrated 0 to 1: 0.5 = probably "
            "answers; before time, kind and strength).",
            minimum=0,
            maximum=1,
        ),
        Setting(
            "recall.context",
            0.5,
            float,
            "Memories written together are context for each other: a result written next "
            "to a relevant one gains this share of its relevance (0 turns it off).",
            minimum=0,
            maximum=1,
        ),
        Setting(
            "recall.context_floor",
            0.0,
            float,
            "Context lends relevance only to a memory with at least this much evidence of "
            "its own for the query (meaning and words, 0 to 1; 0: any found by either).",
            minimum=0,
            maximum=1,
        ),
        Setting(
            "recall.context_similarity",
            0.3,
            float,
            "Context passes only between memories at least this similar to each other "
            "(cosine of their vectors): memories written together but about other things "
            "do not lift each other.",
            minimum=0,
            maximum=1,
        ),
        Setting(
            "recall.sitting_penalty",
            0.0,
            float,
            "Variety in the results: the n-th result of one sitting (memories written "
            "within 30 minutes of each other) keeps (1 - this)^(n - 1) of its score.",
            minimum=0,
            maximum=1,
        ),
        Setting(
            "recall.background_sample",
            0,
            int,
            "Memories of the store sampled into the background a query's meaning is "
            "calibrated against, besides the fixed sentences shipped with Engram (0, the "
            "default: the fixed sentences only, so a score does not move with what else "
            "the store holds).",
            minimum=0,
            maximum=4096,
        ),
        Setting(
            "recall.memory_background",
            0.5,
            float,
            "Share of a memory's own closeness to ordinary text taken off its meaning "
            "(0: none): a memory of general words is near every short query.",
            minimum=0,
            maximum=1,
        ),
        Setting(
            "recall.candidates",
            100,
            int,
            "Candidates taken from each index before fusing and filtering.",
            minimum=1,
            maximum=10_000,
        ),
        Setting(
            "remember.check_duplicates",
            True,
            bool,
            "On remember, compare with existing memories (costs one embedding).",
        ),
        Setting(
            "remember.duplicate_similarity",
            0.92,
            float,
            "At or above this similarity a new memory reinforces the existing one instead.",
            minimum=0,
            maximum=1,
        ),
        Setting(
            "remember.related_similarity",
            0.80,
            float,
            "At or above this (and below the duplicate level) a memory is reported as a "
            "possible contradiction that it may supersede.",
            minimum=0,
            maximum=1,
        ),
        Setting(
            "consolidate.similarity",
            0.90,
            float,
            "Memories at least this similar are merged by `engram consolidate`.",
            minimum=0,
            maximum=1,
        ),
        Setting(
            "checkpoint.auto",
            True,
            bool,
            "Save checkpoints automatically when the picture changes (failure, plan change, "
            "working-set shift, quiet period). They stay in the events; only handoffs are "
            "rendered to Markdown under handoffs/.",
        ),
        Setting(
            "checkpoint.plan_change",
            0.5,
            float,
            "Share of next steps and work in progress that must change to count as a new "
            "plan (Jaccard distance).",
            minimum=0,
            maximum=1,
        ),
        Setting(
            "checkpoint.working_set_change",
            0.5,
            float,
            "Share of working-set files that must change to count as a shift.",
            minimum=0,
            maximum=1,
        ),
        Setting(
            "checkpoint.quiet_minutes",
            30.0,
            float,
            "A task event this long after the last checkpoint saves a new one.",
            minimum=0,
            maximum=10_080,
        ),
        Setting(
            "checkpoint.debounce_seconds",
            120.0,
            float,
            "At most one automatic checkpoint per reason in this time (failures always save one).",
            minimum=0,
            maximum=86_400,
        ),
        Setting(
            "session.stale_minutes",
            30.0,
            float,
            "An open session of this machine without a heartbeat for this long is interrupted.",
            minimum=0.001,
            maximum=10_080,
        ),
        Setting(
            "resume.max_chars",
            100_000,
            int,
            "Longest `engram resume` output; longer output is cut and says so.",
            minimum=1000,
            maximum=10_000_000,
        ),
        Setting(
            "resume.hook_tokens",
            2000,
            int,
            "Token budget of the context the SessionStart hook gives the agent, filled by "
            "priority (must-not-redo and must-preserve first); what does not fit is named.",
            minimum=100,
            maximum=100_000,
        ),
        Setting(
            "capture.files",
            True,
            bool,
            "Client hooks (Claude Code's PostToolUse, `engram capture`) record the files "
            "the agent edits or writes, for the working set of the next checkpoint.",
        ),
        Setting(
            "capture.commands",
            True,
            bool,
            "Client hooks record commands that fail (exit status, first lines of output, "
            "secrets redacted) as failure candidates of the session.",
        ),
        Setting(
            "capture.recall",
            True,
            bool,
            "The UserPromptSubmit hook puts the memories relevant to the user's prompt in "
            "front of the agent (each once a session, unless it changed).",
        ),
        Setting(
            "capture.recall_threshold",
            0.3,
            float,
            "Least calibrated relevance (0 to 1) of a memory the UserPromptSubmit hook "
            "adds; below it, nothing is added.",
            minimum=0,
            maximum=1,
        ),
        Setting(
            "capture.recall_tokens",
            300,
            int,
            "Token budget of the memories the UserPromptSubmit hook adds to a prompt.",
            minimum=20,
            maximum=4_000,
        ),
        *[
            Setting(
                f"decay.{kind}",
                days,
                float,
                f"Days for a {kind} to fade to 37% strength (scaled up by importance and "
                "by each reinforcement).",
                minimum=0.001,
                maximum=36_525,
            )
            for kind, days in ((term.name, term.data["decay_days"]) for term in MEMORY_KIND.terms)
        ],
    ]
}

# Settings that protect the user or decide what runs and what is downloaded. A project's
# config.yaml is written by whoever can push to the repository: these are read only from the
# user's own (personal) configuration and the environment, never from a project store.
PERSONAL_ONLY = frozenset(
    {"actor", "search.model", "limits.import_line_bytes", "limits.import_bytes", "clock.max_skew"}
    | {k for k in SETTINGS if k.startswith("secrets.")}
)
SAFE_MODELS = ("builtin", "off")  # what a project may choose: nothing downloaded or loaded


def personal_only(key: str, value: Any) -> bool:
    """May this setting, with this value, come only from the user's own configuration? (Its
    default, as every new store's config.yaml lists it, weakens nothing.)"""
    return (
        key in PERSONAL_ONLY
        and value != SETTINGS[key].default
        and not (key == "search.model" and value in SAFE_MODELS)
    )
