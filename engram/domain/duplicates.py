"""Near-duplicates of a new memory: the active memory it would reinforce, the related ones it
may contradict, and what each says otherwise (`engram.search.neardup`).

`remember` calls these only when it checks for duplicates and the store has its embedding model,
so a command that lists or recalls memories loads none of it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..base.config import Settings
from ..model import memories as mem
from ..search.embed import embed_with_cache
from ..search.neardup import Difference, differences
from ..search.retrieval import embedding_text
from ..storage import events as ev
from ..storage.store import Store
from .workspace import Workspace


def near(
    workspace: Workspace,
    store: Store,
    settings: Settings,
    content: str,
    *,
    kind: str,
    tags: Sequence[str],
    scope: str | None = None,
    project: Mapping[str, Any] | None = None,
) -> tuple[
    tuple[mem.Memory, float] | None, list[tuple[mem.Memory, float, tuple[Difference, ...]]], int
]:
    """The near-duplicate of `content` among active memories, the related ones with what
    they say otherwise (`engram.search.neardup.differences`), and how many memories were left
    out of the comparison as they have no vector yet (`_waiting`).

    A memory is a near-duplicate when it is as similar as `remember.duplicate_similarity`
    (or the same text but for case, punctuation and spacing) and says the same facts: a
    correction ("100 requests per second" -> "1000", "supported" -> "deprecated") is as
    similar as a rewording to the model, and folding it would keep the wrong value and drop
    the right one.

    Only a memory of the same kind and scope is reinforced: folded into a `convention` of
    scope `backend`, a `gotcha` of scope `frontend` could be found by neither filter. The same
    text of another kind or scope is added, and the other memory comes back as related.

    In the personal store, a memory for every project reinforces only one for every project,
    and one of a project (`project`, its payload's `project` and `project_remote`) only one
    of the same project or for every project: the reinforced memory stays where the new text
    would have been seen.
    """
    embedder = workspace.embedder(store)
    if embedder is None:
        return None, [], 0
    search = workspace.search(store)
    proj = workspace.projection(store)
    waiting = _waiting(workspace, store, settings)
    # Embedded as the index embeds a memory (with its kind and tags), so that it is
    # compared like with like, and cached, so indexing it later does not embed it again.
    vector, _ = embed_with_cache(embedder, search.embeddings, [embedding_text(kind, tags, content)])
    near = search.nearest(embedder, vector[0], limit=8, skip=waiting)
    found = proj.memories_by_id([i for i, _ in near])
    now = ev.utc_now()
    related: list[tuple[mem.Memory, float, tuple[Difference, ...]]] = []
    for memory_id, similarity in near:
        memory = found.get(memory_id)
        if memory is None or memory.status != "active" or not memory.valid_at(now):
            continue
        close = similarity >= settings["remember.duplicate_similarity"] or normalised(
            memory.content
        ) == normalised(content)
        if not close and similarity < settings["remember.related_similarity"]:
            continue
        found_differences = differences(memory.content, content)
        if close and not found_differences:
            if (memory.kind, memory.scope) != (kind, scope):
                related.append((memory, similarity, ()))
                continue
            if same_reach(store, memory, project or {}):
                return (memory, similarity), [], len(waiting)
            continue  # the same, for another project: neither a duplicate nor different
        related.append((memory, similarity, found_differences))
    return None, related, len(waiting)


def stored_as(
    workspace: Workspace,
    store: Store,
    data: dict[str, Any],
    *,
    skip: set[str],
) -> mem.Memory | None:
    """An active memory with the text of `data` (but for case, punctuation and spacing)."""
    embedder = workspace.embedder(store)
    if embedder is None:
        return None
    search = workspace.search(store)
    waiting = _waiting(workspace, store, workspace.settings(store))
    content = data["content"]
    vector, _ = embed_with_cache(
        embedder, search.embeddings, [embedding_text(data["kind"], data["tags"], content)]
    )
    near = [
        i for i, _ in search.nearest(embedder, vector[0], limit=8, skip=waiting) if i not in skip
    ]
    now = ev.utc_now()
    for memory in workspace.projection(store).memories_by_id(near).values():
        if (
            memory.status == "active"
            and memory.valid_at(now)
            and normalised(memory.content) == normalised(content)
            and not differences(memory.content, content)
        ):
            return memory
    return None


def same_reach(store: Store, memory: mem.Memory, new: Mapping[str, Any]) -> bool:
    """Whether a new memory (its payload `new`) may reinforce `memory` instead of being added:
    in the personal store, only where `memory` is seen wherever the new one would be."""
    if store.kind != "personal" or (memory.project is None and memory.project_remote is None):
        return True
    return (memory.project, memory.project_remote) == (
        new.get("project"),
        new.get("project_remote"),
    ) or (new.get("project") is not None and memory.project == new.get("project"))


def normalised(text: str) -> str:
    """Text compared for duplicates: case, punctuation and spacing do not count."""
    return " ".join("".join(c if c.isalnum() else " " for c in text.casefold()).split())


def _waiting(workspace: Workspace, store: Store, settings: Settings) -> frozenset[str]:
    """Changed memories a write's comparison leaves out: none, once their vectors are folded
    into the index (`search.vector_flush` of them at a time, as recall does, so that the
    comparisons each write makes stay few); but after a bulk write of more than
    `backlog.INLINE` memories without a vector, those, rather than embedding them while the
    write waits (tens of seconds for thousands). They are compared once embedded."""
    from ..search.backlog import INLINE

    embedder = workspace.embedder(store)
    assert embedder is not None
    search = workspace.search(store)
    if workspace.projection(store).dirty_count("vec") > INLINE:
        waiting = search.unembedded(embedder)
        if len(waiting) > INLINE:
            return frozenset(waiting)
    search.sync_vectors(embedder, settings)
    return frozenset()
