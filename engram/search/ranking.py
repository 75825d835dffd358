"""Recall's ranking: what a query asks for, and how much each memory's evidence says it answers.

Two kinds of evidence, each turned into a number in [0, 1] that means the same whatever the
query, the store or its size:

- **words**: the share of the query's IDF mass a memory matches under BM25 (BM25 divided by what
  a memory matching every query word once would score), squared, so that one incidental common
  word of a five-word question counts for little and a memory matching all of them counts fully.
  An identifier in the query (`test_upload_retry`, `AWS_REGION`, `cmd/api/main.go`, `--dry-run`,
  `collectAsState`) found verbatim in a memory is full evidence on its own.
- **meaning**: the cosine similarity of query and memory against the similarities of the same
  query to a fixed background of ordinary sentences (`engram.search.background`; nothing of
  the store, so a score does not move with what else the store holds): z = (cosine - mean -
  ordinariness) / deviation, meaning = sigmoid(z - 3.5 - crowd discount). A memory 3.5
  standard deviations more similar to the question than ordinary text is gets 0.5, unless many
  memories are that close (see `Background.crowded`); ordinariness moves it down for a memory
  nearer ordinary text than the question is, and up for one farther (`ordinariness`).

Relevance joins them as independent evidence (noisy OR): 1 - (1 - meaning)(1 - words). So 0.5
reads "probably answers": one signal at its midpoint, or both weaker. `recall.weight_vector`
trades them (0.5 both in full; 1 meaning only; 0 words only).

The score then applies what the query says about time and kind, and the memory's strength:
score = relevance * time * kind * ((1 - s) + s * strength). Time: a window named in the query
("yesterday", "last week", "in March", "3 days ago") keeps memories dated in it and halves the
rest; "recently" favours the young; "now", "currently", "these days" rank a newer memory on the
same subject above an older one (and "originally", "before we switched" the other way round).
Kind: a question that names a kind ("which gotchas", "list the decisions") favours that kind.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple

# What the query asks (its identifiers, kinds, tense, window) and the factors it puts on a score.
from .intent import Intent as Intent
from .intent import Tense as Tense
from .intent import analyse as analyse
from .intent import dates_said as dates_said
from .intent import has_content as has_content
from .intent import identifiers_found as identifiers_found
from .intent import kind_factor as kind_factor
from .intent import time_factor as time_factor

# -- evidence ------------------------------------------------------------------------------------

WORDS_POWER = 2.0  # how much a partial match of the query's words is discounted
DEVIATION_FLOOR = 0.02  # a background more uniform than this is not trusted to be that uniform
MEANING_MIDPOINT = 3.5  # standard deviations above the background that make meaning 0.5
SUBJECT_SIMILARITY = 0.55  # cosine of two memories taken to be about the same subject
SUBJECT_WINDOW = 20  # how many of the best results are compared for "now" questions


CROWD_SIZE = 2  # memories this close to a query that meaning can still tell apart
CROWD_WEIGHT = 1.0  # standard deviations taken off meaning per doubling of a crowd beyond that


@dataclass(frozen=True)
class Background:
    """How similar a query is to ordinary text: the mean and deviation of its cosine to the
    fixed background; and how many of the store's memories are at least as close to it as
    the midpoint (its crowd)."""

    mean: float
    deviation: float
    crowd: int = 0
    near: float = 0.0  # the mean of the query's closest similarities (`nearest_mean`)

    @classmethod
    def of(cls, similarities: Any, fixed: int | None = None) -> Background:
        """`fixed`: how many of the similarities, first, are to the fixed sentences (the rest
        to a sample of the store, `recall.background_sample`); `near` reads only those."""
        return cls(
            float(similarities.mean()),
            max(float(similarities.std()), DEVIATION_FLOOR),
            near=float(nearest_mean(similarities[:fixed])),
        )

    def z(self, cosine: float) -> float:
        return (cosine - self.mean) / self.deviation

    def crowded(self, cosines: Iterable[float]) -> Background:
        """This background with the query's crowd counted among `cosines` (the candidates'):
        when many memories are about as close to a query (every turn of a conversation that
        names the person asked about), closeness tells them apart less, as a word found in
        most memories does. Memories unrelated to the query never count."""
        crowd = sum(1 for c in cosines if self.z(c) >= MEANING_MIDPOINT)
        return Background(self.mean, self.deviation, crowd, self.near)

    @property
    def discount(self) -> float:
        """Standard deviations taken off meaning for the crowd."""
        if self.crowd <= CROWD_SIZE:
            return 0.0
        return CROWD_WEIGHT * math.log2(self.crowd / CROWD_SIZE)


ORDINARY_NEIGHBOURS = 10  # background sentences whose similarity says how ordinary a text is


def nearest_mean(similarities: Any) -> Any:
    """The mean of the `ORDINARY_NEIGHBOURS` highest similarities to the background, per row
    of a matrix (a float for one row): how near ordinary text a text lies."""
    import numpy as np

    sims = np.asarray(similarities, dtype=np.float32)
    k = min(ORDINARY_NEIGHBOURS, sims.shape[-1])
    if k < sims.shape[-1]:  # the k highest, found without sorting the rest
        sims = -np.partition(-sims, k - 1, axis=-1)[..., :k]
    # Summed from the highest down, whichever way they were found.
    return -np.sort(-sims, axis=-1)[..., :k].mean(axis=-1)


def nearness(vectors: Mapping[str, Any], background: Any) -> dict[str, float]:
    """`nearest_mean` of each of these (unit) vectors against `background`, by name."""
    import numpy as np

    if not vectors:
        return {}
    near = nearest_mean(np.vstack(list(vectors.values())) @ background.T)
    return dict(zip(vectors, near.tolist(), strict=True))


def ordinariness(own: float, query: float, weight: float) -> float:
    """How much of a memory's closeness to a query is its closeness to any text: in many
    dimensions some points (a memory of general words, a chat turn) lie near everything, and
    a store of thousands holds many. A memory nearer ordinary text than the query is (`own`
    and `query`: their `nearest_mean` to the fixed background) has that difference, times
    `weight` (`recall.memory_background`), taken off its cosine; one farther gets it added.
    Both come from the fixed background: this never moves with what else the store holds."""
    return weight * (own - query)


def words_evidence(share: float, specificity: float, identifiers_found: float) -> float:
    """Evidence from words: the matched share of the query's IDF mass, squared (one word of
    several counts little), times how specific the query's words are in the store; or the
    share of the query's identifiers found verbatim."""
    share = min(1.0, max(0.0, share))
    return max(float(share**WORDS_POWER) * specificity, identifiers_found)


def relevance(meaning: float, words: float, weight_vector: float) -> float:
    """Noisy OR of the two kinds of evidence; `weight_vector` 0.5 counts both in full."""
    w_meaning = min(1.0, 2.0 * weight_vector)
    w_words = min(1.0, 2.0 * (1.0 - weight_vector))
    return 1.0 - (1.0 - w_meaning * meaning) * (1.0 - w_words * words)


class Evidence(NamedTuple):
    """`meaning`, `words_evidence` and `relevance` of many candidates (arrays, in order)."""

    meaning: Any
    words: Any
    relevance: Any


def evidence(
    background: Background,
    cosines: Any,
    ordinary: Any,
    shares: Any,
    identifiers: Any,
    specificity: float,
    weight_vector: float,
) -> Evidence:
    """The evidence of many candidates at once, from arrays of their cosine, ordinariness (the
    cosine a memory owes to lying near any text, taken off as the query's own closeness to the
    background is), share and identifiers found: meaning is the sigmoid of the z-score less
    `MEANING_MIDPOINT` and the crowd's discount; words and relevance as `words_evidence` and
    `relevance` give them one at a time. Recall reckons every candidate in one pass."""
    import numpy as np

    shares = np.clip(np.asarray(shares, dtype=np.float64), 0.0, 1.0)
    words = np.maximum(shares**WORDS_POWER * specificity, identifiers)
    ordinary = np.asarray(ordinary, dtype=np.float64)
    z = (np.asarray(cosines, dtype=np.float64) - background.mean - ordinary) / background.deviation
    x = z - MEANING_MIDPOINT - background.discount
    meaning = np.where(x < -40, 0.0, 1.0 / (1.0 + np.exp(-np.maximum(x, -40.0))))
    w_meaning = min(1.0, 2.0 * weight_vector)
    w_words = min(1.0, 2.0 * (1.0 - weight_vector))
    return Evidence(meaning, words, 1.0 - (1.0 - w_meaning * meaning) * (1.0 - w_words * words))


SUPERSEDED_BY_NEWER = 0.6  # an older memory on the subject of a newer one, for "now" questions
BEHIND_ON_SUBJECT = 0.95  # ... and it ranks behind that newer one, at most this share of it


@dataclass(slots=True)
class Candidate:
    """One memory's evidence for one query, and the factors applied to it."""

    id: str
    cosine: float = 0.0
    share: float = 0.0  # BM25 / the query's IDF mass
    identifiers: float = 0.0
    meaning: float = 0.0
    ordinary: float = 0.0  # cosine taken off meaning as the memory is near ordinary text
    words: float = 0.0
    relevance: float = 0.0
    context: float = 0.0  # relevance gained from memories written next to it
    crowd: int = 0  # candidates as close to the query as the midpoint, when they discount it
    time: float = 1.0
    kind: float = 1.0
    variety: float = 1.0  # the share kept as a later result of a sitting already shown
    strength: float = 1.0
    score: float = 0.0
    moment: datetime | None = None  # the memory's moment, once read
    notes: list[str] = field(default_factory=list)

    def explain(self) -> dict[str, object]:
        out: dict[str, object] = {
            "score": round(self.score, 4),
            "relevance": round(self.relevance, 4),
            "meaning": round(self.meaning, 4),
            "words": round(self.words, 4),
            "bm25": round(self.share, 4),
            "vector": round(self.cosine, 4),
            "time": round(self.time, 4),
            "kind": round(self.kind, 4),
            "strength": round(self.strength, 4),
        }
        if self.identifiers:
            out["identifiers"] = round(self.identifiers, 4)
        if self.ordinary:
            out["ordinary"] = round(self.ordinary, 4)
        if self.context:
            out["context"] = round(self.context, 4)
        if self.crowd:
            out["crowd"] = self.crowd
        if self.variety < 1.0:
            out["variety"] = round(self.variety, 4)
        if self.notes:
            out["notes"] = list(self.notes)
        return out


# -- context -------------------------------------------------------------------------------------

CONTEXT_TOP = 10  # the most relevant candidates whose neighbours get context
CONTEXT_SPAN = 2  # neighbours: this many written just before and just after
CONTEXT_SECONDS = 1800.0  # ... among memories whose moments are this close


def most_relevant(pool: dict[str, Candidate]) -> list[str]:
    return sorted(pool, key=lambda i: pool[i].relevance, reverse=True)[:CONTEXT_TOP]


def add_context(
    pool: dict[str, Candidate],
    neighbours: dict[str, list[str]],
    weight: float,
    tags: dict[str, frozenset[str]],
    floor: float = 0.0,
    similarity: Callable[[str, str], float] | None = None,
    least_similar: float = 0.3,
) -> None:
    """Memories written together are context for each other: a candidate written next to a
    relevant one gains `weight` times that one's relevance, as a further independent piece of
    evidence (an answer's turn next to the turn that names the question's words). Only
    candidates with evidence of their own (relevance at least `floor`) gain; context alone
    finds nothing. Context passes only between related memories: two memories less similar to
    each other than `least_similar` (by `similarity`, the cosine of their vectors), or
    whose tags say they are about different things (both tagged, no tag in common), are not
    context for each other, however close in time."""
    gains: dict[str, tuple[float, str]] = {}
    for source, near in neighbours.items():
        given = weight * pool[source].relevance
        for memory_id in near:
            ours, theirs = tags.get(source, frozenset()), tags.get(memory_id, frozenset())
            if ours and theirs and not ours & theirs:
                continue
            if (
                memory_id in pool
                and memory_id != source
                and pool[memory_id].relevance >= floor
                and given > gains.get(memory_id, (0.0, ""))[0]
                and (similarity is None or similarity(source, memory_id) >= least_similar)
            ):
                gains[memory_id] = (given, source)
    for memory_id, (given, source) in gains.items():
        c = pool[memory_id]
        c.context = given
        c.relevance = 1.0 - (1.0 - c.relevance) * (1.0 - given)
        c.notes.append(f"written next to {source[:8]}")


SITTING_SECONDS = CONTEXT_SECONDS  # memories this close in time are one sitting


def vary(order: Sequence[tuple[Candidate, datetime]], penalty: float) -> list[int]:
    """Variety in the top results: taken greedily, best first, the n-th result of one sitting
    (a memory within `SITTING_SECONDS` of one already taken) keeps (1 - penalty)^(n - 1) of its
    score, so one conversation's session does not fill the top 5 when others also match.
    Returns the new order (indexes into `order`); scores and notes are updated."""
    if penalty <= 0 or len(order) < 2:
        return list(range(len(order)))
    taken: list[int] = []
    left = list(range(len(order)))
    base = [c.score for c, _ in order]

    def seen(i: int) -> int:
        moment = order[i][1]
        return sum(
            1 for j in taken if abs((order[j][1] - moment).total_seconds()) <= SITTING_SECONDS
        )

    while left:
        kept = {i: (1.0 - penalty) ** seen(i) for i in left}
        best = max(left, key=lambda i: (base[i] * kept[i], -i))
        c = order[best][0]
        if kept[best] < 1.0:
            c.variety = kept[best]
            c.score = base[best] * kept[best]
            c.notes.append(f"result {seen(best) + 1} of one sitting")
        taken.append(best)
        left.remove(best)
    return taken
