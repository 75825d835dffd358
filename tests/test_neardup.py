"""Near-duplicates fold only when they say the same facts: corrections are kept and reported."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import cli

from engram.api import Engram
from engram.base.errors import SecretError
from engram.domain.duplicates import normalised as _normalised
from engram.search.neardup import Difference, differences
from engram.storage import events as ev

CORPUS = json.loads((Path(__file__).parent / "corpus" / "near_duplicates.json").read_text())
PAIRS = CORPUS["pairs"]
MUST_NOT_FOLD = [p for p in PAIRS if not p["fold"]]
SHOULD_FOLD = [p for p in PAIRS if p["fold"]]
DUPLICATE = 0.92  # remember.duplicate_similarity's default


def kinds(old: str, new: str) -> set[str]:
    return {d.what for d in differences(old, new)}


# -- the comparison alone ------------------------------------------------------------------------


def test_the_corpus_has_both_kinds_of_pairs() -> None:
    assert len(MUST_NOT_FOLD) >= 50 and len(SHOULD_FOLD) >= 40


@pytest.mark.parametrize("pair", MUST_NOT_FOLD, ids=lambda p: p["new"][:40])
def test_a_changed_fact_is_a_difference_of_its_kind(pair: dict) -> None:
    assert pair["change"] in kinds(pair["old"], pair["new"])
    assert pair["change"] in kinds(pair["new"], pair["old"])  # and the other way round


@pytest.mark.parametrize("pair", SHOULD_FOLD, ids=lambda p: p["new"][:40])
def test_a_rewording_with_the_same_facts_is_no_difference(pair: dict) -> None:
    assert differences(pair["old"], pair["new"]) == ()
    assert differences(pair["new"], pair["old"]) == ()


def test_a_difference_says_what_and_both_values() -> None:
    [found] = differences(
        "The API rate limit is 100 requests per second",
        "The API rate limit is 1000 requests per second",
    )
    assert found == Difference("number", ("100",), ("1000",))
    assert str(found) == "a number: 100 -> 1000"
    [added] = differences("Push to main", "Do not push to main")
    assert str(added) == "a negation: (none) -> not"


def test_numbers_are_compared_by_value_and_unit_not_spelling() -> None:
    assert (
        differences("Retry three times, then wait 30 seconds", "Retry 3 times, then wait 30s") == ()
    )
    assert differences("The cache holds 10,000 entries", "The cache holds 10k entries") == ()
    assert differences("Run it with two hundred users", "Run it with 200 users") == ()
    assert kinds("Wait 30 seconds", "Wait 30 minutes") == {"unit"}
    assert kinds("Wait 30 seconds", "Wait 45 seconds") == {"number"}
    assert kinds("Use Postgres 15", "Use Postgres 16") == {"version"}
    assert kinds("Pin httpx to 0.27.0", "Pin httpx to 0.28.1") == {"version"}


def test_facts_inside_a_url_a_date_or_a_version_are_not_counted_twice() -> None:
    assert [
        str(d)
        for d in differences("See https://example.com/v1/docs", "See https://example.com/v2/docs")
    ] == ["a URL: https://example.com/v1/docs -> https://example.com/v2/docs"]
    assert kinds("Released on 2026-03-01", "Released on 2026-03-02") == {"date"}


def test_identifiers_paths_and_flags_keep_their_spelling() -> None:
    assert kinds("Call load_settings()", "Call load_config()") == {"identifier"}
    assert kinds("The hook is useSession", "The hook is useAuth") == {"identifier"}
    assert kinds("Set DATABASE_URL first", "Set DB_URL first") == {"identifier"}
    assert kinds("Run with --no-cov", "Run with --cov") == {"identifier"}
    assert kinds("Edit src/app/main.py", "Edit src/app/__main__.py") == {"path"}
    assert kinds("Read settings.toml", "Read settings.yaml") == {"path"}
    # Quoting, code spans and a trailing slash are formatting, not a different path.
    assert (
        differences("Migrations live in db/migrations", "Migrations live in `db/migrations/`") == ()
    )
    assert differences("Re-run flaky tests once", "Rerun flaky tests once") == ()


def test_a_flag_holding_no_is_not_a_negation() -> None:
    assert (
        differences(
            "Commit with --no-verify only for WIP commits",
            "Only commit with --no-verify for WIP commits",
        )
        == ()
    )


def test_negations_count_however_they_are_spelled() -> None:
    assert differences("Don't push to main", "Never push to main") == ()
    assert (
        differences("The importer cannot run in parallel", "The importer can't run in parallel")
        == ()
    )
    assert differences("Use ruff, not black", "Use ruff instead of black") == ()
    assert kinds("The cache is shared", "The cache is not shared") == {"negation"}
    assert kinds("Deploy with tests", "Deploy without tests") == {"negation"}


def test_a_word_swapped_for_its_opposite_is_a_difference() -> None:
    assert (
        str(differences("Enable the cache in CI", "Disable the cache in CI")[0])
        == "an opposite word: enable -> disable"
    )
    assert kinds("Migrate before the deploy", "Migrate after the deploy") == {"opposite"}
    assert kinds("Debug logs on staging", "Debug logs on production") == {"opposite"}
    # Both sides in both texts is not a swap.
    assert differences("Enable A and disable B", "Disable B and enable A") == ()


def test_names_count_but_not_at_the_start_of_a_sentence() -> None:
    assert kinds("Use Redis for the rate limiter", "Use Memcached for the rate limiter") == {"name"}
    assert differences("Errors go to Sentry", "errors go to sentry") == ()


def test_quoted_text_counts_only_when_nothing_more_precise_differs() -> None:
    assert kinds('Set the level to "debug"', 'Set the level to "info"') == {"quoted text"}
    assert kinds("Run `pytest tests/unit`", "Run `pytest tests/e2e`") == {"path"}
    assert differences('Set the level to "debug"', "Set the level to 'debug'") == ()


def test_identical_and_empty_texts_have_no_differences() -> None:
    assert differences("", "") == ()
    text = "Run `make check` (ruff, mypy --strict, pytest -x) before pushing to origin/main"
    assert differences(text, text) == ()


# -- through remember, with the real built-in model ----------------------------------------------


def test_the_corpus_through_remember(home_store: Engram) -> None:
    """Every pair through `remember` in one store (each pair's memories forgotten after it):
    changed facts are stored and reported against the first memory, rewordings fold."""
    home_store.config_set("commit.auto", "false")
    engram = Engram()
    for pair in PAIRS:
        first = engram.remember(pair["old"])
        assert not first.duplicate and not first.related, pair
        second = engram.remember(pair["new"])
        if pair["fold"]:
            assert second.duplicate and second.id == first.id, pair
        else:
            assert not second.duplicate and second.id != first.id, pair
            assert first.id in [m.id for m, _ in second.related], pair
            assert pair["change"] in {d.what for d in second.differs_from(first.id)}, pair
        for memory in {first.id, second.id}:
            engram.forget(memory, reason="next pair")


def test_the_corpus_shows_what_the_model_alone_gets_wrong() -> None:
    """The model's cosine alone, at the default threshold, folds most corrections away and
    misses some rewordings that only punctuation tells apart (they fold as equal text)."""
    from engram.search.embed import load_embedder

    model = load_embedder("builtin")
    vectors = model.embed([text for p in PAIRS for text in (p["old"], p["new"])])
    cosine = {id(p): float(vectors[2 * i] @ vectors[2 * i + 1]) for i, p in enumerate(PAIRS)}
    wrongly_folded = [p for p in MUST_NOT_FOLD if cosine[id(p)] >= DUPLICATE]
    missed = [p for p in SHOULD_FOLD if cosine[id(p)] < DUPLICATE]
    assert len(wrongly_folded) >= len(MUST_NOT_FOLD) // 2
    assert missed and all(_normalised(p["old"]) == _normalised(p["new"]) for p in missed)
    # Every corrected pair is at least as similar as `remember.related_similarity`, so it
    # comes back as a possible contradiction.
    assert min(cosine[id(p)] for p in MUST_NOT_FOLD) >= 0.80


def test_a_correction_is_stored_and_reported_with_the_supersede_advice(home_store: Engram) -> None:
    first = cli("remember", "The API rate limit is 100 requests per second")
    old = first.output.split()[1]
    done = cli("remember", "The API rate limit is 1000 requests per second")
    new = done.output.split()[1]
    assert done.output.startswith(f"remembered {new} ")
    assert f"the new text differs from {old} in a number: 100 -> 1000" in done.output
    assert f"engram remember ... --supersedes {old}" in done.output
    assert len(Engram().memories()) == 2
    # Following the advice with the same text supersedes the old memory by the one just
    # added, instead of storing the text a second time.
    cli("remember", "The API rate limit is 1000 requests per second", "--supersedes", old)
    engram = Engram()
    assert [m.id[:8] for m in engram.memories()] == [new]
    assert engram.get(old).status == "superseded" and engram.get(old).superseded_by[:8] == new


def test_a_reinforcement_keeps_the_submitted_text_in_the_history(home_store: Engram) -> None:
    first = home_store.remember("Run tests with pytest -x")
    again = Engram().remember("run the tests with `pytest -x`")
    assert again.duplicate and again.id == first.id
    event, _ = Engram().history(first.id)[-1]
    assert event.kind == "memory.reinforced"
    assert event.data["content"] == "run the tests with `pytest -x`"
    shown = cli("get", "--history", first.id[:8]).output
    assert "memory.reinforced" in shown and "run the tests with `pytest -x`" in shown
    assert "run the tests with `pytest -x`" in cli("log").output


def test_a_refused_secret_is_not_kept_by_a_reinforcement(home_store: Engram) -> None:
    first = home_store.remember("Deploys use the token from the vault")
    with pytest.raises(SecretError):
        Engram().remember(
            "Deploys use the token from the vault: 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"
        )
    assert [e.kind for e, _ in Engram().history(first.id)] == ["memory.created"]


def test_reinforced_events_with_and_without_the_text_are_valid() -> None:
    ev.check_payload("memory.reinforced", {"memory": "abc123def456", "similarity": 0.95})
    ev.check_payload(
        "memory.reinforced",
        {"memory": "abc123def456", "similarity": 0.95, "content": "Run tests with pytest -x"},
    )
    with pytest.raises(ev.EventFormatError, match="content"):
        ev.check_payload("memory.reinforced", {"memory": "abc123def456", "content": 42})


def test_consolidate_does_not_merge_memories_that_differ_in_a_fact(home_store: Engram) -> None:
    a = home_store.remember("The API rate limit is 100 requests per second", check_duplicates=False)
    b = home_store.remember(
        "The API rate limit is 1000 requests per second", check_duplicates=False
    )
    c = home_store.remember(
        "The API rate limit is 100 requests per second.", check_duplicates=False
    )
    plans = Engram().consolidate(similarity=0.85)
    assert [sorted(m.id for m in p.members) for p in plans] == [sorted([a.id, c.id])]
    assert b.id not in {m.id for p in plans for m in p.members}


def test_the_mcp_note_says_what_differs_and_how_to_replace_it(home_store: Engram) -> None:
    from engram.mcp.views import remembered

    first = home_store.remember("The metrics endpoint is served on port 9100")
    result = Engram().remember("The metrics endpoint is served on port 9200")
    note = remembered(result).note
    assert f"the new text differs from {first.id[:8]} in a number: 9100 -> 9200" in note
    assert "memory_forget" in note and "replace_with" in note


def test_the_same_text_of_another_kind_or_scope_is_added_not_reinforced(home_store: Engram) -> None:
    text = "Retry failed uploads three times with exponential backoff"
    first = cli("remember", text, "--kind", "convention", "--scope", "backend")
    old = first.output.split()[1]
    done = cli("remember", text, "--kind", "gotcha", "--scope", "frontend", "--tag", "web")
    assert done.output.startswith("remembered ")
    new = done.output.split()[1]
    assert f"possible contradiction: {old}" in done.output
    assert (
        f"{old} is a convention of scope backend; the new memory is a gotcha of scope frontend"
        in done.output
    )
    assert [h.memory.id[:8] for h in Engram().recall("retry uploads", scope="frontend")] == [new]
    assert [h.memory.id[:8] for h in Engram().recall("retry uploads", kinds=["gotcha"])] == [new]
    # The same kind and scope still folds.
    again = Engram().remember(text + ".", kind="gotcha", scope="frontend")
    assert again.duplicate and again.id[:8] == new


def test_consolidate_merges_within_one_scope_and_keeps_the_validity_all_members_have(
    home_store: Engram,
) -> None:
    text = "Run the linter before pushing"
    backend = home_store.remember(text, scope="backend", check_duplicates=False)
    frontend = home_store.remember(text + ".", scope="frontend", check_duplicates=False)
    assert Engram().consolidate(similarity=0.85) == []
    # Within one scope: the latest end when every member has one ...
    a = home_store.remember(
        "Use the staging VPN for the demo", scope="ops", valid_until="2099-01-01"
    )
    b = home_store.remember(
        "Use the staging VPN for the demo.",
        scope="ops",
        valid_until="2099-06-01",
        check_duplicates=False,
    )
    [plan] = Engram().consolidate(similarity=0.85, apply=True)
    merged = Engram().get(plan.merged_into)
    assert set(merged.supersedes) == {a.id, b.id} and merged.scope == "ops"
    assert merged.valid_until is not None and merged.valid_until.startswith("2099-06-01")
    assert [h.memory.id for h in Engram().recall("staging VPN demo", scope="ops")] == [merged.id]
    # ... and none when a member holds with no end.
    c = home_store.remember("Deploys wait for the canary", valid_until="2099-01-01")
    d = home_store.remember("Deploys wait for the canary!", check_duplicates=False)
    [plan] = Engram().consolidate(similarity=0.85, apply=True)
    assert set(Engram().get(plan.merged_into).supersedes) == {c.id, d.id}
    assert Engram().get(plan.merged_into).valid_until is None
    assert {backend.id, frontend.id} <= {m.id for m in Engram().memories()}
