"""Memories: remember, update, forget, read and recall them, and fold near-duplicates.

Writing checks the input (limits, secrets), finds a near-duplicate to reinforce instead of
adding the same fact twice, and names related memories that may contradict the new one; recall
runs the pipeline of `engram.search.recall` over each store and notes what it found for the
session.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..base.config import LIST_LIMIT, RECALL_K, check_count
from ..base.errors import Fix, UsageError
from ..base.validation import Checks, well_formed
from ..model import memories as mem
from ..storage import events as ev
from . import citing, freshness
from .consolidation import ClusterMember as ClusterMember  # re-exported
from .consolidation import MergePlan as MergePlan
from .continuity.lifecycle import Sessions
from .workspace import Workspace

if TYPE_CHECKING:
    from ..search.backlog import Recalled
    from ..search.neardup import Difference
    from ..search.recall import Source


@dataclass(frozen=True)
class Remembered:
    """What `remember` did. Reads like the memory itself (`.id`, `.content`, ...)."""

    memory: mem.Memory
    duplicate: bool = False  # an existing memory was reinforced instead of adding one
    related: tuple[tuple[mem.Memory, float], ...] = ()  # (memory, similarity): may contradict
    # For related memories that say a different number, version, path, ... than the new text
    # (however similar): (memory id, what differs). Such a memory is never reinforced.
    differences: tuple[tuple[str, tuple[Difference, ...]], ...] = ()
    # Memories the near-duplicate check left out: without a vector yet after a bulk write.
    uncompared: int = 0

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name == "memory":
            raise AttributeError(name)
        return getattr(self.memory, name)

    def differs_from(self, memory_id: str) -> tuple[Difference, ...]:
        """What the new text says otherwise than a related memory (empty: only its wording)."""
        return next((found for other, found in self.differences if other == memory_id), ())

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.memory.to_dict(),
            "duplicate": self.duplicate,
            "related": [
                {
                    "id": m.id,
                    "similarity": round(sim, 4),
                    "summary": m.summary(),
                    "differences": [d.to_dict() for d in self.differs_from(m.id)],
                }
                for m, sim in self.related
            ],
            **({"uncompared": self.uncompared} if self.uncompared else {}),
        }


@dataclass(frozen=True)
class Superseded:
    """What `supersede` did: the old memory (now superseded) and the one that replaced it."""

    old: mem.Memory
    new: mem.Memory


class Memories:
    """Memories over a workspace's stores; what recall found is noted for the session."""

    def __init__(self, workspace: Workspace, lifecycle: Sessions) -> None:
        self.workspace = workspace
        self.lifecycle = lifecycle

    def remember(
        self,
        content: str,
        *,
        kind: str = mem.DEFAULT_KIND,
        tags: Iterable[str] = (),
        scope: str | None = None,
        source: str = mem.DEFAULT_SOURCE,
        importance: float = mem.DEFAULT_IMPORTANCE,
        valid_from: str | datetime | None = None,
        valid_until: str | datetime | None = None,
        at: str | datetime | None = None,
        task: str | None = None,
        supersedes: Sequence[str] = (),
        redact: bool = False,
        check_duplicates: bool | None = None,
        everywhere: bool = False,
        cite: Sequence[str] = (),
        relative_to: Path | None = None,
    ) -> Remembered:
        """Store a memory durably (fsynced before this returns).

        A near-duplicate of an active memory of the same kind and scope reinforces that memory
        instead of adding a new one (`duplicate` is then True and `memory` is the existing one;
        the `memory.reinforced` event keeps the text given here). Close but different ones come
        back in `related`, as possible contradictions to supersede explicitly, and so does the
        same text of another kind or scope. However similar, a memory that says a different
        number, version, identifier, path, URL, date, quoted text or the opposite, or puts
        another content word in place of one (supported -> deprecated), is not a duplicate: the
        new text is added and `differs_from(id)` says what differs.

        Written to the personal store inside a git repository, the memory belongs to that
        project (its root commit, `engram.git.identity`) and is recalled only there, unless
        `everywhere`.
        """
        store = self.workspace.write_store()
        settings = self.workspace.settings(store)
        checks = Checks(settings)
        content = self._checked_content(content, checks, redact)
        data: dict[str, Any] = {
            "memory": ev.new_entity_id(),
            "content": content,
            "kind": mem.check_kind(kind),
            "tags": list(checks.tags(tags)),
            "scope": checks.optional_name(scope, what="scope"),
            "source": mem.check_source(source),
            "importance": mem.check_importance(importance),
            "valid_from": _moment(valid_from, "--valid-from"),
            "valid_until": _moment(valid_until, "--valid-until"),
        }
        mem.check_window(data["valid_from"], data["valid_until"])
        data.update(citing.pin(self.workspace, content, cite, relative_to=relative_to))
        here = self.workspace.here() if store.kind == "personal" and not everywhere else None
        if here is not None and here.root is not None:
            data["project"] = here.root
        if here is not None and here.remote is not None:
            try:
                data["project_remote"] = checks.text(
                    here.remote, field="remote URL", limit="limits.item_bytes"
                )
            except UsageError:
                pass  # a hint only: a remote URL that fails the checks is not kept
        if at is not None:
            data["at"] = _moment(at, "--at", future=False)
        if task is not None:
            data["task"] = self.workspace.find_task(task, items=False)[1].id
        old = [self.workspace.find_memory(ident) for ident in supersedes]
        for old_store, old_memory in old:
            if old_store.root != store.root:
                raise UsageError(
                    f"memory {old_memory.id[:8]} is in the {old_store.kind} store; "
                    f"a memory can only supersede one in its own store"
                )
            if old_memory.status != "active":
                raise UsageError(f"memory {old_memory.id[:8]} is {old_memory.status} already")
        check = (
            settings["remember.check_duplicates"] if check_duplicates is None else check_duplicates
        )
        if check:
            from . import duplicates  # the embedding and the comparison of facts
        if old:
            data["supersedes"] = [m.id for _, m in old]
            same = (
                duplicates.stored_as(self.workspace, store, data, skip={m.id for _, m in old})
                if check
                else None
            )
            if same is not None:
                # The text is stored already: remember added it and reported these as possible
                # contradictions, and the caller now says they are replaced. Point them at it
                # rather than storing the same text twice.
                self.workspace.emit_many(
                    store, [("memory.superseded", {"memory": m.id, "by": same.id}) for _, m in old]
                )
                return Remembered(self.workspace.find_memory(same.id)[1])

        related: list[tuple[mem.Memory, float, tuple[Difference, ...]]] = []
        uncompared = 0
        if check and not old:
            # `content` passed the secret checks above: the reinforcement below keeps it.
            duplicate, related, uncompared = duplicates.near(
                self.workspace,
                store,
                settings,
                content,
                kind=data["kind"],
                tags=data["tags"],
                scope=data["scope"],
                project=data,
            )
            if duplicate is not None:
                existing, similarity = duplicate
                self.workspace.emit(
                    store,
                    "memory.reinforced",
                    {"memory": existing.id, "similarity": round(similarity, 4), "content": content},
                )
                return Remembered(
                    self.workspace.find_memory(existing.id)[1],
                    duplicate=True,
                    related=((existing, similarity),),
                    uncompared=uncompared,
                )
        items = [("memory.created", data)]
        items += [("memory.superseded", {"memory": m.id, "by": data["memory"]}) for _, m in old]
        created = self.workspace.emit_many(store, items)[0]
        self._warn_if_expired(data["valid_until"])
        memory = mem.fold([created])
        assert memory is not None
        return Remembered(
            mem.Memory.from_dict({**memory.to_dict(), "store": store.kind}),
            related=tuple((m, sim) for m, sim, _ in related),
            differences=tuple((m.id, found) for m, _, found in related if found),
            uncompared=uncompared,
        )

    @staticmethod
    def _checked_content(content: str, checks: Checks, redact: bool) -> str:
        return checks.text(
            content,
            field="content",
            limit="limits.content_bytes",
            redact=redact,
            hint="shorten it or split it into several memories",
        )

    def update(
        self,
        memory_id: str,
        content: str | None = None,
        *,
        kind: str | None = None,
        tags: Iterable[str] | None = None,
        scope: str | None = None,
        source: str | None = None,
        importance: float | None = None,
        valid_from: str | datetime | None = None,
        valid_until: str | datetime | None = None,
        redact: bool = False,
    ) -> mem.Memory:
        """Change a memory: a new event with only the changed fields. The old version stays."""
        store, current = self.workspace.find_memory(memory_id)
        if current.status == "forgotten":
            raise UsageError(
                f"memory {current.id[:8]} was forgotten; "
                "remember the new text instead of updating it"
            )
        checks = self.workspace.checks(store)
        changes: dict[str, Any] = {}
        if content is not None:
            changes["content"] = self._checked_content(content, checks, redact)
            kept = citing.given(current.content, current.citations)
            changes["citations"] = citing.pin(self.workspace, content, keep=kept).get(
                "citations", []
            )
        if kind is not None:
            changes["kind"] = mem.check_kind(kind)
        if tags is not None:
            changes["tags"] = list(checks.tags(tags))
        if scope is not None:
            changes["scope"] = checks.optional_name(scope, what="scope")
        if source is not None:
            changes["source"] = mem.check_source(source)
        if importance is not None:
            changes["importance"] = mem.check_importance(importance)
        if valid_from is not None:
            changes["valid_from"] = _moment(valid_from, "--valid-from")
        if valid_until is not None:
            changes["valid_until"] = _moment(valid_until, "--valid-until")
        mem.check_window(
            changes.get("valid_from", current.valid_from),
            changes.get("valid_until", current.valid_until),
        )
        old = current.to_dict()
        changes = {k: v for k, v in changes.items() if old.get(k) != v}
        if not changes:
            raise UsageError("nothing to change: give new text or a changed option")
        self.workspace.emit(store, "memory.updated", {"memory": current.id, **changes})
        self._warn_if_expired(changes.get("valid_until"))
        return self.workspace.find_memory(current.id)[1]

    def _warn_if_expired(self, valid_until: str | None) -> None:
        """Say so when a memory is written with an end already past: it is kept, unseen."""
        if valid_until and ev.parse_time(valid_until) <= ev.utc_now():
            self.workspace.warn(
                f"the memory is valid until {valid_until[:10]}, which has passed: it is "
                "expired already, and recall and lists leave it out (give a later date, or none)"
            )

    def forget(self, memory_id: str, *, reason: str) -> mem.Memory:
        """Retire a memory with a reason (a tombstone event). Its history stays readable."""
        if not reason or not reason.strip():
            raise UsageError("say why with --reason; it is kept with the memory's history")
        store, current = self.workspace.find_memory(memory_id)
        reason = self.workspace.checks(store).text(
            reason, field="reason", limit="limits.item_bytes"
        )
        if current.status == "forgotten":
            raise UsageError(f"memory {current.id[:8]} is already forgotten")
        if current.status == "superseded":  # retired already, as memory_forget's replace_with says
            by = (current.superseded_by or "")[:8]
            raise UsageError(
                f"memory {current.id[:8]} is superseded already (by {by}) and no longer recalled",
                Fix(
                    f"if {by} is wrong too, forget that one (`engram forget {by}`)",
                    f"if {by} is wrong too, forget that one (memory_forget id={by})",
                ),
            )
        self.workspace.emit(store, "memory.forgotten", {"memory": current.id, "reason": reason})
        return self.workspace.find_memory(current.id)[1]

    def get(self, memory_id: str) -> mem.Memory:
        return self.workspace.find_memory(memory_id)[1]

    def supersede(self, memory_id: str, content: str, *, redact: bool = False) -> Superseded:
        """Replace a memory that is no longer true: a new memory holding `content`, with the
        old one's kind, tags, scope, importance, source and task, supersedes it in one step."""
        old = self.get(memory_id)
        new = self.remember(
            content,
            kind=old.kind,
            tags=old.tags,
            scope=old.scope,
            importance=old.importance,
            source=old.source,
            task=old.task,
            supersedes=[old.id],
            redact=redact,
        )
        return Superseded(old=self.get(old.id), new=new.memory)

    def history(self, memory_id: str) -> list[tuple[ev.Event, mem.Memory]]:
        store, memory = self.workspace.find_memory(memory_id)
        events = self.workspace.projection(store).entity_events(memory.id)
        return [
            (e, mem.Memory.from_dict({**m.to_dict(), "store": store.kind}))
            for e, m in mem.history(events)
        ]

    def memories(
        self,
        *,
        kinds: Sequence[str] = (),
        tags: Sequence[str] = (),
        scope: str | None = None,
        limit: int | None = 20,
        include_forgotten: bool = False,
        include_expired: bool = False,
        contains: str | None = None,
    ) -> list[mem.Memory]:
        """Memories, most recently changed first, from the selected stores."""
        limit = check_count(limit, "limit", LIST_LIMIT)
        for kind in kinds:
            mem.check_kind(kind)
        checks = self.workspace.checks()
        tags = checks.filter_names(tags, what="tag")
        if scope is not None:
            scope = checks.optional_name(scope, what="scope")
        if contains is not None:
            contains = well_formed(contains, "the text to look for")
        now = ev.utc_now()
        statuses = () if include_forgotten else ("active",)
        out: list[mem.Memory] = []
        for store in self.workspace.stores():
            count = 0
            for memory in self.workspace.projection(store).memories(
                kinds=kinds,
                tags=tags,
                scope=scope,
                statuses=statuses,
                contains=contains,
            ):
                if not include_expired and not memory.valid_at(now):
                    continue
                if not self.workspace.belongs_here(store, memory):
                    continue
                out.append(memory)
                count += 1
                if limit is not None and count >= limit:
                    break
        out.sort(key=lambda m: (m.updated_clock, m.id), reverse=True)
        return out[:limit] if limit is not None else out

    def recall(
        self,
        query: str,
        *,
        k: int = 10,
        kinds: Sequence[str] = (),
        tags: Sequence[str] = (),
        scope: str | None = None,
        task: str | None = None,
        since: str | datetime | None = None,
        until: str | datetime | None = None,
        include_forgotten: bool = False,
        include_expired: bool = False,
        include_decayed: bool = False,
        now: datetime | None = None,
        partial: bool = False,
    ) -> Recalled:
        """Memories by meaning and by words, fused, weighted by strength, best first.

        Superseded, forgotten, expired and fully decayed memories are left out unless asked for.
        `now` is the moment strength and validity are judged at (default: now).
        """
        from ..search import ranking
        from ..search import recall as pipeline
        from ..search.backlog import Recalled

        checks = self.workspace.checks()
        query, k = checks.query(query), check_count(k, "k", RECALL_K)
        for kind in kinds:
            mem.check_kind(kind)
        wanted_tags = set(checks.filter_names(tags, what="tag"))
        if scope is not None:
            scope = checks.optional_name(scope, what="scope")
        if task is not None:
            task = self.workspace.find_task(task, items=False)[1].id
        moment = now or ev.utc_now()
        since_text = _moment(since, "--since", future=False) if since else None
        until_text = _moment(until, "--until", future=False) if until else None
        intent = ranking.analyse(query, moment)
        if not ranking.has_content(query, intent):
            return Recalled()  # "the", "what is it": words that carry no meaning ask for nothing
        filters = pipeline.Filters(
            kinds=tuple(kinds),
            tags=frozenset(wanted_tags),
            scope=scope,
            task=task,
            since=since_text,
            until=until_text,
            include_forgotten=include_forgotten,
            include_expired=include_expired,
            include_decayed=include_decayed,
        )
        hits = pipeline.rank(
            query, intent, self._sources(leave_backlog=partial), k=k, filters=filters, moment=moment
        )
        hits = freshness.rerank(self.workspace, hits)  # stale ones a little lower
        self.lifecycle.note_recalled([hit.memory.id for hit in hits[:3]])  # relied on
        return Recalled(
            hits,
            [s.backlog for s in map(self.workspace.search, self.workspace.stores()) if s.backlog],
        )

    def _sources(self, *, leave_backlog: bool = False) -> Iterator[Source]:
        """Each selected store as recall reads it, opened as the ranking reaches it; with
        `leave_backlog`, a store's many memories without a vector are left for later (`Backlog`)."""
        from ..search.recall import Source

        for store in self.workspace.stores():
            settings = self.workspace.settings(store)
            proj = self.workspace.projection(store)
            search = self.workspace.search(store)
            search.allow_partial = leave_backlog
            embedder = self.workspace.embedder(store)
            belongs = None
            if store.kind == "personal" and self.workspace.here() is not None:
                belongs = partial(self.workspace.belongs_here, store)
            yield Source(store, settings, proj, search, embedder, belongs)

    def consolidate(
        self,
        *,
        apply: bool = False,
        similarity: float | None = None,
    ) -> list[MergePlan]:
        """Clusters of near-duplicate memories, each merged into one with `apply`
        (`engram.domain.consolidation`)."""
        from .consolidation import consolidate

        return consolidate(self.workspace, apply=apply, similarity=similarity)


def _moment(value: str | datetime | None, what: str, *, future: bool = True) -> str | None:
    if value is None or value == "":
        return None
    moment = (
        value if isinstance(value, datetime) else mem.parse_moment(value, what=what, future=future)
    )
    if moment.tzinfo is None:
        from datetime import UTC

        moment = moment.replace(tzinfo=UTC)
    return ev.format_time(moment)
