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
    ("Fastlane lanes for the mobile app live under ios/fastlane and android/fastlane",
     "fact", ["mobile"], 30),
    ("The load-test scenarios/ folder holds one k6 script per public endpoint", "fact",
     ["perf"], 31),
    ("Prefer pytest fixtures over setUp methods", "preference", [], 90),
    ("test_upload_retry is flaky on CI because it sleeps instead of waiting for the mock "
     "server", "gotcha", ["testing"], 20),
    ("Chose PostgreSQL 16 for the orders database, with logical replication to the "
     "reporting replica", "decision", ["db"], 40),
    ("Kafka consumers retry a record three times, then park it on the dead-letter topic "
     "orders.dlq", "decision", ["kafka"], 120),
    ("The mobile app reads its API base URL from src/app.config.ts, not from .env", "fact",
     ["mobile"], 80),
    ("Release notes are written in CHANGELOG.md under an Unreleased heading", "convention", [],
     100),
]


@pytest.fixture
def store(home_store: Engram) -> dict[str, str]:
    """Text -> memory id."""
    now = ev.utc_now()
    ids = {}
    for text, kind, tags, age in STORE:
        memory = home_store.remember(text, kind=kind, tags=tags, at=now - timedelta(days=age),
                                     check_duplicates=False)
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
