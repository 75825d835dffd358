"""Whether a `search.model` value names a model this Engram can run, told without running it:
`engram config set` refuses one that does not, `doctor` reports one set by hand (or pulled),
and `stats` says that recall then goes by words only.

A value names a model when it is `builtin` or `off`, a model folder on this machine that
`describe_folder` accepts (an installed model of `engram model list` is one), or the name of a
model fastembed supports (as fastembed matches it: whatever the case). The name of a model
`engram model install` builds (`mpnet`) is not a value: the message names its folder, or the
install command.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from ...base.errors import quote
from ...base.models import BUILTIN, OFF, ModelFolderError, describe_folder, is_local_model
from .catalogue import CATALOGUE
from .install import is_installed, model_folder, setting_for

SEE_MODELS = "see the models with `engram model list`"


def model_problem(value: str) -> str | None:
    """Why `value` names no model this Engram can run, in one line that names the fix; None
    when it names one. Loads no model (a fastembed name costs fastembed's import, once)."""
    if value in (BUILTIN, OFF):
        return None
    if is_local_model(value):
        try:
            describe_folder(Path(value).expanduser())
        except ModelFolderError as exc:
            return f"{exc}; {SEE_MODELS}"
        return None
    if value in CATALOGUE:
        folder = model_folder(CATALOGUE[value])
        if is_installed(folder):
            return f"{value} is selected by its folder: engram config set search.model " + (
                setting_for(folder)
            )
        return f"{value} is not installed; run `engram model install {value}` first"
    if value.lower() in fastembed_models():
        return None
    return (
        f"no model is named {quote(value)} (neither 'builtin', 'off', a model folder nor a "
        f"fastembed model); {SEE_MODELS}"
    )


@cache
def fastembed_models() -> frozenset[str]:
    """The names of the text models fastembed runs, lower case; none if it cannot be imported."""
    try:
        from fastembed import TextEmbedding
    except Exception:  # a broken install: no name is known, which the message then says
        return frozenset()
    return frozenset(str(m["model"]).lower() for m in TextEmbedding.list_supported_models())
