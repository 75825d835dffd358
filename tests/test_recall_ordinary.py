"""How near ordinary text a memory lies, with the real model: a memory that reads like any
project's note is near many questions, so its closeness to one says less. Recall takes that off
its meaning, read from the fixed background alone, so it is the same for a memory in any store."""

from __future__ import annotations

import json

import pytest
from conftest import cli
from test_recall_calibration import CODING, chat_turns

from engram.api import Engram

QUESTIONS = [
    "where do events that keep failing end up?",
    "how do I keep the cloud tool from using the wrong location?",
    "what happens to a message that can't be processed?",
]
# Says what notes of every project say (the background holds one much like it).
GENERAL = "The API returns paginated results with a cursor."


def _ordinary(query: str) -> dict[str, float]:
    with Engram() as engram:
        hits = engram.recall(query, k=50)
    return {h.memory.content: h.evidence.ordinary for h in hits}


def test_a_memory_like_any_projects_note_owes_more_of_its_closeness_to_being_ordinary(
    home_store: Engram,
) -> None:
    for text, kind, tags in CODING:
        home_store.remember(text, kind=kind, tags=tags, check_duplicates=False)
    home_store.remember(GENERAL, kind="fact", check_duplicates=False)
    home_store.config_set("recall.min_relevance", "0")  # every candidate, however weak
    home_store.close()
    kafka = CODING[0][0]
    gaps = []
    for query in QUESTIONS:
        found = _ordinary(query)
        assert kafka in found and GENERAL in found
        gaps.append(found[GENERAL] - found[kafka])
    # Whatever the question, the ordinary note has more taken off than the specific one, and
    # by the same amount: it is a property of the two memories, not of the question.
    assert min(gaps) > 0.01
    assert max(gaps) - min(gaps) < 1e-4


def test_what_is_taken_off_does_not_move_with_the_rest_of_the_store(home_store: Engram) -> None:
    for text, kind, tags in CODING:
        home_store.remember(text, kind=kind, tags=tags, check_duplicates=False)
    home_store.close()
    before = _ordinary(QUESTIONS[0])
    with Engram() as engram:
        for text in chat_turns(200):
            engram.remember(text, kind="fact", check_duplicates=False)
    after = _ordinary(QUESTIONS[0])
    for text, _, _ in CODING:
        if text in before and text in after:
            assert after[text] == pytest.approx(before[text], abs=1e-4)
    assert CODING[0][0] in after


def test_explain_shows_it_and_the_setting_turns_it_off(home_store: Engram) -> None:
    for text, kind, tags in CODING:
        home_store.remember(text, kind=kind, tags=tags, check_duplicates=False)
    home_store.close()
    shown = cli("recall", QUESTIONS[0], "--explain", "--json")
    assert shown.exit_code == 0, shown.stderr
    first = json.loads(shown.stdout)[0]
    explained = json.dumps(first)
    assert '"ordinary"' in explained
    on = _meaning_of_first(QUESTIONS[0])
    assert cli("config", "set", "recall.memory_background", "0").exit_code == 0
    assert all(value == 0.0 for value in _ordinary(QUESTIONS[0]).values())
    off = _meaning_of_first(QUESTIONS[0])
    assert on[0] == off[0] and on[1] != pytest.approx(off[1], abs=1e-6)


def _meaning_of_first(query: str) -> tuple[str, float]:
    with Engram() as engram:
        hit = engram.recall(query, k=1)[0]
    return hit.memory.content, hit.evidence.meaning


def test_an_edited_memory_is_as_ordinary_as_its_new_text_in_a_long_lived_process(
    home_store: Engram,
) -> None:
    """How ordinary a stored vector is, is worked out once per process; a memory whose text
    changes (here through `update`, in the same process, after the vector index was saved)
    is judged by its new text, as a new process judges it."""
    for text, kind, tags in CODING:
        home_store.remember(text, kind=kind, tags=tags, check_duplicates=False)
    general = home_store.remember(GENERAL, kind="fact", check_duplicates=False).id
    home_store.config_set("recall.min_relevance", "0")
    home_store.reindex()  # the vector index saved: the general note's vector is in it
    query = "what does the API give back, and how do I get the next page?"

    def ordinary(engram: Engram) -> float:
        return next(
            h for h in engram.recall(query, k=50) if h.memory.id == general
        ).evidence.ordinary

    before = ordinary(home_store)
    home_store.update(general, content="Kafka consumer lag alarms page the on-call at 5000.")
    after = ordinary(home_store)
    home_store.close()
    with Engram() as fresh:
        assert ordinary(fresh) == pytest.approx(after, abs=1e-6)
    assert after < before - 0.01, (before, after)
