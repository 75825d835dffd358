"""Scores that keep their meaning whatever else the store holds, with the real model: the same
question and memory score the same before and after thousands of unrelated memories arrive, the
background's vectors come with the model rather than from the store, and memories written
together lend each other nothing unless each has evidence of its own."""

from __future__ import annotations

import itertools
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from engram.api import Engram
from engram.search import background
from engram.storage import events as ev

CODING = [
    (
        "Kafka consumers retry a record three times, then park it on the dead-letter topic "
        "orders.dlq for a person to look at",
        "decision",
        ["kafka"],
    ),
    (
        "Set AWS_REGION=eu-west-1 in the shell before running terraform plan, or the provider "
        "picks us-east-1",
        "gotcha",
        ["terraform"],
    ),
    (
        "The search page timed out because the products table had no index on sku",
        "failure",
        ["search"],
    ),
    ("Prefer pytest fixtures over setUp methods", "preference", []),
    ("Release notes are written in CHANGELOG.md under an Unreleased heading", "convention", []),
]
PARAPHRASE = "where do events that keep failing end up?"
OTHER_PARAPHRASE = "how do I keep the cloud tool from using the wrong location?"

_NAMES = ["Ana", "Ben", "Chloe", "Dev", "Elif", "Femi", "Greta", "Hugo", "Iris", "Jonas"]
_DID = [
    "went hiking",
    "baked bread",
    "painted the fence",
    "visited my aunt",
    "watched a film",
    "played chess",
    "planted roses",
    "fixed my bike",
    "tried a new cafe",
    "went swimming",
    "cleaned the attic",
    "wrote a poem",
    "called my brother",
    "bought new shoes",
    "learned a song",
    "walked the dog",
    "made soup",
    "read a novel",
    "went to a concert",
    "sorted old photos",
]
_WHEN = [
    "yesterday",
    "this morning",
    "last weekend",
    "on Friday",
    "after work",
    "with friends",
    "in the rain",
    "for the first time",
    "again",
    "with my kids",
    "before lunch",
    "at the lake",
    "downtown",
    "on my day off",
    "late at night",
]


def chat_turns(count: int) -> list[str]:
    """Chat-like personal turns, all different, about nothing a coding question asks."""
    turns = (
        f"{name}: I {did} {when} and it was {feeling}."
        for name, did, when, feeling in itertools.product(
            _NAMES, _DID, _WHEN, ["lovely", "tiring", "fun", "great"]
        )
    )
    return list(itertools.islice(turns, count))


def ask(query: str, k: int = 5) -> list[Any]:
    with Engram() as engram:
        return engram.recall(query, k=k)


@pytest.mark.slow
def test_a_score_does_not_move_when_thousands_of_unrelated_memories_arrive(
    home_store: Engram,
) -> None:
    for text, kind, tags in CODING:
        home_store.remember(text, kind=kind, tags=tags, check_duplicates=False)
    home_store.close()
    before = ask(PARAPHRASE)
    assert before[0].memory.content.startswith("Kafka consumers")
    other_before = ask(OTHER_PARAPHRASE)

    with Engram() as engram:
        start = ev.utc_now() - timedelta(days=40)
        for n, text in enumerate(chat_turns(3000)):
            engram.remember(
                text, kind="fact", at=start + timedelta(minutes=n), check_duplicates=False
            )
    after = ask(PARAPHRASE)
    assert after[0].memory.content.startswith("Kafka consumers")
    # The same query and memory: the same meaning and score (the store's words weigh a
    # little differently with 3,000 more memories; the meaning not at all).
    assert after[0].evidence.meaning == pytest.approx(before[0].evidence.meaning, abs=0.01)
    assert after[0].score == pytest.approx(before[0].score, abs=0.03)
    # So does another question's, found by meaning alone.
    other = ask(OTHER_PARAPHRASE)
    assert other[0].memory.content.startswith("Set AWS_REGION")
    assert other[0].evidence.meaning == pytest.approx(other_before[0].evidence.meaning, abs=0.01)


def test_the_background_ships_with_the_built_in_model() -> None:
    from engram.base.models import BUILTIN
    from engram.search.embed import load_embedder

    embedder = load_embedder(BUILTIN)
    lines = background.sentences()
    shipped = background._shipped(embedder.identity, background.digest(lines))
    assert shipped is not None, "background.txt changed: run python -m engram.search.background"
    assert shipped.shape == (len(lines), embedder.dim) and len(lines) >= 250
    fresh = embedder.embed(lines[:3] + lines[-3:])
    agreement = np.sum(fresh * shipped[[0, 1, 2, -3, -2, -1]], axis=1)
    assert agreement.min() > 0.999


class _CountingModel:
    """A model of its own identity that counts what it is asked to embed."""

    def __init__(self) -> None:
        self.identity = "counting-model@test"
        self.dim = 8
        self.embedded = 0

    def embed(self, texts: list[str]) -> np.ndarray:
        self.embedded += len(texts)
        rng = np.random.default_rng(len(texts))
        rows = rng.normal(size=(len(texts), self.dim)).astype(np.float32)
        out: np.ndarray = rows / np.linalg.norm(rows, axis=1, keepdims=True)
        return out


def test_another_models_background_is_embedded_once_per_machine(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ENGRAM_MODEL_CACHE", str(tmp_path / "models"))
    monkeypatch.setattr(background, "_memo", {})
    model = _CountingModel()
    first = background.vectors(model)  # type: ignore[arg-type]
    assert model.embedded == len(background.sentences())
    monkeypatch.setattr(background, "_memo", {})  # a new process
    again = background.vectors(model)  # type: ignore[arg-type]
    assert model.embedded == len(background.sentences())  # read from the model cache
    assert np.array_equal(first, again)
    # A damaged cache file is embedded again, not trusted.
    (cached,) = (tmp_path / "models" / "background").iterdir()
    cached.write_bytes(b"not an array")
    monkeypatch.setattr(background, "_memo", {})
    background.vectors(model)  # type: ignore[arg-type]
    assert model.embedded == 2 * len(background.sentences())


def test_memories_written_together_about_other_things_do_not_lift_each_other(
    home_store: Engram,
) -> None:
    # One sitting, a minute apart, no tags: a Postgres decision and notes about other things.
    moment = ev.utc_now() - timedelta(days=2)
    notes = [
        ("Use Postgres for the job queue, with SKIP LOCKED to hand out jobs", "decision"),
        (CODING[0][0], "fact"),
        ("The CI pipeline posts a message to #builds when a deploy finishes", "fact"),
        ("timing probe memory", "note"),
    ]
    for n, (text, kind) in enumerate(notes):
        home_store.remember(
            text, kind=kind, at=moment + timedelta(minutes=n), check_duplicates=False
        )
    home_store.close()
    hits = ask("postgres", k=5)
    assert hits and hits[0].memory.content.startswith("Use Postgres")
    for hit in hits[1:]:
        assert hit.evidence.context == 0.0, hit.explain()
        assert hit.score < 0.2, (hit.memory.content, hit.explain())


def test_one_sitting_need_not_fill_the_top_results(home_store: Engram) -> None:
    sitting = ev.utc_now() - timedelta(days=3)
    for n, text in enumerate(
        [
            "Nina: We hiked up to the lake above the village on Saturday",
            "Nina: The hike to the lake took us four hours with the kids",
            "Nina: At the lake we swam, the water was freezing after the hike",
            "Nina: Coming down from the lake hike we got caught in the rain",
            "Nina: Next time we hike to the lake we will start earlier",
        ]
    ):
        home_store.remember(
            text, kind="fact", at=sitting + timedelta(minutes=n), check_duplicates=False
        )
    other = home_store.remember(
        "Nina: Last spring we hiked around a lake in the mountains",
        kind="fact",
        at=sitting - timedelta(days=200),
        check_duplicates=False,
    )
    home_store.close()
    query = "when did Nina hike to the lake?"
    assert other.id not in [h.memory.id for h in ask(query, k=5)]
    with Engram() as engram:
        engram.config_set("recall.sitting_penalty", "0.3")
        hits = engram.recall(query, k=5)
    assert other.id in [h.memory.id for h in hits]
    later = [h for h in hits if h.memory.id != other.id][1:]
    assert later and all(h.evidence.variety < 1.0 for h in later)
    assert any("of one sitting" in note for h in later for note in h.evidence.notes)
