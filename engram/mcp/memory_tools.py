"""The memory tools: remember, recall, list, get, update, forget, consolidate, stats."""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from ..api import Engram
from ..base.errors import EngramError
from ..base.results import as_json
from ..base.vocab import SOURCE
from .models import (
    FULL_CHARS,
    ITEM_CHARS,
    READ,
    WRITE,
    Cluster,
    ClusterMember,
    ConsolidateResult,
    ForgetResult,
    Id,
    Kind,
    MemoryList,
    MemoryResult,
    RecallHit,
    RecallResult,
    RememberResult,
    Source,
    StatsResult,
    StoreStats,
    Tags,
    Version,
)
from .runtime import runtime_of
from .tools import tool
from .views import fit, memory_view, remembered


def add_memory_tools(server: MCPServer) -> None:
    @tool(server, "Remember")
    def memory_remember(
        content: Annotated[
            str,
            Field(
                description="The memory's text: one self-contained "
                'statement, e.g. "Use Postgres for the job '
                'queue: we need SKIP LOCKED".'
            ),
        ],
        ctx: Context,
        kind: Annotated[
            Kind,
            Field(
                description="fact (default), decision, preference, "
                "convention, gotcha, failure, lesson, "
                "procedure or note."
            ),
        ] = "fact",
        tags: Tags = [],  # noqa: B006 (pydantic copies defaults)
        scope: Annotated[
            str | None,
            Field(description="Where it applies: a component or a relative path such as src/api."),
        ] = None,
        importance: Annotated[
            float, Field(ge=0, le=1, description="0 to 1; 0.7+ comes back at every resume.")
        ] = 0.5,
        source: Annotated[Source, Field(description="Who said it.")] = SOURCE.given,
        task: Annotated[str | None, Field(description="The task id it belongs to.")] = None,
        valid_until: Annotated[
            str | None,
            Field(description="Not valid from this date on (2026-12-01, or an age like 3d)."),
        ] = None,
        redact: Annotated[
            bool,
            Field(description="Store detected secrets as [REDACTED:type] instead of refusing."),
        ] = False,
        cite: Annotated[
            list[str],
            Field(
                description="Tracked files it is about: path, "
                "path:line or path::symbol (paths the "
                "content names are found as well); a "
                "file git does not track is refused."
            ),
        ] = [],  # noqa: B006
    ) -> RememberResult:
        """Store a durable memory: a decision and its reason, a user preference, a convention,
        a gotcha, a failure and its cause, a procedure. Use it for what will still be true next
        session, not for progress (task_progress) or a hand-over (session_handoff); for a fact
        about the code with file and line citations, use discovery_record.

        Side effects: appends an event to the store (durable when this returns; committed to
        git in batches). A near-duplicate of an active memory of the same kind and scope
        reinforces that memory instead of adding one (`duplicate` is then true). Close but
        different memories come back in `related`: if one is now wrong, retire it with
        memory_forget. Content that looks like a credential is refused unless redact is true.
        Paths it names that git tracks are pinned to their blob ids, so later reads say when
        that code changed (`freshness`)."""
        task_id = task
        return runtime_of(ctx).run(
            "memory_remember",
            WRITE,
            lambda e: remembered(
                e.remember(
                    content,
                    kind=kind,
                    tags=tags,
                    scope=scope,
                    importance=importance,
                    source=source,
                    task=task_id,
                    valid_until=valid_until,
                    redact=redact,
                    cite=cite,
                )
            ),
        )

    @tool(server, "Recall", read_only=True)
    def memory_recall(
        query: Annotated[
            str, Field(description="What you need, in words: a question or keywords.")
        ],
        ctx: Context,
        k: Annotated[int, Field(ge=1, le=50, description="At most this many results.")] = 10,
        kinds: Annotated[list[Kind], Field(description="Only these kinds.")] = [],  # noqa: B006
        tags: Annotated[list[str], Field(description="Only memories with all these tags.")] = [],  # noqa: B006
        scope: Annotated[str | None, Field(description="Only this scope.")] = None,
        task: Annotated[str | None, Field(description="Only memories of this task id.")] = None,
        since: Annotated[
            str | None, Field(description="Only memories from this date (or age, e.g. 7d) on.")
        ] = None,
        include_all: Annotated[
            bool, Field(description="Also forgotten, superseded, expired and decayed memories.")
        ] = False,
    ) -> RecallResult:
        """Search memories by meaning and by words (hybrid BM25 + embeddings, weighted by each
        memory's strength), best first. Use it before deciding or exploring something that may
        be known already. For the latest memories without a query use memory_list; for one
        memory in full, memory_get.

        Read-only (the first call loads the embedding model, a few seconds; if it cannot load,
        recall uses words only and says so in warnings). Contents longer than 2,000 characters
        are cut (`content_truncated`); the list is cut to fit the answer (`truncated`)."""

        def call(engram: Engram) -> RecallResult:
            hits = engram.recall(
                query,
                k=k,
                kinds=kinds,
                tags=tags,
                scope=scope,
                task=task,
                since=since,
                include_forgotten=include_all,
                include_expired=include_all,
                include_decayed=include_all,
                partial=True,  # the backlog is embedded in a worker thread, below
            )
            views = [
                RecallHit(
                    memory=memory_view(h.memory, fresh=h.freshness),
                    score=round(h.score, 4),
                    relevance=round(h.relevance, 4),
                    strength=round(h.strength, 4),
                )
                for h in hits
            ]
            kept, cut = fit(views)
            for backlog in hits.backlog:  # in a worker thread: other calls go on meanwhile
                backlog.start()
            note = (
                None
                if kept
                else ("nothing found; try other words, or memory_list for the latest memories")
            )
            if hits.partial:
                note = hits.partial_note(
                    "embedding them in the background; call again soon for a complete answer"
                )
            return RecallResult(
                query=query,
                hits=kept,
                truncated=cut,
                partial=hits.partial,
                unembedded=hits.unembedded,
                note=note,
            )

        return runtime_of(ctx).run("memory_recall", READ, call)

    @tool(server, "List recent memories", read_only=True)
    def memory_list(
        ctx: Context,
        limit: Annotated[int, Field(ge=1, le=100, description="At most this many.")] = 20,
        kinds: Annotated[list[Kind], Field(description="Only these kinds.")] = [],  # noqa: B006
        tags: Annotated[list[str], Field(description="Only memories with all these tags.")] = [],  # noqa: B006
        scope: Annotated[str | None, Field(description="Only this scope.")] = None,
        include_all: Annotated[
            bool,
            Field(description="Also forgotten memories and those outside their validity window."),
        ] = False,
    ) -> MemoryList:
        """The most recently changed memories, newest first, with no query: what is known, at
        the start of a session or before a broad task. To search, use memory_recall.

        Read-only. Contents longer than 2,000 characters are cut (`content_truncated`); the
        list is cut to fit the answer (`truncated`)."""

        def call(engram: Engram) -> MemoryList:
            found = engram.memories(
                kinds=kinds,
                tags=tags,
                scope=scope,
                limit=limit,
                include_forgotten=include_all,
                include_expired=include_all,
            )
            fresh = engram.freshness(found)
            kept, cut = fit([memory_view(m, fresh=fresh.get(m.id)) for m in found])
            return MemoryList(
                memories=kept,
                truncated=cut,
                note=None
                if kept
                else "no memories yet"
                if not (kinds or tags or scope)
                else "no memories match",
            )

        return runtime_of(ctx).run("memory_list", READ, call)

    @tool(server, "Get a memory", read_only=True)
    def memory_get(
        id: Id,  # the name agents expect
        ctx: Context,
        history: Annotated[bool, Field(description="Also every version, oldest first.")] = False,
    ) -> MemoryResult:
        """One memory in full, by id or unique prefix (from memory_recall, memory_list or a
        resume), optionally with every earlier version and who changed it.

        Read-only. The history is cut to fit the answer (`truncated`)."""

        def call(engram: Engram) -> MemoryResult:
            memory = engram.get(id)
            fresh = engram.freshness([memory], explain=True).get(memory.id)
            if not history:
                return MemoryResult(memory=memory_view(memory, limit=FULL_CHARS, fresh=fresh))
            versions = [
                Version(event=e.id, kind=e.kind, time=e.time, actor=e.actor, memory=memory_view(m))
                for e, m in engram.history(id)
            ]
            kept, cut = fit(versions[::-1])
            return MemoryResult(
                memory=memory_view(memory, limit=FULL_CHARS, fresh=fresh),
                history=kept[::-1],
                truncated=cut,
                note="the oldest versions were left out" if cut else None,
            )

        return runtime_of(ctx).run("memory_get", READ, call)

    @tool(server, "Update a memory", idempotent=True)
    def memory_update(
        id: Id,
        ctx: Context,
        content: Annotated[str | None, Field(description="New text (omit to keep).")] = None,
        kind: Annotated[Kind | None, Field(description="New kind (omit to keep).")] = None,
        tags: Annotated[
            list[str] | None, Field(description="New tags, replacing the old ones (omit to keep).")
        ] = None,
        scope: Annotated[str | None, Field(description="New scope (omit to keep).")] = None,
        importance: Annotated[
            float | None, Field(ge=0, le=1, description="New importance (omit to keep).")
        ] = None,
        valid_until: Annotated[
            str | None, Field(description="New end of validity (a date or an age like 3d).")
        ] = None,
        redact: Annotated[
            bool,
            Field(description="Store detected secrets as [REDACTED:type] instead of refusing."),
        ] = False,
    ) -> MemoryResult:
        """Change a memory's text or fields in place, when it was incomplete or slightly wrong
        (the earlier version stays in its history). When what it says is no longer true, use
        memory_forget (with replace_with for the new truth) instead.

        Side effects: appends a `memory.updated` event with only the changed fields. Giving
        only values it already has is an error (nothing to change)."""
        return runtime_of(ctx).run(
            "memory_update",
            WRITE,
            lambda e: MemoryResult(
                memory=memory_view(
                    e.update(
                        id,
                        content,
                        kind=kind,
                        tags=tags,
                        scope=scope,
                        importance=importance,
                        valid_until=valid_until,
                        redact=redact,
                    ),
                    limit=None,
                )
            ),
        )

    @tool(server, "Forget or supersede a memory", destructive=True, idempotent=True)
    def memory_forget(
        id: Id,
        ctx: Context,
        reason: Annotated[
            str | None,
            Field(
                description="Why it no longer holds (kept in its "
                "history). Required unless "
                "replace_with is given."
            ),
        ] = None,
        replace_with: Annotated[
            str | None,
            Field(
                description="The new truth: a new memory "
                "with this text (same kind, "
                "tags, scope, task) supersedes "
                "the old one."
            ),
        ] = None,
    ) -> ForgetResult:
        """Retire a memory that is wrong or obsolete, so it leaves recall, listings and
        resumes. With replace_with, a new memory holding the corrected text supersedes it in
        one step (use this when a fact changed); otherwise give the reason.

        Side effects: a tombstone (`memory.forgotten`) or a supersede event. Nothing is
        deleted: memory_get with history=true still shows it, but it cannot be brought back."""

        def call(engram: Engram) -> ForgetResult:
            if replace_with is None:
                if not reason or not reason.strip():
                    raise ToolError("say why in reason, or give the corrected text in replace_with")
                return ForgetResult(
                    memory=memory_view(engram.forget(id, reason=reason)), replacement=None
                )
            done = engram.supersede(id, replace_with)
            return ForgetResult(memory=memory_view(done.old), replacement=memory_view(done.new))

        return runtime_of(ctx).run("memory_forget", WRITE, call)

    @tool(server, "Consolidate near-duplicates", destructive=True, idempotent=True)
    def memory_consolidate(
        ctx: Context,
        apply: Annotated[
            bool, Field(description="Merge the clusters; false (default) only shows them.")
        ] = False,
        similarity: Annotated[
            float | None,
            Field(
                ge=0,
                le=1,
                description="Merge memories at "
                "least this similar "
                "(default: the "
                "consolidate."
                "similarity setting, "
                "0.90).",
            ),
        ] = None,
    ) -> ConsolidateResult:
        """Find clusters of near-duplicate memories of the same kind and scope; with
        apply=true, merge each into one memory (the longest text, all tags, the highest
        importance) that supersedes its members. Run it without apply first and read the
        clusters. For one wrong memory, use memory_forget.

        Side effects with apply=true: supersede events (the members' histories stay). Loads
        the embedding model (a few seconds the first time)."""

        def call(engram: Engram) -> ConsolidateResult:
            plans = engram.consolidate(apply=apply, similarity=similarity)
            clusters = [
                Cluster(
                    store=p.store,
                    members=[ClusterMember(id=m.id, summary=m.summary) for m in p.members],
                    content=p.content[:ITEM_CHARS],
                    kind=p.kind,
                    tags=list(p.tags),
                    importance=p.importance,
                    merged_into=p.merged_into,
                )
                for p in plans
            ]
            kept, cut = fit(clusters)
            note = (
                "no near-duplicates found"
                if not plans
                else f"merged {len(plans)} cluster(s)"
                if apply
                else f"{len(plans)} cluster(s) would be merged; call again with apply=true"
            )
            return ConsolidateResult(applied=apply, clusters=kept, truncated=cut, note=note)

        return runtime_of(ctx).run("memory_consolidate", WRITE, call)

    @tool(server, "Store statistics and server health", read_only=True)
    def memory_stats(ctx: Context) -> StatsResult:
        """Health and statistics: for each store, memory counts by kind and scope, average
        strength and whether the search indexes are current; for this server, its version,
        session, agent, client, the actor your events are attributed to, your scopes, and any
        problem (such as no store yet). Use it when something looks wrong.

        Read-only."""

        def call(engram: Engram) -> StatsResult:
            runtime = runtime_of(ctx)
            try:
                report = engram.stats()
            except EngramError as exc:  # no store: the runtime part still answers
                return StatsResult(stores=[], runtime=runtime.view(), warnings=[str(exc)])
            stores = [
                StoreStats(
                    store=r.store,
                    path=r.path,
                    memories=r.memories,
                    forgotten=r.forgotten,
                    superseded=r.superseded,
                    events=r.events,
                    by_kind=r.by_kind,
                    by_scope=r.by_scope,
                    average_strength=r.average_strength,
                    decayed=r.decayed,
                    index_current=r.index.current if r.index else None,
                    index=as_json(r.index),
                )
                for r in report
            ]
            return StatsResult(stores=stores, runtime=runtime.view())

        return runtime_of(ctx).run("memory_stats", READ, call)
