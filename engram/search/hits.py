"""What recall returns for one memory (`Hit`), and what the indexes see of a memory: the text
BM25 indexes, the text the embedding model embeds, and the memory's strength.

Strength is an Ebbinghaus retention exp(-age / stability), stability = the kind's decay days *
(1 + importance) * (1 + times reinforced), and age counts from when the memory was last
confirmed, said, or written.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..base.config import SETTINGS, Settings
from ..model import memories as mem
from ..model.freshness import Freshness
from ..storage import events as ev
from .ranking import Candidate, dates_said


def search_text(memory: mem.Memory) -> str:
    """What BM25 sees of a memory: its words, tags and scope, the date it is about (as words,
    "8 May 2023", so that a question naming a month or year finds it), and the dates its
    relative time words mean ("yesterday" -> "7 May 2023")."""
    extra = " ".join([*memory.tags, memory.scope or ""]).replace("/", " ").replace("-", " ")
    if memory.at:
        moment = ev.parse_time(memory.at)
        extra += f" {moment.day} {moment:%B %Y}"
    # "Yesterday I ..." is about the day before the memory's own moment, not before today.
    said = dates_said(memory.content, ev.parse_time(memory.at or memory.created_at))
    if said:
        extra += " " + " ".join(said)
    return f"{memory.content}\n{extra}".strip()


def embedding_text(kind: str, tags: Sequence[str], content: str) -> str:
    """What the embedding model sees of a memory: its kind and tags say what it is about as much
    as its words do ("preference (testing): Prefer pytest fixtures ...")."""
    label = f"{kind} ({', '.join(sorted(tags))})" if tags else kind
    return f"{label}: {content}"


def memory_embedding_text(memory: mem.Memory) -> str:
    return embedding_text(memory.kind, memory.tags, memory.content)


def strength(
    memory: mem.Memory | mem.Head, now: datetime, settings: Settings, *, at: datetime | None = None
) -> float:
    """An Ebbinghaus retention, exp(-age / stability): stability is the kind's decay days
    times (1 + importance) times (1 + times reinforced); age counts from when the memory was
    last confirmed, said or written (`at`, its moment parsed, when the caller has it)."""
    key = f"decay.{memory.kind}" if f"decay.{memory.kind}" in SETTINGS else "decay.note"
    stability = settings[key] * (1.0 + memory.importance) * (1.0 + memory.reinforced)
    moment = at if at is not None else ev.parse_time(memory.moment)
    age = max(0.0, (now - moment).total_seconds() / 86400.0)
    return math.exp(-age / stability)


@dataclass
class Hit:
    """One recalled memory and why it ranked where it did."""

    memory: mem.Memory
    evidence: Candidate
    model: str | None = None  # the identity of the embedding model that scored it, if any
    # Whether the files it cites changed (`engram.domain.freshness`), and the factor that
    # ranks a stale memory a little lower.
    freshness: Freshness | None = None
    factor: float = 1.0

    @property
    def score(self) -> float:
        return self.evidence.score * self.factor

    @property
    def relevance(self) -> float:
        return self.evidence.relevance

    @property
    def bm25(self) -> float:
        return self.evidence.share

    @property
    def vector(self) -> float:
        return self.evidence.cosine

    @property
    def strength(self) -> float:
        return self.evidence.strength

    def explain(self) -> dict[str, Any]:
        found = {**self.evidence.explain(), "model": self.model or "none (words only)"}
        if self.freshness is not None:
            found["freshness"] = self.freshness.to_dict()
            found["freshness_factor"] = self.factor
            found["score"] = round(self.score, 4)
        return found

    def to_dict(self, *, full: bool = True) -> dict[str, Any]:
        data = (
            self.memory.to_dict()
            if full
            else {
                "id": self.memory.id,
                "kind": self.memory.kind,
                "summary": self.memory.summary(),
                "tags": list(self.memory.tags),
                "store": self.memory.store,
                # A retired memory (`--all`) says so even in the short form.
                "status": self.memory.status,
                **(
                    {"superseded_by": self.memory.superseded_by}
                    if self.memory.superseded_by
                    else {}
                ),
            }
        )
        if self.freshness is not None:
            data = {**data, "freshness": self.freshness.state}
        return {**data, "explain": self.explain()}
