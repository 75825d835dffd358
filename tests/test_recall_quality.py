"""What a user notices about recall, with the real model: a question in other words finds its
memory first, an incidental common word loses to a match in meaning, an identifier wins
outright, a question with no answer scores low, and time in the question counts."""

from __future__ import annotations

from datetime import timedelta

import pytest
from conftest import cli

from engram.api import Engram
from engram.search import ranking
from engram.search.hits import Hit
from engram.storage import events as ev

# A small project store: (text, kind, tags, age in days).
STORE = [
    ("Always run database migrations before starting the web server", "procedure", [], 30),
    ("Prefer pytest fixtures over setUp methods", "preference", [], 90),
    ("The CI pipeline posts a message to #builds when a deploy finishes", "fact", ["ci"], 60),
    (
        "Kafka consumers retry a record three times, then park it on the dead-letter topic "
        "orders.dlq for a person to look at",
        "decision",
        ["kafka"],
        120,
    ),
    (
        "Set AWS_REGION=eu-west-1 in the shell before running terraform plan, or the provider "
        "picks us-east-1",
        "gotcha",
        ["terraform"],
        45,
    ),
    (
        "test_upload_retry is flaky on CI because it sleeps instead of waiting for the mock server",
        "gotcha",
        ["testing"],
        20,
    ),
    (
        "Use the upstream gocql driver with token-aware routing for ScyllaDB",
        "decision",
        ["scylladb"],
        200,
    ),
    (
        "Switched the ScyllaDB driver to the scylladb/gocql fork for shard-aware routing",
        "decision",
        ["scylladb"],
        20,
    ),
    (
        "The nightly export crashed with an out-of-memory error: it loaded every invoice at once; "
        "it now streams them in pages of 500",
        "failure",
        ["billing"],
        6,
    ),
    (
        "The search page timed out because the products table had no index on sku",
        "failure",
        ["search"],
        150,
    ),
    (
        "Release notes are written in CHANGELOG.md under an Unreleased heading",
        "convention",
        [],
        100,
    ),
    (
        "The mobile app reads its API base URL from app.config.ts, not from .env",
        "fact",
        ["mobile"],
        80,
    ),
]


@pytest.fixture
def store(home_store: Engram) -> dict[str, str]:
    """Text -> memory id."""
    now = ev.utc_now()
    ids = {}
    for text, kind, tags, age in STORE:
        memory = home_store.remember(
            text, kind=kind, tags=tags, at=now - timedelta(days=age), check_duplicates=False
        )
        ids[text] = memory.id
    home_store.close()
    return ids


def first(query: str) -> tuple[str, float]:
    with Engram() as engram:
        hits = engram.recall(query, k=5)
    return (hits[0].memory.content, hits[0].relevance) if hits else ("", 0.0)


def test_a_paraphrase_is_found_first(store: dict[str, str]) -> None:
    assert first("where do events that keep failing end up?")[0].startswith("Kafka consumers")
    assert first("why was looking up goods by their stock code so slow?")[0].startswith(
        "The search page timed out"
    )
    assert first("how do I keep the cloud tool from using the wrong location?")[0].startswith(
        "Set AWS_REGION"
    )


def test_five_memories_and_a_question_in_other_words(home_store: Engram) -> None:
    for text in (
        "Always run database migrations before starting the web server",
        "Prefer pytest fixtures over setUp methods",
        "Use Postgres for the job queue",
        "The CI runs on GitHub Actions with Python 3.11 and 3.12",
        "Deploys go out from the release branch every Tuesday",
    ):
        home_store.remember(text, check_duplicates=False)
    home_store.close()
    content, relevance = first("what must happen before the app boots")
    assert content.startswith("Always run database migrations") and relevance > 0


def test_an_incidental_common_word_loses_to_a_match_in_meaning(store: dict[str, str]) -> None:
    # "message" is in the CI memory only; the question means the dead-letter topic.
    with Engram() as engram:
        hits = engram.recall("where does a message go after it fails to be processed repeatedly?")
    assert hits[0].memory.content.startswith("Kafka consumers")
    ci = next(h for h in hits if h.memory.content.startswith("The CI pipeline"))
    assert ci.bm25 > 0 and ci.score < hits[0].score


def test_an_identifier_wins_outright(store: dict[str, str]) -> None:
    for identifier, start in (
        ("AWS_REGION", "Set AWS_REGION"),
        ("test_upload_retry", "test_upload_retry is flaky"),
        ("app.config.ts", "The mobile app reads"),
    ):
        content, relevance = first(identifier)
        assert content.startswith(start), identifier
        assert relevance > 0.9, identifier


def test_a_question_with_no_answer_scores_low(store: dict[str, str]) -> None:
    absent = [
        "which font does the marketing site use?",
        "how do we pair Bluetooth heart-rate straps with the watch app?",
        "what is the on-call escalation policy at night?",
    ]
    answered = [
        "why was looking up goods by their stock code so slow?",
        "where do events that keep failing end up?",
        "how do I like tests written",
    ]
    low = [first(q)[1] for q in absent]
    high = [first(q)[1] for q in answered]
    assert max(low) < 0.5 and sum(low) / len(low) < sum(high) / len(high) / 2, (low, high)


def test_stop_words_alone_find_nothing(store: dict[str, str]) -> None:
    assert first("the")[0] == "" and first("for")[0] == ""


def test_a_newer_decision_on_the_same_subject_ranks_first_for_now_questions(
    store: dict[str, str],
) -> None:
    assert first("which ScyllaDB driver do we use now?")[0].startswith("Switched")
    assert first("how was the ScyllaDB driver set up originally?")[0].startswith(
        "Use the upstream gocql"
    )


def test_time_words_in_the_question_act_on_the_memory_date(store: dict[str, str]) -> None:
    assert first("what failed last week?")[0].startswith("The nightly export crashed")
    with Engram() as engram:
        hit = engram.recall("what failed last week?")[0]
    assert hit.explain()["time"] == 1.0


def test_the_getting_started_example_works_as_written(home_store: Engram) -> None:
    """docs/getting-started.md, line for line."""
    home_store.close()
    cli("remember", "Prefer pytest fixtures over setUp methods", "--kind", "preference")
    result = cli("recall", "how do I like tests written")
    assert "Prefer pytest fixtures over setUp methods" in result.output, result.output


def test_explain_shows_each_part(store: dict[str, str]) -> None:
    result = cli("recall", "AWS_REGION", "--explain")
    for part in ("score=", "relevance=", "meaning=", "words=", "time=", "kind=", "strength="):
        assert part in result.output


# A conversation's turns: the third answers a question about the first in other words.
BOOK_CLUB = [
    "Ana: I finally went to the book club at the library on Tuesday",
    "Ben: Nice! What did the group pick?",
    "Ana: A funny science fiction classic about a towel and the number 42",
    "Ben: My brother is moving to Lisbon next month",
    "Ana: I bought a new bike, a blue one with a basket",
    "Ben: The plumber finally fixed the kitchen sink",
    "Ana: I am training for a half marathon in the spring",
    "Ben: We adopted a cat from the shelter, she is called Miso",
    "Ana: My favourite film this year was a documentary about octopuses",
    "Ben: I read an article about the history of maps",
    "Ana: The new coffee place downtown has great pastries",
    "Ben: I started learning to play the piano",
]


def test_a_turn_next_to_the_one_that_names_the_question_is_found(home_store: Engram) -> None:
    """Memories written together are context for each other: the answer ("a science fiction
    classic about a towel") shares nothing with the question; the turns before it name the book
    club. Without context, turns about other things score as high as the answer."""
    moment = ev.utc_now() - timedelta(days=3)
    turns = BOOK_CLUB
    ids = [home_store.remember(t, at=moment, check_duplicates=False).id for t in turns]
    home_store.close()
    question = "which book did the reading group choose?"

    def margin(engram: Engram) -> tuple[float, float]:
        scores = {h.memory.id: h.score for h in engram.recall(question, k=len(turns))}
        unrelated = max(scores.get(i, 0.0) for i in ids[3:])
        return scores.get(ids[2], 0.0) - unrelated, scores.get(ids[2], 0.0)

    with Engram() as engram:
        (with_context, _), hit = margin(engram), engram.recall(question, k=3)
        engram.config_set("recall.context", "0")
        without, _ = margin(engram)
    assert ids[2] in [h.memory.id for h in hit]
    assert with_context > 0.1 and with_context > without + 0.1, (with_context, without)
    assert next(h for h in hit if h.memory.id == ids[2]).explain()["context"] > 0


@pytest.mark.parametrize("most_relevant", [ranking.CONTEXT_TOP, 1])
def test_a_turn_too_weak_on_its_own_is_still_recalled_through_its_neighbour(
    home_store: Engram, monkeypatch: pytest.MonkeyPatch, most_relevant: int
) -> None:
    """Recall reads only the candidates relevant enough to be kept, and those written next to
    the most relevant: a turn below `recall.min_relevance` on its own evidence is still found
    when the turn next to it lends it enough (with one most relevant, enough of them are
    relevant on their own, and the neighbour is read for its neighbour alone)."""
    monkeypatch.setattr(ranking, "CONTEXT_TOP", most_relevant)
    moment = ev.utc_now() - timedelta(days=3)
    ids = [home_store.remember(t, at=moment, check_duplicates=False).id for t in BOOK_CLUB]
    question = "which book did the reading group choose?"
    home_store.config_set("recall.min_relevance", "0")

    def answer(engram: Engram) -> Hit | None:
        return next((h for h in engram.recall(question, k=10) if h.memory.id == ids[2]), None)

    lent = answer(home_store)
    home_store.config_set("recall.context", "0")
    alone = answer(home_store)
    assert lent is not None and alone is not None
    on, off = lent.evidence.relevance, alone.evidence.relevance
    assert on > off + 0.05, (on, off)
    home_store.config_set("recall.min_relevance", f"{(on + off) / 2:.4f}")
    assert answer(home_store) is None  # too weak on its own
    home_store.config_set("recall.context", "0.5")
    assert answer(home_store) is not None


def test_context_leaves_independent_memories_alone(store: dict[str, str]) -> None:
    """The store's memories were written one after another, seconds apart, about different
    things (different tags): context moves none of them."""
    queries = [
        "where do events that keep failing end up?",
        "AWS_REGION",
        "why was looking up goods by their stock code so slow?",
    ]
    with Engram() as engram:
        on = [[h.memory.id for h in engram.recall(q)] for q in queries]
        engram.config_set("recall.context", "0")
        off = [[h.memory.id for h in engram.recall(q)] for q in queries]
    assert on == off


def test_yesterday_in_a_memory_is_the_day_before_its_own_date(home_store: Engram) -> None:
    went = home_store.remember(
        "Caroline: I went to a support group yesterday, it was moving",
        at="2023-05-08",
        check_duplicates=False,
    )
    home_store.remember(
        "Caroline: I painted a sunrise over the lake", at="2023-05-09", check_duplicates=False
    )
    home_store.close()
    with Engram() as engram:
        hits = engram.recall("what happened on 7 May 2023?", k=2, include_decayed=True)
    assert hits[0].memory.id == went.id
