"""A content word replaced by another changes the claim: such a memory is never folded into the
one it contradicts, while rewordings (words added, dropped or moved, forms of one word) still
fold. Measured on a labelled set (`tests/corpus/changed_claims.json`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import cli

from engram.api import Engram
from engram.search.claims import replaced, same_word
from engram.search.neardup import differences

CORPUS = json.loads((Path(__file__).parent / "corpus" / "changed_claims.json").read_text())
CHANGED = [tuple(pair) for pair in CORPUS["changed"]]
REWORDED = [tuple(pair) for pair in CORPUS["reworded"]]
DUPLICATE = 0.92  # remember.duplicate_similarity's default


def test_the_set_has_enough_pairs_of_each_kind() -> None:
    assert len(CHANGED) >= 25 and len(REWORDED) >= 25


@pytest.mark.parametrize("pair", CHANGED, ids=lambda p: p[1][:40])
def test_a_replaced_content_word_is_a_difference(pair: tuple[str, str]) -> None:
    old, new = pair
    assert [d.what for d in differences(old, new)] == ["word"]
    assert [d.what for d in differences(new, old)] == ["word"]


@pytest.mark.parametrize("pair", REWORDED, ids=lambda p: p[1][:40])
def test_a_rewording_replaces_no_content_word(pair: tuple[str, str]) -> None:
    old, new = pair
    assert differences(old, new) == () and differences(new, old) == ()


def test_the_difference_names_the_replaced_words() -> None:
    [found] = differences(
        "The legacy billing API is supported until further notice",
        "The legacy billing API is deprecated until further notice",
    )
    assert str(found) == "a word: supported -> deprecated"
    [found] = differences("The export job is working correctly", "The export job is broken")
    assert str(found) == "a word: working, correctly -> broken"


def test_forms_of_one_word_are_one_word() -> None:
    for a, b in [
        ("use", "using"),
        ("use", "used"),
        ("cache", "caching"),
        ("commit", "committing"),
        ("stop", "stopped"),
        ("retry", "retries"),
        ("retry", "retried"),
        ("test", "tests"),
        ("process", "processes"),
        ("deploy", "deployment"),
        ("indent", "indentation"),
        ("run", "ran"),
        ("write", "written"),
    ]:
        assert same_word(a, b) and same_word(b, a), (a, b)
    for a, b in [
        ("likes", "dislikes"),
        ("supported", "unsupported"),
        ("use", "user"),
        ("build", "builder"),
        ("sqlite", "postgres"),
        ("cat", "car"),
    ]:
        assert not same_word(a, b), (a, b)


def test_only_added_or_only_dropped_words_are_no_replacement() -> None:
    assert replaced(["run", "the", "linter"], ["always", "run", "the", "linter"]) == ((), ())
    assert replaced(["always", "run", "linter"], ["run", "linter"]) == ((), ())
    # Each word answers for one word: a second "merge" in place of "squash" is a replacement.
    assert replaced(
        ["merge", "pull", "requests", "squash", "commit"],
        ["merge", "pull", "requests", "merge", "commit"],
    ) == (("squash",), ("merge",))


def test_the_labelled_set_through_remember(home_store: Engram) -> None:
    """Every changed claim is added (and reported against the first memory when as close as
    `remember.related_similarity`); every rewording
    the model scores as a near-duplicate folds (the few it scores lower are the model's
    threshold, not the comparison, and are added as related)."""
    home_store.config_set("commit.auto", "false")
    engram = Engram()
    changed_kept, reworded_folded, model_missed = 0, 0, []
    for label, pairs in (("changed", CHANGED), ("reworded", REWORDED)):
        for old, new in pairs:
            first = engram.remember(old)
            second = engram.remember(new)
            if label == "changed":
                assert not second.duplicate, (old, new)
                if first.id in [m.id for m, _ in second.related]:  # as close as related
                    assert [d.what for d in second.differs_from(first.id)] == ["word"]
                changed_kept += 1
            elif second.duplicate:
                assert second.id == first.id
                reworded_folded += 1
            else:
                [(_, similarity)] = [(m, s) for m, s in second.related if m.id == first.id]
                assert similarity < DUPLICATE and not second.differs_from(first.id), (old, new)
                model_missed.append(new)
            for memory in {first.id, second.id}:
                engram.forget(memory, reason="next pair")
    assert changed_kept == len(CHANGED)
    assert reworded_folded >= len(REWORDED) - 3, model_missed


def test_an_opposite_statement_is_added_and_both_are_recalled(home_store: Engram) -> None:
    first = cli("remember", "The legacy billing API is supported until further notice")
    old = first.output.split()[1]
    done = cli("remember", "The legacy billing API is deprecated until further notice")
    assert done.output.startswith("remembered ")
    assert f"the new text differs from {old} in a word: supported -> deprecated" in done.output
    assert f"engram remember ... --supersedes {old}" in done.output
    contents = {h.memory.content for h in Engram().recall("billing API deprecated", k=2)}
    assert "The legacy billing API is deprecated until further notice" in contents


def test_consolidate_does_not_merge_a_liked_and_a_disliked_thing(home_store: Engram) -> None:
    likes = home_store.remember("The user likes terse commit messages", check_duplicates=False)
    dislikes = home_store.remember(
        "The user dislikes terse commit messages", check_duplicates=False
    )
    again = home_store.remember("The user likes terse commit messages.", check_duplicates=False)
    plans = Engram().consolidate()  # at the default consolidate.similarity, 0.90
    assert [sorted(m.id for m in p.members) for p in plans] == [sorted([likes.id, again.id])]
    assert dislikes.id not in {m.id for p in plans for m in p.members}
