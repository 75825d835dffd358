"""A task's plan across checkpoints written on machines that did not see each other's work.

Each checkpoint's writer carries over what is done and what must hold (`CARRIED`) from the
checkpoint it knew, and adds the done progress it saw since. So a checkpoint lacks an item of
those lists only when its writer did not know of it: two machines that each saved a checkpoint
before merging, or one that planned a step the other had already done. `merge` mends the newer
checkpoint with what the older one and the progress before it say, so the task's picture keeps
every such item and no longer plans a step done elsewhere.

A step of a plan is the same as a progress item's feature when the texts are the same, or when
all the words of one are within the other once the small words and the verbs of a plan ("add",
"write", "fix") are set aside: "Retry-After header" is the step "Add the Retry-After header".
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

PLAN = ("next", "in_progress", "blocked")
CARRIED = ("completed", "must_not_redo", "must_preserve")
_SMALL = frozenset(
    "a an the to of for and or in on at by with from into is be it its this "
    "that add added adding implement implemented write wrote written fix fixed "
    "make made do done finish finished update updated".split()
)


def words(text: str) -> frozenset[str]:
    return frozenset(w for w in re.findall(r"[a-z0-9]+", text.casefold()) if w not in _SMALL)


def same_step(feature: str, step: str) -> bool:
    """Whether progress on `feature` is the step `step` of a plan."""
    if " ".join(feature.casefold().split()) == " ".join(step.casefold().split()):
        return True
    left, right = words(feature), words(step)
    return bool(left) and bool(right) and (left <= right or right <= left)


def unknown_done(checkpoint: Mapping[str, Any], done: Iterable[str]) -> dict[str, str]:
    """The steps of `checkpoint`'s plan that a done feature of `done` names although the
    checkpoint does not count it completed (its writer did not know), each with that feature."""
    completed = _texts(checkpoint.get("completed"))
    features = [f for f in done if f not in completed]
    found: dict[str, str] = {}
    for name in PLAN:
        for step in _texts(checkpoint.get(name)):
            match = next((f for f in features if same_step(f, step)), None)
            if match is not None:
                found.setdefault(step, match)
    return found


def merge(package: dict[str, Any], before: Mapping[str, Any] | None, done: Iterable[str]) -> None:
    """Mend `package`, a newer checkpoint, in place: add the `CARRIED` items of the checkpoint
    `before` it lacks, and take out of its plan the steps done before it that it did not know
    of (`done`: the features of the task's done progress older than it, or of `before`'s
    completed items), counting them completed. Lists of the event read stay as they were."""
    done = [*done, *(_texts(before.get("completed")) if before else ())]
    gone = unknown_done(package, done)
    for name in CARRIED:
        theirs = _texts(before.get(name)) if before else []
        extra = list(gone.values()) if name == "completed" else []
        _extend(package, name, [*theirs, *extra])
    if gone:
        for name in PLAN:
            if isinstance(package.get(name), list):
                package[name] = [s for s in package[name] if s not in gone]


def _extend(package: dict[str, Any], name: str, items: list[str]) -> None:
    mine = package.get(name)
    if mine is None:
        mine = []
    if not isinstance(mine, list) or not items:
        return
    have, merged = set(mine), list(mine)
    for item in items:
        if item not in have:
            have.add(item)
            merged.append(item)
    package[name] = merged


def _texts(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []
