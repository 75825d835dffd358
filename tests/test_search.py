"""Hybrid recall over disposable indexes, with the real tantivy, usearch and embedding model."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import cli, git, make_repo

from engram.api import Engram
from engram.search import embed
from engram.search.retrieval import memory_embedding_text

MEMORIES = [
    ("Use Postgres for the job queue; Redis lost jobs on restart", "decision"),
    ("The integration tests need Docker running before pytest starts", "gotcha"),
    ("Name branches feature/<ticket>-<slug>", "convention"),
    ("The user prefers small commits with imperative subject lines", "preference"),
    ("Deploys to staging go through the GitHub Actions workflow deploy.yml", "procedure"),
    ("The billing service times out when the invoice batch exceeds 500 rows", "failure"),
]


def fill(engram: Engram) -> dict[str, str]:
    return {engram.remember(text, kind=kind).id: text for text, kind in MEMORIES}


def ranked(engram: Engram, query: str, **kwargs: object) -> list[str]:
    return [hit.memory.id for hit in engram.recall(query, **kwargs)]


def test_recall_finds_by_meaning_and_by_words(home_store: Engram) -> None:
    ids = {text: mid for mid, text in fill(home_store).items()}
    engram = Engram()
    # No word in common with the memory: found by meaning.
    assert (
        ranked(engram, "which database backs our background work queue")[0] == ids[MEMORIES[0][0]]
    )
    # A rare word: found by BM25.
    assert ranked(engram, "deploy.yml")[0] == ids[MEMORIES[4][0]]
    hit = engram.recall("docker for the tests")[0]
    assert hit.memory.id == ids[MEMORIES[1][0]]
    assert hit.bm25 > 0 and hit.vector > 0 and 0 < hit.score <= 1


def test_filters_and_k(home_store: Engram) -> None:
    fill(home_store)
    engram = Engram()
    assert all(h.memory.kind == "gotcha" for h in engram.recall("tests", kinds=["gotcha"]))
    assert len(engram.recall("the", k=2)) <= 2


def test_deleting_every_cache_gives_the_same_results(home_store: Engram) -> None:
    fill(home_store)
    queries = ["database for jobs", "how do we deploy to staging", "commit style"]
    reader = Engram()
    before = {q: ranked(reader, q) for q in queries}
    reader.close()  # no process has the indexes open while they are deleted
    home_store.close()
    shutil.rmtree(home_store.personal.local_dir / "cache")
    after = {q: ranked(Engram(), q) for q in queries}
    assert after == before and all(before.values())


def test_a_pull_made_with_plain_git_is_visible_to_the_next_recall(tmp_path: Path) -> None:
    origin = tmp_path / "origin.git"
    seed = make_repo(tmp_path / "seed")
    Engram(cwd=seed).init(project=True)
    git(tmp_path, "clone", "-q", "--bare", str(seed), str(origin))
    a, b = tmp_path / "a", tmp_path / "b"
    git(tmp_path, "clone", "-q", str(origin), str(a))
    git(tmp_path, "clone", "-q", str(origin), str(b))
    Engram(cwd=b).remember("Existing memory about the frontend build")
    assert Engram(cwd=b).recall("frontend build")  # b's indexes are built and current
    new = Engram(cwd=a).remember("The payment webhook must be idempotent", kind="gotcha")
    Engram(cwd=a).commit()
    git(a, "push", "-q", "origin", "main")
    git(b, "pull", "-q", "--no-rebase", "origin", "main")  # plain git, outside Engram
    assert ranked(Engram(cwd=b), "idempotent webhook")[0] == new.id


def test_a_near_duplicate_reinforces_instead_of_adding(home_store: Engram) -> None:
    first = home_store.remember("Use Postgres for the job queue")
    again = Engram().remember("Use Postgres for the job queue.")
    assert again.duplicate and again.id == first.id and again.reinforced == 1
    assert [m.id for m in Engram().memories()] == [first.id]
    assert [e.kind for e, _ in Engram().history(first.id)] == [
        "memory.created",
        "memory.reinforced",
    ]
    related = Engram().remember("Use SQLite for the job queue instead of Postgres")
    assert not related.duplicate
    assert first.id in [m.id for m, _ in related.related]


def test_writes_without_recall_keep_few_changes_outside_the_vector_index(
    home_store: Engram,
) -> None:
    """The near-duplicate check of each write compares the memories changed since the vector
    index was saved directly; writes fold them into the index once there are enough, so that
    this stays a short list however long an agent writes without recalling."""
    home_store.config_set("search.vector_flush", "8")
    engram = Engram()  # one long-lived process, as an MCP server is
    places = [
        "job queue",
        "billing service",
        "login page",
        "search index",
        "deploy script",
        "metrics exporter",
    ]
    facts = [
        "needs Postgres 16 for advisory locks",
        "times out after thirty seconds under load",
        "is owned by the platform team in Berlin",
        "breaks when the locale is Turkish",
        "must be restarted after every certificate rotation",
    ]
    texts = [f"The {place} {fact}" for fact in facts for place in places]
    written = [engram.remember(text) for text in texts]
    assert not any(w.duplicate for w in written)
    proj = engram.projection(engram.personal)
    assert proj.dirty_count("vec") < 8
    # A change not yet in the saved index is compared with its new text, not its old one.
    pending = written[-1]
    assert any(m == pending.id for m, _ in proj.dirty("vec"))
    engram.update(pending.id, "Ship the mobile app through TestFlight before every release")
    assert engram.remember("Ship the mobile app through TestFlight before each release").duplicate
    assert not engram.remember(texts[-1]).duplicate
    # And one folded into the index long ago is still found as a near-duplicate.
    again = engram.remember(texts[3] + ".")
    assert again.duplicate and again.id == written[3].id


def test_supersede_retires_the_old_memory_from_recall(home_store: Engram) -> None:
    old = home_store.remember("The API runs on port 8080")
    new = Engram().remember("The API runs on port 9090", supersedes=[old.id[:6]])
    engram = Engram()
    assert engram.get(old.id).status == "superseded"
    assert engram.get(old.id).superseded_by == new.id
    assert old.id not in ranked(engram, "API port")
    assert old.id in ranked(engram, "API port", include_forgotten=True)


def test_age_orders_recall_but_never_hides_a_memory(home_store: Engram) -> None:
    """A three-year-old failure is still the answer to an exact question about it, ranked
    after a young memory as relevant; leaving old memories out is a setting the user chooses."""
    old = home_store.remember(
        "Upgrading Celery to 5.3 failed: the beat scheduler lost every periodic task",
        kind="failure",
        at="1095d",
    )
    young = home_store.remember(
        "Upgrading Celery to 5.3 failed: the beat scheduler lost every periodic task again",
        kind="failure",
        check_duplicates=False,
    )
    engram = Engram()
    found = ranked(engram, "what failed when we upgraded Celery")
    assert old.id in found and found.index(young.id) < found.index(old.id)
    engram.config_set("recall.strength_floor", "0.01")
    engram = Engram()
    assert old.id not in ranked(engram, "what failed when we upgraded Celery")
    assert old.id in ranked(engram, "what failed when we upgraded Celery", include_decayed=True)
    assert engram.get(old.id).status == "active"


def test_without_the_model_recall_works_on_words_and_says_so_once(home_store: Engram) -> None:
    pg = home_store.remember("Use Postgres for the job queue")
    config = home_store.personal.root / "config.yaml"  # set by hand: config set refuses it
    config.write_text(config.read_text().replace("model: builtin", "model: nobody/no-such-model"))
    engram = Engram()
    hits = engram.recall("postgres queue")
    assert [h.memory.id for h in hits] == [pg.id]
    assert hits[0].vector == 0.0
    engram.recall("postgres")
    warnings = [w for w in engram.warnings if "could not be loaded" in w]
    assert len(warnings) == 1 and "BM25" in warnings[0]
    # And remember still works, without the near-duplicate check.
    assert not engram.remember("Use Postgres for the job queue").duplicate


def test_a_model_change_invalidates_vectors_and_re_embeds_exactly_once(
    home_store: Engram,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A second real model cannot be downloaded here, so the same weights stand in under
    another identity: what is checked is that the identity, not the weights, keys the vectors."""
    fill(home_store)
    first = Engram().reindex()
    assert first.memories == len(MEMORIES)
    assert first.embedded == 0  # remember's duplicate check already embedded them all
    real = embed.load_embedder("builtin")
    other = embed.Embedder(real._model, "other-model@1", real.dim)
    monkeypatch.setitem(embed._loaded, "builtin", other)
    engram = Engram()
    assert engram.recall("job queue database")  # vectors rebuilt for the new identity
    state = engram.index_state()[0]
    assert state.vector_model == "other-model@1" and state.current
    again = Engram().reindex()
    assert again.embedded == 0 and again.reused == len(MEMORIES)
    cache = engram.workspace.search(engram.personal).embeddings
    texts = [memory_embedding_text(m) for m in engram.memories()]
    assert len(cache.get("other-model@1", [embed.content_hash(t) for t in texts])) == len(MEMORIES)


def test_reindex_check_reports_without_changing(home_store: Engram) -> None:
    fill(home_store)
    Engram().reindex()
    assert Engram().index_state()[0].current
    home_store.remember("A new memory after the reindex")
    state = Engram().index_state()[0]
    assert not state.current and state.healthy and state.projection == "behind"
    assert not Engram().index_state()[0].current  # the check itself changed nothing
    result = cli("reindex", "--check")
    assert result.exit_code == 0 and "behind by design" in result.stdout
    assert cli("recall", "new memory").exit_code == 0  # a search catches up
    result = cli("reindex", "--check")
    assert result.exit_code == 0 and "not yet saved in the vector index" in result.stdout
    vectors = home_store.personal.local_dir / "cache" / "vectors.json"
    vectors.unlink()
    result = cli("reindex", "--check")
    assert result.exit_code == 1 and "vector index missing" in result.stdout
    assert cli("reindex").exit_code == 0
    result = cli("reindex", "--check")
    assert result.exit_code == 0 and "caches current" in result.stdout


def test_corrupt_indexes_are_rebuilt(home_store: Engram) -> None:
    fill(home_store)
    expected = ranked(Engram(), "database for jobs")
    Engram().reindex()
    cache = home_store.personal.local_dir / "cache"
    (cache / "vectors.usearch").write_bytes(b"garbage")
    for path in (cache / "text").iterdir():
        if path.is_file():
            path.write_bytes(b"garbage")
    assert ranked(Engram(), "database for jobs") == expected


def test_consolidate_merges_near_duplicates_as_events(home_store: Engram) -> None:
    a = home_store.remember("Run the linter before pushing", tags=["ci"], check_duplicates=False)
    b = home_store.remember("Run the linter before you push", tags=["lint"], check_duplicates=False)
    other = home_store.remember("The cache lives in Redis", check_duplicates=False)
    plans = Engram().consolidate(similarity=0.85)
    assert [sorted(m.id for m in p.members) for p in plans] == [sorted([a.id, b.id])]
    assert {m.id for m in Engram().memories()} == {a.id, b.id, other.id}  # dry run
    [plan] = Engram().consolidate(similarity=0.85, apply=True)
    merged = Engram().get(plan.merged_into)
    assert set(merged.tags) == {"ci", "lint"} and set(merged.supersedes) == {a.id, b.id}
    assert {m.id for m in Engram().memories()} == {merged.id, other.id}
    assert Engram().get(a.id).status == "superseded"


def test_stats_counts_and_freshness(home_store: Engram) -> None:
    fill(home_store)
    [entry] = Engram().stats()
    assert entry.memories == len(MEMORIES)
    assert entry.by_kind["decision"] == 1
    assert 0.9 < entry.average_strength <= 1.0
    assert hasattr(entry.index, "current")


def test_question_words_do_not_drown_the_words_that_matter(home_store: Engram) -> None:
    from engram.search.text import query_words

    assert query_words("When did you deploy the API?") == ["deploy", "api"]
    assert query_words("what is it") == []  # words that carry no meaning count for nothing
    small_talk = home_store.remember(
        "When did you get back? What did you do there?", check_duplicates=False
    )
    deploy = home_store.remember("The API deploy runs from deploy.yml", check_duplicates=False)
    hits = Engram().recall("When did you deploy the API?", k=2)
    assert hits[0].memory.id == deploy.id and small_talk.id != hits[0].memory.id


def test_a_question_naming_a_month_finds_memories_about_it(home_store: Engram) -> None:
    may = home_store.remember(
        "We migrated the billing database", at="2023-05-08", check_duplicates=False
    )
    home_store.remember("We migrated the search cluster", at="2023-09-20", check_duplicates=False)
    hits = Engram().recall("what did we migrate in May 2023", k=1, include_decayed=True)
    assert hits[0].memory.id == may.id


def test_every_vector_is_found_by_itself_below_the_exact_search_size(tmp_path: Path) -> None:
    """Below `search.exact_below` vectors a query is compared with every one of them: no memory
    is left unreachable by meaning, even among many near-identical vectors (where the HNSW graph
    can miss some), and the approximate graph is still what answers from that size on."""
    import numpy as np

    from engram.search.vectors import EXACT_BELOW, VectorIndex, id_of

    rng = np.random.default_rng(5)
    centres = rng.standard_normal((20, 384)).astype(np.float32)
    vectors = centres[rng.integers(0, 20, 600)] + 0.05 * rng.standard_normal((600, 384)).astype(
        np.float32
    )
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    ids = [id_of(1_000_000 + n) for n in range(len(vectors))]
    index = VectorIndex(tmp_path / "vectors.usearch", "test-model", 384)
    index.update(dict(zip(ids, vectors, strict=True)), [])
    assert len(index) < EXACT_BELOW
    missed = [
        memory_id
        for memory_id, vector in zip(ids, vectors, strict=True)
        if index.search(vector, 1)[0][0] != memory_id
    ]
    assert missed == []
    top = index.search(vectors[0], 10)
    assert top[0] == (ids[0], pytest.approx(1.0, abs=1e-4))
    assert [s for _, s in top] == sorted((s for _, s in top), reverse=True)
    # From the size setting on, the graph answers (approximate, so only the best is checked).
    assert index.search(vectors[0], 10, exact_below=0)[0][0] == ids[0]


def test_vectors_handed_back_unchanged_stay_linked_and_a_changed_one_is_replaced(
    tmp_path: Path,
) -> None:
    """A read model built again hands every vector back: the graph keeps those it holds as they
    are (none is linked again) and replaces only a vector that changed."""
    import numpy as np

    from engram.search.vectors import VectorIndex, id_of

    rng = np.random.default_rng(7)
    vectors = rng.standard_normal((300, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    ids = [id_of(2_000_000 + n) for n in range(len(vectors))]
    index = VectorIndex(tmp_path / "vectors.usearch", "test-model", 384)
    index.update(dict(zip(ids, vectors, strict=True)), [])
    added: list[int] = []
    real_add = index.index.add

    def counted(keys: object, *args: object, **kwargs: object) -> object:
        added.append(len(np.atleast_1d(np.asarray(keys))))
        return real_add(keys, *args, **kwargs)

    index.index.add = counted
    index.update(dict(zip(ids, vectors, strict=True)), [])
    assert added == [] and len(index) == 300
    moved = vectors[5] * -1.0
    index.update({ids[5]: moved, ids[6]: vectors[6], id_of(3_000_000): vectors[7]}, [ids[8]])
    assert added == [2] and len(index) == 300  # the moved one and the new one; one deleted
    assert index.search(moved, 1)[0][0] == ids[5]
    assert index.vector(ids[8]) is None
    index.update({ids[9]: vectors[9]}, [])  # one vector, already there
    assert added == [2]
