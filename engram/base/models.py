"""What a `search.model` setting may name, and how a local model folder is described: plain
checks on a value and on files, with no model loaded (`engram.search.embed` loads models).

A value is `builtin`, `off`, a folder on this machine (an absolute path, or one starting with
`~`) or a fastembed model's name. A folder holds an ONNX model, its `tokenizer.json` and
optionally an `engram-model.json` saying how to use it (`ModelDescription`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from .errors import quote

BUILTIN = "builtin"
OFF = "off"
DESCRIPTION_FILE = "engram-model.json"
Pooling = Literal["mean", "cls"]
POOLINGS: tuple[str, ...] = ("mean", "cls")


def is_local_model(value: str) -> bool:
    """Whether `search.model` names a folder on this machine rather than a model by name."""
    return value.startswith(("~", "/", "\\")) or Path(value).is_absolute()


def check_model_setting(value: str) -> None:
    """The shape of a `search.model` value (any machine); raises ValueError with the fix."""
    if value in (BUILTIN, OFF) or is_local_model(value):
        return
    if not value.strip():
        raise ValueError(
            "it is empty; name a model ('builtin', 'off', a model folder or a fastembed "
            "model): see the models with `engram model list`"
        )
    if value.startswith(".") or value.count("/") > 1 or "\\" in value:
        raise ValueError(
            f"a model folder must be an absolute path (or start with ~), not "
            f"{quote(value)}; a fastembed model is named like "
            "BAAI/bge-small-en-v1.5"
        )


def first_line(exc: BaseException) -> str:
    """The type and first line of an error's message, for a one-line reason."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:200]}" if text else type(exc).__name__


class ModelFolderError(ValueError):
    """A model folder that cannot be used as it is; the message names what is missing."""


@dataclass(frozen=True)
class ModelDescription:
    """How to run the model in a folder: its optional `engram-model.json`, for example

        {"query_prefix": "query: ", "document_prefix": "passage: ", "pooling": "mean"}

    - `query_prefix`, `document_prefix`: put before each query and each memory (e5 wants
      "query: " and "passage: "; bge v1.5 wants "Represent this sentence for searching relevant
      passages: " before queries only). Default: what the folder's
      config_sentence_transformers.json "prompts" say, else nothing.
    - `pooling`: "mean" (over the tokens, e.g. all-MiniLM, e5) or "cls" (the first token, e.g.
      bge). Default: what 1_Pooling/config.json says, else "mean".
    - `max_tokens`: the window; longer texts are cut. Default: sentence_bert_config.json's
      max_seq_length, else the tokenizer's and the model's limit (usually 512).
    - `model_file`: which .onnx file, when the folder has several.
    - `dimension`: the length of the model's vectors; a model that gives another is refused.

    Vectors are always L2-normalised after pooling: Engram compares them by cosine.
    """

    query_prefix: str = ""
    document_prefix: str = ""
    pooling: Pooling = "mean"
    max_tokens: int | None = None
    model_file: str | None = None
    dimension: int | None = None


def describe_folder(folder: Path) -> tuple[Path, ModelDescription]:
    """The model file and description of a model folder. Raises ModelFolderError."""
    if not folder.is_dir():
        raise ModelFolderError(f"{folder} is not a folder")
    given = _json_file(folder / DESCRIPTION_FILE)
    known = set(ModelDescription.__dataclass_fields__)
    unknown = sorted(set(given) - known)
    if unknown:
        raise ModelFolderError(
            f"{folder / DESCRIPTION_FILE}: unknown key {unknown[0]!r} "
            f"(known: {', '.join(sorted(known))})"
        )
    values: dict[str, Any] = {}
    prompts = _json_file(folder / "config_sentence_transformers.json").get("prompts") or {}
    if isinstance(prompts, dict):
        values["query_prefix"] = prompts.get("query", "")
        values["document_prefix"] = prompts.get("document", prompts.get("passage", ""))
    pooling = _json_file(folder / "1_Pooling" / "config.json")
    if pooling.get("pooling_mode_cls_token"):
        values["pooling"] = "cls"
    window = _json_file(folder / "sentence_bert_config.json").get("max_seq_length")
    if isinstance(window, int):
        values["max_tokens"] = window
    values.update(given)
    for key in ("query_prefix", "document_prefix"):
        if not isinstance(values.get(key, ""), str):
            raise ModelFolderError(f"{folder / DESCRIPTION_FILE}: {key} must be text")
    if values.get("pooling", "mean") not in POOLINGS:
        raise ModelFolderError(
            f"{folder / DESCRIPTION_FILE}: pooling must be one of "
            f"{', '.join(POOLINGS)}, not {values['pooling']!r}"
        )
    window = values.get("max_tokens")
    if window is not None and (
        not isinstance(window, int) or isinstance(window, bool) or not 0 < window <= 100_000
    ):
        raise ModelFolderError(
            f"{folder / DESCRIPTION_FILE}: max_tokens must be a whole "
            f"number of tokens, not {window!r}"
        )
    dimension = values.get("dimension")
    if dimension is not None and (
        not isinstance(dimension, int) or isinstance(dimension, bool) or not 0 < dimension <= 65_536
    ):
        raise ModelFolderError(
            f"{folder / DESCRIPTION_FILE}: dimension must be a whole number, not {dimension!r}"
        )
    if not isinstance(values.get("model_file") or "", str):
        raise ModelFolderError(f"{folder / DESCRIPTION_FILE}: model_file must be a file name")
    description = ModelDescription(**values)
    if not (folder / "tokenizer.json").is_file():
        raise ModelFolderError(
            f"{folder} has no tokenizer.json (the Hugging Face tokenizer "
            "file that comes with the model)"
        )
    return _model_file(folder, description), description


def _model_file(folder: Path, description: ModelDescription) -> Path:
    if description.model_file:
        path = folder / description.model_file
        if not path.is_file() or folder.resolve() not in path.resolve().parents:
            raise ModelFolderError(
                f"{folder} has no {description.model_file} (named by {DESCRIPTION_FILE})"
            )
        return path
    if (folder / "model.onnx").is_file():
        return folder / "model.onnx"
    found = sorted(
        p
        for where in (folder, folder / "onnx")
        if where.is_dir()
        for p in where.glob("*.onnx")
        if p.is_file()
    )
    if not found:
        raise ModelFolderError(f"{folder} has no model.onnx (or other .onnx file)")
    if len(found) > 1:
        names = ", ".join(str(p.relative_to(folder)) for p in found[:4])
        raise ModelFolderError(
            f"{folder} has several .onnx files ({names}); name one as "
            f"model_file in {DESCRIPTION_FILE}"
        )
    return found[0]


def _json_file(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        value = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError) as exc:
        raise ModelFolderError(f"{path} is not readable JSON ({first_line(exc)})") from None
    if not isinstance(value, dict):
        raise ModelFolderError(f"{path} must hold a JSON object")
    return value
