"""How well a restore continued from the previous checkpoint.

All scores are 0..1. Items are compared by word overlap: two items match when the Jaccard
similarity of their word sets (lower case, words of 3+ letters) is at least 0.5.

- goal_retention: word similarity of the two goals (1 when both are empty).
- action_consistency: share of the previous next steps that the restore carried on with (found
  in its completed, in-progress or next steps). 1 when there were none.
- failure_recall: share of the previous failures that were not repeated after the previous
  checkpoint (same component and a matching error). 1 when there were none.
- working_set_stability: Jaccard similarity of the two sets of working-set files.
- replanning_rate: share of the new next steps that were not planned before (0 = same plan).
- redundant_exploration: share of the new completed items that were already completed or were
  marked must-not-redo before (0 = nothing done twice).
- composite: 0.25 goal_retention + 0.20 action_consistency + 0.20 failure_recall
  + 0.10 working_set_stability + 0.10 (1 - replanning_rate) + 0.15 (1 - redundant_exploration).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ...model.tasks import Failure
from .checkpoints import file_paths

_WORD = re.compile(r"[a-z0-9]{3,}")
WEIGHTS = {
    "goal_retention": 0.25,
    "action_consistency": 0.20,
    "failure_recall": 0.20,
    "working_set_stability": 0.10,
    "replanning_rate": 0.10,
    "redundant_exploration": 0.15,
}


def words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


def similarity(a: str, b: str) -> float:
    left, right = words(a), words(b)
    if not left and not right:
        return 1.0
    return len(left & right) / len(left | right) if left | right else 0.0


def matches(item: str, pool: Iterable[str], threshold: float = 0.5) -> bool:
    return any(similarity(item, other) >= threshold for other in pool)


def score(
    before: Mapping[str, Any],
    after: Mapping[str, Any],
    *,
    failures_before: Sequence[Failure],
    failures_after: Sequence[Failure],
) -> dict[str, float]:
    goal = similarity(before.get("goal") or "", after.get("goal") or "")
    planned = before.get("next") or []
    carried = [
        *(after.get("completed") or []),
        *(after.get("in_progress") or []),
        *(after.get("next") or []),
    ]
    action = sum(1 for step in planned if matches(step, carried)) / len(planned) if planned else 1.0
    repeated = sum(
        1
        for old in failures_before
        if any(
            new.component == old.component and similarity(new.error, old.error) >= 0.5
            for new in failures_after
        )
    )
    recall = 1.0 - repeated / len(failures_before) if failures_before else 1.0
    files_before, files_after = file_paths(before), file_paths(after)
    union = files_before | files_after
    stability = len(files_before & files_after) / len(union) if union else 1.0
    new_next = after.get("next") or []
    replanning = (
        sum(1 for step in new_next if not matches(step, planned)) / len(new_next)
        if new_next
        else 0.0
    )
    done_before = [*(before.get("completed") or []), *(before.get("must_not_redo") or [])]
    new_done = [x for x in after.get("completed") or [] if x not in (before.get("completed") or [])]
    redundant = (
        sum(1 for item in new_done if matches(item, done_before, 0.6)) / len(new_done)
        if new_done
        else 0.0
    )
    scores = {
        "goal_retention": round(goal, 4),
        "action_consistency": round(action, 4),
        "failure_recall": round(recall, 4),
        "working_set_stability": round(stability, 4),
        "replanning_rate": round(replanning, 4),
        "redundant_exploration": round(redundant, 4),
    }
    composite = sum(
        WEIGHTS[name]
        * (1.0 - value if name in ("replanning_rate", "redundant_exploration") else value)
        for name, value in scores.items()
    )
    scores["composite"] = round(composite, 4)
    return scores
