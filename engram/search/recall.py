"""The recall pipeline: a query's candidates from each store's indexes, scored, filtered, ranked.

Per store, the words (BM25) and the meaning (vectors) each name candidates; each candidate's
relevance fuses both (`engram.search.ranking`), memories written together lend each other
context, the filters drop what was not asked for, and strength, time and kind weigh the rest.
The best of all stores are then read whole, and for questions about "now" (or "originally") an
older (or newer) memory on the subject of another one among them steps back. The caller gives
what each store needs (its read model, indexes, embedding model, settings) as a `Source`; this
module reads and writes nothing else.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..readmodel.queries import Reach
from ..storage import events as ev
from . import pieces, prompts, ranking
from .background import vectors as background_vectors
from .retrieval import Hit, memory_embedding_text, strength

if TYPE_CHECKING:
    from ..base.config import Settings
    from ..model.memories import Head, Memory
    from ..readmodel.projection import Projection
    from ..storage.store import Store
    from .embed import Embedder
    from .retrieval import StoreSearch


@dataclass
class Source:
    """One store as recall reads it."""

    store: Store
    settings: Settings
    projection: Projection
    search: StoreSearch
    embedder: Embedder | None
    # Which of the store's memories may be recalled here (None: all of them); the personal
    # store inside a repository leaves out the memories of other projects. It is given each
    # candidate's `Reach` (its project and project remote), not the whole memory.
    belongs: Callable[[Reach], bool] | None = None


@dataclass(frozen=True)
class Filters:
    """What the caller asked to leave out (already checked)."""

    kinds: Sequence[str] = ()
    tags: frozenset[str] = frozenset()
    scope: str | None = None
    task: str | None = None
    since: str | None = None  # a formatted time: memories from then on
    until: str | None = None  # a formatted time: memories before then
    include_forgotten: bool = False
    include_expired: bool = False
    include_decayed: bool = False


Ranked = tuple[float, int, Source, ranking.Candidate]


def rank(
    query: str,
    intent: ranking.Intent,
    sources: Iterable[Source],
    *,
    k: int,
    filters: Filters,
    moment: datetime,
    prompt: bool = False,
) -> list[Hit]:
    """The `k` best memories of all `sources` for `query` (analysed as `intent`), best first.

    With `prompt`, the query is a user's prompt to an agent rather than a question: a memory's
    words evidence is also that of the prompt's clause that names it best
    (`engram.search.prompts`), however much else the prompt says; and memories lend each other
    no context, since a prompt is shown only what it names."""
    query_vectors: dict[str, Any] = {}
    ranked: list[Ranked] = []
    for source in sources:
        ranked += _candidates(
            query,
            intent,
            source,
            k=k,
            filters=filters,
            moment=moment,
            query_vectors=query_vectors,
            prompt=prompt,
        )
    ranked.sort(key=lambda item: (item[0], item[1]), reverse=True)
    ranked = ranked[: max(k, ranking.SUBJECT_WINDOW)]
    # Only the best candidates read their whole memory: those the subject is compared among,
    # for a question about now or then, else those returned.
    bodies: dict[Path, dict[str, Memory]] = {}
    if intent.tense is not None and len(ranked) > 1:
        _read_bodies(ranked, bodies)
        _rank_by_subject(intent.tense, ranked, bodies)
    ranked.sort(key=lambda item: (item[0], item[1]), reverse=True)
    penalty = max((item[2].settings["recall.sitting_penalty"] for item in ranked), default=0.0)
    if penalty > 0:
        order = ranking.vary([(c, c.moment or moment) for _, _, _, c in ranked], penalty)
        ranked = [(ranked[i][3].score, *ranked[i][1:]) for i in order]
    _read_bodies(ranked[:k], bodies)
    return [
        Hit(
            bodies[source.store.root][c.id],
            c,
            source.embedder.identity if source.embedder is not None else None,
        )
        for _, _, source, c in ranked[:k]
    ]


def _read_bodies(ranked: list[Ranked], bodies: dict[Path, dict[str, Memory]]) -> None:
    """Add the memories of `ranked` not yet in `bodies` (by store) to it."""
    for source in {item[2].store.root: item[2] for item in ranked}.values():
        root = source.store.root
        known = bodies.setdefault(root, {})
        wanted = [
            c.id for _, _, where, c in ranked if where.store.root == root and c.id not in known
        ]
        if wanted:
            # The read model was refreshed by the caller, in this same call: read it as it is.
            known.update(source.projection.memories_by_id(wanted))


def _candidates(
    query: str,
    intent: ranking.Intent,
    source: Source,
    *,
    k: int,
    filters: Filters,
    moment: datetime,
    query_vectors: dict[str, Any],
    prompt: bool,
) -> list[Ranked]:
    """One store's candidates that pass the filters, scored."""
    settings, proj, search = source.settings, source.projection, source.search
    limit = max(settings["recall.candidates"], k * 5)
    text_hits, query_weight, specificity = search.text_evidence(intent.words, limit)
    bm25 = dict(text_hits)
    # A one- or two-word query also matches pieces of names ("tests" in "pytest").
    by_pieces = pieces.found(search, proj, intent.words, limit) if query_weight > 0 else {}
    # A prompt's clauses each name their own candidates.
    by_clause = prompts.evidence(search, intent.words, limit) if prompt else {}
    cosines: dict[str, float] = {}
    background = None
    ordinary: dict[str, float] = {}
    embedder = source.embedder
    if embedder is not None:
        if embedder.identity not in query_vectors:
            query_vectors[embedder.identity] = embedder.embed_query(query)
        vector = query_vectors[embedder.identity]
        cosines = search.vector_scores(
            embedder, settings, vector, limit, extra_ids=[*bm25, *by_pieces]
        )
        sims = search.background(embedder, settings["recall.background_sample"]) @ vector
        fixed = len(background_vectors(embedder))
        background = ranking.Background.of(sims, fixed).crowded(cosines.values())
        if settings["recall.memory_background"] > 0 and cosines:
            ordinary = _ordinariness(
                search, embedder, list(cosines), background, settings["recall.memory_background"]
            )
    weight = settings["recall.weight_vector"] if embedder is not None else 0.0
    ids = list(dict.fromkeys([*bm25, *by_pieces, *by_clause, *cosines]))
    identified: dict[str, float] = {}  # the share of the query's identifiers each holds
    if intent.identifiers and bm25:
        # Only memories BM25 found can hold the identifier's words.
        contents = proj.contents(list(bm25))
        identified = {
            i: ranking.identifiers_found(intent.identifiers, t) for i, t in contents.items()
        }
    shares = {i: bm25.get(i, 0.0) / query_weight if query_weight > 0 else 0.0 for i in ids}

    # Every candidate's evidence at once: only those that can end relevant enough are read
    # (and those that can gain context, below).
    at = {memory_id: n for n, memory_id in enumerate(ids)}
    best_shares = [max(shares[i], by_pieces[i][0] if i in by_pieces else 0.0) for i in ids]
    found = [identified.get(i, 0.0) for i in ids]
    near = [max(0.0, cosines.get(i, 0.0)) for i in ids]
    if background is not None:
        reckoned = ranking.evidence(
            background,
            near,
            [ordinary.get(i, 0.0) for i in ids],
            best_shares,
            found,
            specificity,
            weight,
        )
        meanings: list[float] = reckoned.meaning.tolist()
        words: list[float] = reckoned.words.tolist()
        estimates: list[float] = reckoned.relevance.tolist()
    else:  # words alone (and no numpy for a recall by words)
        meanings = [0.0] * len(ids)
        words = [
            ranking.words_evidence(s, specificity, f)
            for s, f in zip(best_shares, found, strict=True)
        ]
        estimates = [ranking.relevance(0.0, w, weight) for w in words]
    lifted = set()  # the memories a clause names better than the whole prompt does
    for memory_id, said in by_clause.items():
        n = at[memory_id]
        if said > words[n]:
            lifted.add(memory_id)
            words[n] = said
            estimates[n] = ranking.relevance(meanings[n], said, weight)
    crowd = background.crowd if background is not None and background.discount > 0 else 0

    def candidate(memory_id: str) -> ranking.Candidate:
        n = at[memory_id]
        c = ranking.Candidate(memory_id, cosine=near[n])
        c.share = best_shares[n]
        if c.share > shares[memory_id]:
            c.notes.append("a word as a piece of " + ", ".join(by_pieces[memory_id][1][:3]))
        c.identifiers = found[n]
        c.words = words[n]
        if memory_id in lifted:
            c.notes.append("named by a clause of the prompt")
        if background is not None:
            c.ordinary = ordinary.get(memory_id, 0.0)
            c.meaning = meanings[n]
            c.crowd = crowd
        c.relevance = estimates[n]
        return c

    heads: dict[str, Head] = {}
    pool: dict[str, ranking.Candidate] = {}
    seen: set[str] = set()
    verdicts: dict[Reach, bool] = {}

    def read(wanted: list[str]) -> None:
        """Read these candidates' heads; those that are memories here join the pool."""
        wanted = [i for i in wanted if i not in seen]
        seen.update(wanted)
        read_heads = proj.heads(wanted, tags=bool(filters.tags)) if wanted else {}
        for memory_id in wanted:
            head = read_heads.get(memory_id)
            if head is None:
                continue
            if source.belongs is not None:
                reach = Reach(head.project, head.project_remote)
                if reach not in verdicts:
                    verdicts[reach] = source.belongs(reach)
                if not verdicts[reach]:
                    continue
            heads[memory_id] = head
            pool[memory_id] = candidate(memory_id)

    min_relevance = settings["recall.min_relevance"]
    # Candidates are read most relevant first, in batches, and only as far as one unread could
    # still rank among the best: no factor after relevance (time, kind, strength) raises a
    # score above it, and context goes only to the neighbours, which are all read.
    hopeful = sorted(
        (n for n, r in enumerate(estimates) if r >= min_relevance), key=lambda n: -estimates[n]
    )
    cursor = 0
    batch = 2 * max(k, ranking.SUBJECT_WINDOW)

    def read_more() -> None:
        """Read the next batch of `hopeful` (and the ties of its last one)."""
        nonlocal cursor, batch
        end = min(cursor + batch, len(hopeful))
        while end < len(hopeful) and estimates[hopeful[end]] == estimates[hopeful[end - 1]]:
            end += 1
        read([ids[n] for n in hopeful[cursor:end]])
        cursor, batch = end, batch * 2

    read_more()
    context = 0.0 if prompt else settings["recall.context"]
    while context > 0 and len(pool) < ranking.CONTEXT_TOP and cursor < len(hopeful):
        read_more()
    if context > 0 and len(pool) < ranking.CONTEXT_TOP:
        # The most relevant, whose neighbours gain context, lie partly among the rest.
        rest = sorted((n for n, i in enumerate(ids) if i not in seen), key=lambda n: -estimates[n])
        while rest and len(pool) < ranking.CONTEXT_TOP:
            read([ids[n] for n in rest[: ranking.CONTEXT_TOP]])
            rest = rest[ranking.CONTEXT_TOP :]
        if rest and pool:  # and those as relevant as the least of them
            least = min(pool[i].relevance for i in ranking.most_relevant(pool))
            read([ids[n] for n in rest if estimates[n] >= least])
    pool = {i: pool[i] for i in ids if i in pool}
    if context > 0 and pool:
        neighbours = proj.written_with(
            ranking.most_relevant(pool), seconds=ranking.CONTEXT_SECONDS, span=ranking.CONTEXT_SPAN
        )
        # A candidate too little relevant on its own may gain context from its neighbour.
        candidates = set(ids)
        read([i for near in neighbours.values() for i in near if i in candidates])
        pool = {i: pool[i] for i in ids if i in pool}
        involved = {
            i for source_id, near in neighbours.items() for i in (source_id, *near) if i in pool
        }
        if filters.tags:  # read with their tags already
            tagged = {i: heads[i] for i in involved}
        else:
            tagged = proj.heads(list(involved), tags=True) if involved else {}
        similarity = None
        if embedder is not None and involved:
            vectors = search.stored_vectors(embedder, sorted(involved))

            def similarity(a: str, b: str) -> float:
                if a not in vectors or b not in vectors:
                    return 0.0
                return float(vectors[a] @ vectors[b])

        ranking.add_context(
            pool,
            neighbours,
            context,
            {i: head.tags for i, head in tagged.items()},
            settings["recall.context_floor"],
            similarity,
            settings["recall.context_similarity"],
        )
    floor = settings["recall.strength_floor"]
    share = settings["recall.weight_strength"]

    def scored(memory_id: str, c: ranking.Candidate) -> Ranked | None:
        """The candidate ranked, or None when it is filtered out."""
        head = heads[memory_id]
        if c.relevance <= 0 or c.relevance < min_relevance:
            return None
        if head.status != "active" and not filters.include_forgotten:
            return None
        if filters.kinds and head.kind not in filters.kinds:
            return None
        if filters.tags and not filters.tags <= head.tags:
            return None
        if filters.scope is not None and head.scope != filters.scope:
            return None
        if filters.task is not None and head.task != filters.task:
            return None
        if filters.since and head.moment < filters.since:
            return None
        if filters.until and head.moment >= filters.until:
            return None
        if not filters.include_expired and not head.valid_at(moment):
            return None
        c.moment = ev.parse_time(head.moment)
        c.strength = strength(head, moment, settings, at=c.moment)
        if c.strength < floor and not filters.include_decayed:
            return None
        c.time = ranking.time_factor(intent, c.moment, moment)
        c.kind = ranking.kind_factor(intent, head.kind)
        c.score = c.relevance * c.time * c.kind * ((1.0 - share) + share * c.strength)
        return (c.score, head.updated_clock, source, c)

    # The best `wanted` of this store are all that the ranking across stores can keep.
    wanted = max(k, ranking.SUBJECT_WINDOW)
    done: dict[str, Ranked | None] = {}
    bounded = True
    while True:
        for memory_id, c in pool.items():
            if memory_id not in done:
                done[memory_id] = scored(memory_id, c)
                bounded = bounded and c.score <= c.relevance  # else read them all
        if cursor >= len(hopeful):
            break
        best = heapq.nlargest(wanted, (r[0] for r in done.values() if r is not None))
        if bounded and len(best) == wanted and best[-1] > estimates[hopeful[cursor]]:
            break
        read_more()
    return [ranked for i in ids if (ranked := done.get(i)) is not None]


def _rank_by_subject(
    tense: str, ranked: list[Ranked], bodies: dict[Path, dict[str, Memory]]
) -> None:
    """For "now" questions, an older memory on the subject of a newer one among the results
    steps back (for "originally" questions, the newer one does)."""
    from .embed import embed_with_cache

    by_identity: dict[str, list[int]] = {}
    for row, (_, _, source, _) in enumerate(ranked):
        if source.embedder is not None:
            by_identity.setdefault(source.embedder.identity, []).append(row)
    for rows in by_identity.values():
        source = ranked[rows[0]][2]
        embedder = source.embedder
        assert embedder is not None
        memories = [bodies[ranked[r][2].store.root][ranked[r][3].id] for r in rows]
        vectors, _ = embed_with_cache(
            embedder, source.search.embeddings, [memory_embedding_text(m) for m in memories]
        )
        similar = vectors @ vectors.T
        # The memory the question asks for first (for "now", the newest), so that a memory
        # stepping back behind it does so behind its final score.
        order = sorted(
            range(len(rows)), key=lambda i: memories[i].moment, reverse=tense == "current"
        )
        for place, i in enumerate(order):
            row = rows[i]
            for j in order[:place]:
                if similar[i, j] < ranking.SUBJECT_SIMILARITY:
                    continue
                if memories[j].moment == memories[i].moment:
                    continue
                newer = memories[j].moment > memories[i].moment
                _, clock, where, c = ranked[row]
                ahead = ranked[rows[j]][3].score
                c.time *= ranking.SUPERSEDED_BY_NEWER
                c.score = min(
                    c.score * ranking.SUPERSEDED_BY_NEWER, ahead * ranking.BEHIND_ON_SUBJECT
                )
                c.notes.append(
                    f"{'newer' if newer else 'older'} memory on this subject: {memories[j].id[:8]}"
                )
                ranked[row] = (c.score, clock, where, c)
                break


def _ordinariness(
    search: StoreSearch,
    embedder: Embedder,
    memory_ids: list[str],
    background: ranking.Background,
    weight: float,
) -> dict[str, float]:
    """What each memory's closeness to ordinary text takes off its meaning (see
    `ranking.ordinariness`): its stored vector against the fixed background."""
    own = search.nearness(embedder, memory_ids, background_vectors(embedder))
    return {m: ranking.ordinariness(near, background.near, weight) for m, near in own.items()}
