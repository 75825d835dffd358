"""Memories in front of the agent when the user submits a prompt: few, relevant, bounded.

The prompt is recalled by its words (BM25, the text index), never by loading the embedding
model: a hook must answer within a fraction of a second, and loading the model takes longer
than that. It is read clause by clause (`engram.search.prompts`): a memory is as relevant as
the clause that names it best, so what else the prompt says does not drown it; and memories
written together lend each other no relevance here (recall's context), since nothing but
their vectors tells whether they are about the same thing. Only memories whose calibrated
relevance reaches `capture.recall_threshold` are added, best first, until
`capture.recall_tokens` is spent; each with its id, so that the agent can cite, update or
forget it. A memory already shown in this session is not shown again unless it changed since
(a new version). Nothing relevant: nothing is added at all.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

from ...base.display import md
from . import journal
from .service import DEFAULT_SESSION, capture_store

if TYPE_CHECKING:
    from ...search.recall import Source
    from ..workspace import Workspace

CHARS_PER_TOKEN = 4
CANDIDATES = 8
HEADER = (
    "Engram memories that may bear on this prompt (matched by words; ids to cite, "
    "`memory_update` or `memory_forget`):"
)


@dataclass(frozen=True)
class PromptContext:
    """What the hook adds: `text` (empty: nothing) and the ids of the memories in it."""

    text: str
    ids: tuple[str, ...]
    tokens: int


def _sources(workspace: Workspace) -> list[Source]:
    """Each store as recall reads it, by words only (no embedding model)."""
    from ...search.recall import Source

    out = []
    for store in workspace.stores():
        belongs = None
        if store.kind == "personal" and workspace.here() is not None:
            belongs = partial(workspace.belongs_here, store)
        out.append(
            Source(
                store,
                workspace.settings(store),
                workspace.projection(store),
                workspace.search(store),
                None,
                belongs,
            )
        )
    return out


def prompt_context(
    workspace: Workspace,
    prompt: str,
    *,
    session: str | None,
) -> PromptContext:
    """The memories to add for `prompt` in `session` (see the module's docstring)."""
    from ...search import ranking
    from ...search import recall as pipeline
    from ...storage import events as ev

    nothing = PromptContext("", (), 0)
    store = capture_store(workspace)
    if store is None:
        return nothing
    settings = workspace.settings(store)
    if not settings["capture.recall"]:
        return nothing
    limit = workspace.checks().limit("limits.query_bytes")
    query = prompt.encode("utf-8", "replace")[:limit].decode("utf-8", "ignore").strip()
    if not query:
        return nothing
    moment = ev.utc_now()
    intent = ranking.analyse(query, moment)
    if not ranking.has_content(query, intent):
        return nothing
    hits = pipeline.rank(
        query,
        intent,
        _sources(workspace),
        k=CANDIDATES,
        filters=pipeline.Filters(),
        moment=moment,
        prompt=True,
    )
    threshold = settings["capture.recall_threshold"]
    budget = settings["capture.recall_tokens"] * CHARS_PER_TOKEN
    name = session or DEFAULT_SESSION
    with journal.editing(store.local_dir, name) as data:
        shown = data["shown"]
        lines: list[str] = []
        ids: list[str] = []
        used = len(HEADER) + 1
        for hit in hits:
            memory = hit.memory
            if hit.relevance < threshold:
                continue
            if shown.get(memory.id) == memory.version:
                continue
            head = f"- `{memory.id}` ({memory.kind}, relevance {hit.relevance:.2f}): "
            room = budget - used - len(head) - 1
            if room < 40:
                break
            text = " ".join(memory.content.split())
            if len(text) > room:
                text = text[: room - 1] + "…"
            line = head + md(text)
            if used + len(line) + 1 > budget:
                continue
            lines.append(line)
            ids.append(memory.id)
            used += len(line) + 1
            shown[memory.id] = memory.version
        while len(shown) > journal.MAX_SHOWN:
            shown.pop(next(iter(shown)))
    if not lines:
        return nothing
    text = "\n".join([HEADER, *lines])
    return PromptContext(text, tuple(ids), -(-len(text) // CHARS_PER_TOKEN))
