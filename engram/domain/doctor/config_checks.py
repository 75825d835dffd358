"""The doctor's checks of a store's settings: what its config.yaml sets that every command leaves
out (found by the loader's own checks, `config_problems`), with the line to edit or the `engram
config set` command that replaces it; and a `search.model` it sets that names no model this
Engram can run (`model_problem`, as `engram config set` refuses it), which leaves recall to
words only.
"""

from __future__ import annotations

from ...base.config import config_problems
from ...base.errors import quote
from ...base.layout import CONFIG_FILE
from ...storage.store import Store
from .report import Finding, Host


def check_config(engram: Host, store: Store) -> list[Finding]:
    path = store.root / CONFIG_FILE
    if path.is_symlink():
        return []  # never read: the layout checks say so
    try:
        data = path.read_bytes()
    except OSError:
        return []  # missing: the layout check says so
    out = []
    for problem in config_problems(data, where=str(path), project=store.kind == "project"):
        edit = f"edit line {problem.line} of {path}" if problem.line else f"edit {path}"
        fix = (
            f"`{problem.command}`, or {edit}"
            if problem.command
            else f"{edit} (every setting: `engram config list`), or restore it with git"
        )
        what = f"config.yaml {problem.what}" if problem.whole else problem.what
        out.append(Finding("config", "warning", what, fix, path=str(path), line=problem.line))
    return out


def check_model(engram: Host, store: Store) -> list[Finding]:
    """A `search.model` set in this store's config.yaml (said once, with the file that sets it:
    a project's may only be `builtin` or `off`) that no model answers to."""
    from ...search.models.choice import model_problem

    settings = engram.settings(store)
    value = settings["search.model"]
    if not settings.origin("search.model").startswith(f"{store.kind} store"):
        return []
    problem = model_problem(value)
    if problem is None:
        return []
    return [
        Finding(
            "search-model",
            "warning",
            f"search.model {quote(value)} cannot be used, so recall goes by words only: {problem}",
            "`engram config set search.model builtin` (or a model of `engram model list`)",
            path=str(store.root / CONFIG_FILE),
        )
    ]
