"""What a user notices of how recall reads a question, with the real model: a platform's name is
a word, not a code identifier; a one-word question finds its memory; time and tense said in
other words than the usual ones still count."""

from __future__ import annotations

from datetime import timedelta

import pytest

from engram.api import Engram
from engram.storage import events as ev

# (text, kind, tags, age in days): written a day apart, so none is context for another.
STORE = [
    (
        "Fastlane lanes for the mobile app live under ios/fastlane and android/fastlane",
        "fact",
        ["mobile"],
        30,
    ),
    (
        "The load-test scenarios/ folder holds one k6 script per public endpoint",
        "fact",
        ["perf"],
        31,
    ),
    ("Prefer pytest fixtures over setUp methods", "preference", [], 90),
    (
        "test_upload_retry is flaky on CI because it sleeps instead of waiting for the mock server",
        "gotcha",
        ["testing"],
        20,
    ),
    (
        "Chose PostgreSQL 16 for the orders database, with logical replication to the "
        "reporting replica",
        "decision",
        ["db"],
        40,
    ),
    (
        "Kafka consumers retry a record three times, then park it on the dead-letter topic "
        "orders.dlq",
        "decision",
        ["kafka"],
        120,
    ),
    (
        "The mobile app reads its API base URL from src/app.config.ts, not from .env",
        "fact",
        ["mobile"],
        80,
    ),
    (
        "Release notes are written in CHANGELOG.md under an Unreleased heading",
        "convention",
        [],
        100,
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


def recall(query: str, k: int = 5) -> list[tuple[str, float, dict[str, object]]]:
    with Engram() as engram:
        return [(h.memory.content, h.score, h.explain()) for h in engram.recall(query, k=k)]


def test_a_platform_name_is_a_word_not_an_identifier(store: dict[str, str]) -> None:
    """A question about something never stored that names iOS does not score high on the
    memory that mentions `ios/` (as an identifier matched inside words it scored 0.98)."""
    hits = recall("which iOS push notification provider do we use?")
    assert all("identifiers" not in explain for _, _, explain in hits)
    assert max(score for _, score, _ in hits) < 0.5, hits
    # A path is still an identifier, and is found as a path segment.
    content, score, explain = recall("app.config.ts")[0]
    assert content.startswith("The mobile app reads") and explain["identifiers"] == 1.0
    assert score > 0.9


def test_a_one_word_query_finds_the_memory_that_names_it_in_a_name(store: dict[str, str]) -> None:
    """`tests` shares no word with "Prefer pytest fixtures" for BM25, and the model puts them
    at cosine 0.1; `postgres` is not a word of "Chose PostgreSQL 16". Both are pieces of a
    name in the memory; `latest` or `contest` would not be."""
    found = {content: score for content, score, _ in recall("tests")}
    assert found.get("Prefer pytest fixtures over setUp methods", 0.0) > 0.3, found
    assert recall("postgres")[0][0].startswith("Chose PostgreSQL 16")
    with Engram() as engram:
        hit = next(h for h in engram.recall("tests") if h.memory.content.startswith("Prefer"))
    assert any("pytest" in note for note in hit.explain()["notes"])  # type: ignore[union-attr]


def test_a_word_inside_an_ordinary_word_is_not_a_piece(home_store: Engram) -> None:
    home_store.remember("The latest contest results are on the wiki", check_duplicates=False)
    home_store.remember(
        "Prefer pytest fixtures over setUp methods",
        kind="preference",
        at=ev.utc_now() - timedelta(days=3),
        check_duplicates=False,
    )
    home_store.close()
    hits = recall("tests")
    assert hits[0][0].startswith("Prefer pytest"), hits
    # "latest" and "contest" hold the letters, not the word: no evidence from words, and what
    # the model sees in it (cosine 0.26) ranks it under the memory that names pytest.
    for content, score, explained in hits:
        if content.startswith("The latest"):
            assert explained["words"] == 0.0 and not explained.get("notes"), explained
            assert score < hits[0][1] / 1.5, hits


@pytest.mark.parametrize(
    "question",
    [
        "what did we use for the driver before the upgrade?",
        "back when we started, which ScyllaDB driver was it?",
        "which ScyllaDB driver did we get rid of?",
    ],
)
def test_past_phrasings_put_the_older_memory_first(home_store: Engram, question: str) -> None:
    now = ev.utc_now()
    home_store.remember(
        "Use the upstream gocql driver with token-aware routing for ScyllaDB",
        kind="decision",
        tags=["scylladb"],
        at=now - timedelta(days=200),
        check_duplicates=False,
    )
    home_store.remember(
        "Switched the ScyllaDB driver to the scylladb/gocql fork for shard-aware routing",
        kind="decision",
        tags=["scylladb"],
        at=now - timedelta(days=20),
        check_duplicates=False,
    )
    home_store.close()
    assert recall(question)[0][0].startswith("Use the upstream gocql"), recall(question)


def test_current_phrasings_put_the_newer_memory_first(home_store: Engram) -> None:
    now = ev.utc_now()
    home_store.remember(
        "Use the upstream gocql driver with token-aware routing for ScyllaDB",
        kind="decision",
        tags=["scylladb"],
        at=now - timedelta(days=20),
        check_duplicates=False,
    )
    home_store.remember(
        "Switched the ScyllaDB driver to the scylladb/gocql fork for shard-aware routing",
        kind="decision",
        tags=["scylladb"],
        at=now - timedelta(days=200),
        check_duplicates=False,
    )
    home_store.close()
    # The newer memory here is the upstream one: the question says "the old way", yet asks
    # what replaced it.
    for question in (
        "what replaced the old ScyllaDB driver setup?",
        "which ScyllaDB driver are we on as things stand?",
    ):
        assert recall(question)[0][0].startswith("Use the upstream gocql"), question


CLUSTER_NOTES = [
    "The staging cluster runs three worker nodes in one availability zone",
    "Worker nodes of the cluster boot from a hardened Ubuntu 22.04 image",
    "Cluster nodes are drained before a Kubernetes version upgrade",
    "The GPU node pool of the cluster is tainted so only training jobs land there",
    "Each cluster node ships its logs to Loki through a DaemonSet",
    "Spot nodes in the cluster get a two-minute interruption notice",
    "Node pools are sized so that the cluster survives losing one zone",
    "The cluster's nodes pull images through a registry mirror",
    "Kubelet on the cluster nodes reserves 10% of memory for the system",
    "New cluster nodes join through the bootstrap token in the vault",
]


def test_the_newer_memory_comes_first_even_when_the_older_one_holds_every_word(
    home_store: Engram,
) -> None:
    """A "now" question whose words are all in the older memory: that memory steps back
    behind the newer one on its subject, not merely down a little (at 3,000 memories the old
    one's full word match kept it first)."""
    now = ev.utc_now()
    home_store.remember(
        "Node scaling uses cluster-autoscaler: it scales the cluster nodes of each managed "
        "node group",
        kind="decision",
        tags=["autoscaling"],
        at=now - timedelta(days=150),
        check_duplicates=False,
    )
    home_store.remember(
        "Replaced cluster-autoscaler with Karpenter, which provisions right-sized instances",
        kind="decision",
        tags=["autoscaling"],
        at=now - timedelta(days=30),
        check_duplicates=False,
    )
    # Other notes about the cluster's nodes, older still: a crowd as close to the question,
    # which discounts meaning (the newer memory's evidence) but not the older one's words.
    for n, text in enumerate(CLUSTER_NOTES):
        home_store.remember(
            text, kind="fact", at=now - timedelta(days=300 + n), check_duplicates=False
        )
    home_store.close()
    hits = recall("what scales the cluster nodes right now?")
    assert hits[0][0].startswith("Replaced cluster-autoscaler"), hits
    assert hits[1][1] < hits[0][1]
    assert any("newer memory on this subject" in n for n in hits[1][2].get("notes", [])), hits
