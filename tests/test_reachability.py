"""No memory unreachable by meaning: `engram doctor` and `engram reindex --check` find the vectors
that the vector index's HNSW graph never returns, not even for their own vector, and
`engram doctor --fix` links them into the graph again. Real store, real model, real usearch."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
from conftest import cli

from engram.api import Engram
from engram.base.layout import cache_dir
from engram.search import usearch_index
from engram.search.reachability import saved_index
from engram.search.vectors import EXPANSION_SEARCH, VectorIndex, id_of, unreachable_keys

_TOOLS = [
    "Redis",
    "RabbitMQ",
    "Postgres",
    "Kafka",
    "Nginx",
    "Celery",
    "pytest",
    "Terraform",
    "Grafana",
    "Sentry",
    "MySQL",
    "SQLite",
    "Vite",
    "Jest",
    "gRPC",
]
_AREAS = ["billing", "search", "auth", "reporting", "ingest", "upload", "cache", "metrics"]
_SAYINGS = [
    "the {a} service talks to {t} on the internal network only",
    "{t} silently drops {a} retries when its config is reloaded",
    "we chose {t} for the {a} layer after comparing it with {u}",
    "the {a} job failed because {t} ran out of memory",
    "the team prefers {t} over {u} for {a} work",
]


def notes(count: int) -> list[str]:
    rng = random.Random(4)
    out: set[str] = set()
    while len(out) < count:
        t, u = rng.sample(_TOOLS, 2)
        out.add(rng.choice(_SAYINGS).format(t=t, u=u, a=rng.choice(_AREAS)).capitalize())
    return sorted(out)


def lost_by_graph(vectors: VectorIndex) -> list[str]:
    """Memories that a graph search with their own stored vector does not return (top 10)."""
    out = []
    for memory_id in vectors.ids():
        own = vectors.vector(memory_id)
        assert own is not None
        if memory_id not in dict(vectors.search(own, 10, exact_below=0)):
            out.append(memory_id)
    return out


def degrade(cache: Path) -> None:
    """Save the same vectors in a graph with two links each: what a badly tuned build leaves."""
    vectors = saved_index(cache)
    assert vectors is not None
    keys = np.asarray(vectors.index.keys, dtype=np.uint64)
    stored = np.asarray(vectors.index.get(keys), dtype=np.float32)
    # usearch draws each vector's level at random: not every such graph loses one.
    for _ in range(50):
        poor = usearch_index().Index(
            ndim=vectors.dim,
            metric="cos",
            dtype="f32",
            connectivity=2,
            expansion_add=4,
            expansion_search=EXPANSION_SEARCH,  # what the saved graph is searched with
        )
        poor.add(keys, stored, threads=1)
        if unreachable_keys(poor):
            break
    vectors.index = poor
    vectors.save()


@pytest.mark.slow  # embeds 300 memories
def test_doctor_finds_the_vectors_the_graph_cannot_reach_and_links_them_again(
    home_store: Engram,
) -> None:
    for text in notes(300):
        home_store.remember(text, kind="fact", check_duplicates=False)
    # The graph answers from the first vector on, as it does beyond 10,000 by default.
    home_store.config_set("search.exact_below", "0")
    Engram().reindex()
    cache = cache_dir(home_store.personal.local_dir)
    healthy = saved_index(cache)
    assert healthy is not None and len(healthy) == 300
    assert lost_by_graph(healthy) == []
    code, report = _doctor()
    assert code == 0 and not _findings(report, "vector-reach")

    degrade(cache)
    degraded = saved_index(cache)
    assert degraded is not None
    lost = lost_by_graph(degraded)
    assert lost, "a graph with two links per vector loses some"
    assert sorted(lost) == sorted(id_of(k) for k in unreachable_keys(degraded.index))
    code, report = _doctor()
    [finding] = _findings(report, "vector-reach")
    assert code == 1 and finding["level"] == "warning" and finding["auto"]
    assert f"{len(lost)} of 300 memories cannot be found by meaning" in finding["message"]
    assert "engram doctor --fix --personal" in finding["fix"]
    check = cli("reindex", "--check")
    assert check.exit_code == 1
    assert f"{len(lost)} of 300 vectors cannot be reached" in check.output
    assert "engram doctor --fix --personal" in check.output

    fixed = cli("doctor", "--fix")
    assert "vectors the graph could not reach" in fixed.output, fixed.output
    code, report = _doctor()
    assert code == 0 and not _findings(report, "vector-reach"), (fixed.output, report)
    repaired = saved_index(cache)
    assert repaired is not None and len(repaired) == 300
    assert lost_by_graph(repaired) == []
    assert cli("reindex", "--check").exit_code == 0
    # A memory that was lost is its own best match by meaning again, through recall.
    memory = Engram().get(lost[0])
    hits = Engram().recall(memory.content, k=3)
    assert hits[0].memory.id == lost[0] and hits[0].vector > 0.8


@pytest.mark.slow  # embeds 300 memories: a graph of 60 searched 128 wide seldom loses one
def test_below_the_exact_search_size_there_is_nothing_to_check(home_store: Engram) -> None:
    for text in notes(300):
        home_store.remember(text, kind="fact", check_duplicates=False)
    Engram().reindex()
    cache = cache_dir(home_store.personal.local_dir)
    degrade(cache)
    degraded = saved_index(cache)
    assert degraded is not None and unreachable_keys(degraded.index)
    # Recall compares the query with every vector below `search.exact_below`: all are found.
    code, report = _doctor()
    assert code == 0 and not _findings(report, "vector-reach")
    assert cli("reindex", "--check").exit_code == 0


def _doctor(*args: str) -> tuple[int, dict[str, object]]:
    result = cli("doctor", "--json", *args)
    return result.exit_code, json.loads(result.stdout)


def _findings(report: dict[str, object], check: str) -> list[dict[str, object]]:
    stores = report["stores"]
    assert isinstance(stores, list)
    return [f for entry in stores for f in entry["findings"] if f["check"] == check]


def test_one_vector_is_checked_as_many_are() -> None:
    """A single key searches as one query (usearch answers it in another shape)."""
    index = usearch_index().Index(ndim=8, metric="cos", connectivity=2, expansion_search=64)
    rng = np.random.default_rng(7)
    index.add(np.arange(50, dtype=np.uint64), rng.random((50, 8), dtype=np.float32))
    lost = unreachable_keys(index)
    assert unreachable_keys(index, keys=np.arange(1, dtype=np.uint64)) == [
        k for k in lost if k == 0
    ]
    for key in lost[:3]:
        assert unreachable_keys(index, keys=np.asarray([key], dtype=np.uint64)) == [key]


def test_nearness_to_ordinary_text_follows_each_change_of_a_vector(tmp_path: Path) -> None:
    """`VectorIndex.nearness` keeps what it worked out while a vector stays the same: a vector
    replaced or removed is not judged by its old self."""
    from engram.search.ranking import nearest_mean

    rng = np.random.default_rng(11)

    def unit(rows: int) -> np.ndarray:
        v = rng.normal(size=(rows, 16)).astype(np.float32)
        return v / np.linalg.norm(v, axis=1, keepdims=True)

    background, first, second = unit(30), unit(1)[0], unit(1)[0]
    index = VectorIndex(tmp_path / "vectors.usearch", "test-model", 16)
    memory = id_of(12345)
    index.update({memory: first}, [])
    assert index.nearness([memory], background)[memory] == pytest.approx(
        float(nearest_mean(first @ background.T)), abs=1e-6
    )
    index.update({memory: second}, [])
    assert index.nearness([memory], background)[memory] == pytest.approx(
        float(nearest_mean(second @ background.T)), abs=1e-6
    )
    index.update({}, [memory])
    assert index.nearness([memory], background) == {}
