"""Recall's hot path: what a recall reuses from the one before must never hide a change.

No store embeds the background a query is calibrated against (the built-in model's ships);
a long-lived process (the MCP server) that recalls again after another process wrote, indexed or
damaged the indexes finds what is there now.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import numpy as np
import pytest
from conftest import run_engram

from engram.api import Engram
from engram.search import background, embed


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many texts each call of the built-in model embedded (the real model, counted)."""
    model = embed.load_embedder("builtin")
    calls: list[int] = []
    real = model.embed

    def counting(texts: list[str]) -> np.ndarray:
        calls.append(len(texts))
        return real(texts)

    monkeypatch.setattr(model, "embed", counting)
    monkeypatch.setattr(background, "_memo", {})  # as in a new process
    return calls


def test_no_store_embeds_the_background(
    tmp_path: Path, counted: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The built-in model's background vectors ship with Engram: a first recall on a new store
    # (in a process that holds none of them yet) embeds the query and the memory, nothing more.
    for home in ("one-store", "other-store"):
        monkeypatch.setenv("ENGRAM_HOME", str(tmp_path / home))
        monkeypatch.setattr(background, "_memo", {})
        counted.clear()
        with Engram() as engram:
            engram.init()
            engram.remember(f"the deploy script of {home} reads its secrets from vault")
            assert (
                engram.recall("where do deploy secrets come from")[0].memory.content
                == f"the deploy script of {home} reads its secrets from vault"
            )
        assert counted and max(counted) == 1, counted
    assert not (embed.model_cache_dir() / "background").exists()


def test_a_long_lived_process_recalls_what_another_process_wrote_and_indexed(
    tmp_path: Path,
) -> None:
    engram = Engram()
    engram.init()
    engram.remember("the payments service retries webhooks five times")
    assert [h.memory.content for h in engram.recall("payments webhook retries")] == [
        "the payments service retries webhooks five times"
    ]
    engram.recall("payments webhook retries")  # nothing changed: the quiet path
    # Another process writes and indexes (its reindex cleans the marks in the read model).
    done = run_engram("remember", "the invoice exporter writes CSV files nightly", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert run_engram("reindex", cwd=tmp_path).returncode == 0
    assert (
        engram.recall("invoice exporter CSV")[0].memory.content
        == "the invoice exporter writes CSV files nightly"
    )
    # Another process forgets one: it is gone from this process's next recall too.
    memory_id = engram.recall("invoice exporter CSV")[0].memory.id
    done = run_engram("forget", memory_id, "--reason", "moved to the new exporter", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert all(h.memory.id != memory_id for h in engram.recall("invoice exporter CSV"))
    engram.close()


def test_a_text_index_damaged_between_recalls_is_rebuilt(tmp_path: Path) -> None:
    engram = Engram()
    engram.init()
    engram.config_set("search.model", "off")
    engram.remember("the build cache lives on the shared volume")
    assert (
        engram.recall("build cache volume")[0].memory.content
        == "the build cache lives on the shared volume"
    )
    home = Path(os.environ["ENGRAM_HOME"])
    segments = [
        p
        for p in home.glob(".git/engram/**/*")
        if p.is_file() and p.suffix in (".idx", ".term", ".store", ".pos", ".fast", ".fieldnorm")
    ]
    assert segments
    for path in segments:
        path.write_bytes(b"\0" * path.stat().st_size)
    assert (
        engram.recall("build cache volume")[0].memory.content
        == "the build cache lives on the shared volume"
    )
    engram.close()


def test_a_recall_reads_only_the_candidates_that_can_still_rank(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each candidate's ranking fields are read from the read model only while an unread one
    # could still rank among the best: the five best are the first five of the hundred best,
    # whatever the age, importance and kind that weigh them after relevance.
    from engram.readmodel.queries import Queries

    monkeypatch.setenv("ENGRAM_HOME", str(tmp_path / "home"))
    kinds = ("note", "decision", "gotcha", "convention")
    words = (
        "release pipeline artefact bundle signing upload mirror cache runner token deploy "
        "staging canary rollback migration schema index replica shard queue worker retry "
        "timeout budget alert dashboard trace sampling flag rollout"
    ).split()
    rng = random.Random(7)
    with Engram() as engram:
        engram.init()
        engram.config_set("recall.sitting_penalty", "0")
        engram.config_set("recall.candidates", "500")  # the same candidates for k=5 and k=100
        engram.config_set("recall.min_relevance", "0")  # every candidate can rank
        for n in range(300):
            engram.remember(
                " ".join(rng.sample(words, 7)) + f" (step {n})",
                kind=kinds[n % len(kinds)],
                importance=(n % 5) / 4,
                at=f"20{10 + n % 15}-0{1 + n % 9}-1{n % 10}T12:00:00Z",
                check_duplicates=False,
            )
        read: list[int] = []
        real = Queries.heads

        def counting(self: Queries, ids: list[str], **kwargs: bool) -> dict:
            read.append(len(ids))
            return real(self, ids, **kwargs)

        monkeypatch.setattr(Queries, "heads", counting)
        for query in ("release pipeline artefact", "which gotcha about a canary rollback"):
            best = engram.recall(query, k=5)
            few = sum(read)
            read.clear()
            everything = engram.recall(query, k=100)
            assert [h.memory.id for h in best] == [h.memory.id for h in everything[:5]]
            assert [h.score for h in best] == pytest.approx([h.score for h in everything[:5]])
            assert few < sum(read), (few, sum(read))
            read.clear()
