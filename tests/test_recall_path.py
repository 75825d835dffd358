"""Recall's hot path: what a recall reuses from the one before must never hide a change.

The calibration sentences are embedded once per model (kept in the model cache, not per store);
a long-lived process (the MCP server) that recalls again after another process wrote, indexed or
damaged the indexes finds what is there now.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from conftest import run_engram

from engram.api import Engram
from engram.search import calibration, embed


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
    monkeypatch.setattr(calibration, "_held", {})  # as in a new process
    return calls


def test_calibration_is_embedded_once_per_model_not_per_store(tmp_path: Path,
                                                              counted: list[int],
                                                              monkeypatch: pytest.MonkeyPatch,
                                                              ) -> None:
    engram = Engram()
    engram.init()
    engram.remember("the deploy script reads its secrets from vault")
    assert engram.recall("where do deploy secrets come from")[0].memory.content == \
        "the deploy script reads its secrets from vault"
    sentences = len(calibration.sentences())
    assert sentences in counted  # the first recall on this machine embeds them, once
    saved = list((embed.model_cache_dir() / "background").glob("*.npy"))
    assert len(saved) == 1
    engram.close()
    # A new store in a new process (the process's copy forgotten): only the query and the new
    # memory are embedded, the sentences come from the model cache.
    monkeypatch.setenv("ENGRAM_HOME", str(tmp_path / "other-store"))
    monkeypatch.setattr(calibration, "_held", {})
    counted.clear()
    other = Engram()
    other.init()
    other.remember("the nightly job rotates the API tokens")
    assert other.recall("which job rotates tokens")[0].memory.content == \
        "the nightly job rotates the API tokens"
    assert sentences not in counted and max(counted) == 1
    other.close()


def test_a_damaged_calibration_file_is_ignored_and_written_again(counted: list[int]) -> None:
    engram = Engram()
    engram.init()
    engram.remember("staging runs on the small cluster")
    engram.recall("where does staging run")
    (saved,) = (embed.model_cache_dir() / "background").glob("*.npy")
    good = saved.read_bytes()
    for bad in (b"not a numpy file", good[:-64], good.replace(b"<f4", b"<f8", 1)):
        saved.write_bytes(bad)
        calibration._held.clear()
        counted.clear()
        with Engram() as fresh:  # as a new process would
            assert fresh.recall("where does staging run")[0].memory.content == \
                "staging runs on the small cluster"
        assert len(calibration.sentences()) in counted  # embedded again, not read as it was
        assert saved.read_bytes() == good
    engram.close()


def test_a_long_lived_process_recalls_what_another_process_wrote_and_indexed(
        tmp_path: Path) -> None:
    engram = Engram()
    engram.init()
    engram.remember("the payments service retries webhooks five times")
    assert [h.memory.content for h in engram.recall("payments webhook retries")] == \
        ["the payments service retries webhooks five times"]
    engram.recall("payments webhook retries")  # nothing changed: the quiet path
    # Another process writes and indexes (its reindex cleans the marks in the read model).
    done = run_engram("remember", "the invoice exporter writes CSV files nightly", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert run_engram("reindex", cwd=tmp_path).returncode == 0
    assert engram.recall("invoice exporter CSV")[0].memory.content == \
        "the invoice exporter writes CSV files nightly"
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
    assert engram.recall("build cache volume")[0].memory.content == \
        "the build cache lives on the shared volume"
    home = Path(os.environ["ENGRAM_HOME"])
    segments = [p for p in home.glob(".git/engram/**/*") if p.is_file()
                and p.suffix in (".idx", ".term", ".store", ".pos", ".fast", ".fieldnorm")]
    assert segments
    for path in segments:
        path.write_bytes(b"\0" * path.stat().st_size)
    assert engram.recall("build cache volume")[0].memory.content == \
        "the build cache lives on the shared volume"
    engram.close()
