"""Consolidation: clusters of near-duplicate memories, each merged into one memory that
supersedes its members (events only; nothing is deleted).

The plan types are light (`engram.domain.memories` re-exports them); the embedding and the
comparison of facts load only when `consolidate` runs.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ..base.errors import EngramError
from ..model import memories as mem
from ..storage import events as ev
from ..storage.store import Store
from .workspace import Workspace


@dataclass(frozen=True)
class ClusterMember:
    """A memory of a near-duplicate cluster, by id and summary."""

    id: str
    summary: str


@dataclass(frozen=True)
class MergePlan:
    """A cluster of near-duplicate memories and the one memory that replaces them (`merged_into`
    once merged, else None)."""

    store: str
    members: tuple[ClusterMember, ...]
    content: str
    kind: str
    tags: tuple[str, ...]
    importance: float
    merged_into: str | None


def consolidate(
    workspace: Workspace,
    *,
    apply: bool = False,
    similarity: float | None = None,
) -> list[MergePlan]:
    """Find clusters of near-duplicate memories; with `apply`, merge each into one.

    A merge is events only: a new memory (the longest text of the cluster, the union of its
    tags, the highest importance, the validity every member has) that supersedes every
    member. Nothing is deleted. A cluster holds memories of one kind, one scope and (in the
    personal store) one project only, so the merged memory is found by the same filters as
    each member. Memories that say a different number, version, path, word, ...
    (`neardup.differences`) are never put in one cluster, however similar: merging them
    would keep one value and drop the other.
    """
    import numpy as np

    from ..search.embed import embed_with_cache
    from ..search.neardup import differences

    plans: list[MergePlan] = []
    for store in workspace.stores():
        settings = workspace.settings(store)
        threshold = settings["consolidate.similarity"] if similarity is None else similarity
        embedder = workspace.embedder(store)
        if embedder is None:
            raise EngramError(
                "consolidate needs the embedding model, which did not load; see `engram stats`"
            )
        proj = workspace.projection(store)
        search = workspace.search(store)
        active = [m for m in proj.memories() if m.valid_at(ev.utc_now())]
        if len(active) < 2:
            continue
        vectors, _ = embed_with_cache(embedder, search.embeddings, [m.content for m in active])
        parent = list(range(len(active)))
        members_of = {i: [i] for i in range(len(active))}

        # Called only within this store's pass; the defaults bind this pass's lists.
        def find(i: int, parent: list[int] = parent) -> int:
            while parent[i] != i:
                parent[i] = parent[parent[i]]
                i = parent[i]
            return i

        def agree(
            a: int,
            b: int,
            active: list[mem.Memory] = active,
            members_of: dict[int, list[int]] = members_of,
        ) -> bool:
            # Every pair across the two clusters, not only the similar pair: a chain of
            # small rewordings must not join two memories that say different values.
            return not any(
                differences(active[x].content, active[y].content)
                for x in members_of[a]
                for y in members_of[b]
            )

        for start in range(0, len(active), 1024):
            block = vectors[start : start + 1024] @ vectors.T
            for offset, row in enumerate(block):
                i = start + offset
                for j in np.nonzero(row >= threshold)[0]:
                    if j > i and _place(active[i]) == _place(active[int(j)]):
                        a, b = find(i), find(int(j))
                        if a != b and agree(a, b):
                            parent[a] = b
                            members_of[b] += members_of.pop(a)
        clusters: dict[int, list[int]] = {}
        for i in range(len(active)):
            clusters.setdefault(find(i), []).append(i)
        for members in clusters.values():
            if len(members) < 2:
                continue
            group = [active[i] for i in members]
            keeper = max(group, key=lambda m: (len(m.content), m.importance, m.updated_clock))
            tags = list(dict.fromkeys(t for m in group for t in m.tags))
            plan = MergePlan(
                store=store.kind,
                members=tuple(ClusterMember(m.id, m.summary()) for m in group),
                content=keeper.content,
                kind=keeper.kind,
                tags=tuple(tags[: settings["limits.tags"]]),
                importance=max(m.importance for m in group),
                merged_into=None,
            )
            if apply:
                plan = replace(plan, merged_into=_merge(workspace, store, group, plan))
            plans.append(plan)
    return plans


def _place(memory: mem.Memory) -> tuple[str, str | None, str | None, str | None]:
    """Where a memory is found: only memories of one place are merged."""
    return memory.kind, memory.scope, memory.project, memory.project_remote


def _window(group: list[mem.Memory]) -> tuple[str | None, str | None]:
    """The validity the merged memory may claim for all its members: from the earliest
    `valid_from` and until the latest `valid_until` when every member has one, and open on a
    side where any member is open (a member without an end holds with no end)."""
    starts = [m.valid_from for m in group if m.valid_from]
    ends = [m.valid_until for m in group if m.valid_until]
    return (
        min(starts, key=ev.parse_time) if len(starts) == len(group) else None,
        max(ends, key=ev.parse_time) if len(ends) == len(group) else None,
    )


def _merge(workspace: Workspace, store: Store, group: list[mem.Memory], plan: MergePlan) -> str:
    new_id = ev.new_entity_id()
    keeper = max(group, key=lambda m: (len(m.content), m.importance, m.updated_clock))
    valid_from, valid_until = _window(group)
    data: dict[str, Any] = {
        "memory": new_id,
        "content": plan.content,
        "kind": plan.kind,
        "tags": list(plan.tags),
        "scope": keeper.scope,
        "source": keeper.source,
        "importance": plan.importance,
        "valid_from": valid_from,
        "valid_until": valid_until,
        "supersedes": [m.id for m in group],
    }
    for field in ("project", "project_remote"):
        if getattr(keeper, field) is not None:
            data[field] = getattr(keeper, field)
    if keeper.task:
        data["task"] = keeper.task
    items = [("memory.created", data)]
    items += [("memory.superseded", {"memory": m.id, "by": new_id}) for m in group]
    workspace.emit_many(store, items)
    return new_id
