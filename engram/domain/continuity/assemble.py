"""What a resume gathers for its task, given to `rehydrate.render`: the latest checkpoint with the
work done since the last handoff folded in (`since`), the task's failures and those of its files,
its memories ranked (`taskmemory`), the working set as the code is now (`workingset`), recent
events, interruptions; then the other memories the restore mode asks for.

How much comes in is the depth's (`DEPTH` in engram.base.vocab): brief and standard are bounded
by a token budget, filled by priority, naming what was left out; full has no budget and carries
the whole history (every event of the task, every earlier checkpoint)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ...base.errors import EngramError
from ...base.vocab import DEPTH
from ...model import tasks
from ...model.memories import Memory
from ...storage import events as ev
from ..freshness import Judge
from ..messages import describe
from . import checkpoints as cp
from . import rehydrate, since, taskmemory, workingset
from .handoffs import checkpoint_from

if TYPE_CHECKING:
    from ...storage.store import Store
    from .service import Continuity


def depth_of(name: str) -> Mapping[str, Any]:
    """The depth's figures: events, summaries (None: all), tokens (None: no budget), memories."""
    return next(term.data for term in DEPTH.terms if term.name == name)


def _commits(store: Store, handoff: Mapping[str, Any]) -> tuple[list[Any] | None, str | None]:
    """The commits of the project since `handoff` and the store's folder in the project (None,
    None for a personal store, whose repository holds only Engram's commits)."""
    if store.kind == "personal":
        return None, None
    from ...git.tracked import TrackedFiles

    store_dir = store.root.relative_to(store.work_tree).as_posix()
    try:
        repo = TrackedFiles(store.work_tree)
    except EngramError:
        return None, store_dir
    head = handoff.get("head") if isinstance(handoff.get("head"), str) else None
    return repo.commits_since(head, after=str(handoff.get("time") or "") or None), store_dir


def build(
    service: Continuity,
    *,
    store: Store | None,
    chosen: tasks.Task | None,
    depth: str,
    since_clock: int | None,
    since_text: str | datetime | None,
    restore: str,
    limit: int,
    max_tokens: int | None,
) -> rehydrate.Resume:
    """The resume of `chosen` (None: memories and recent events only)."""
    figures = depth_of(depth)
    events_wanted, summaries_wanted = figures["events"], figures["summaries"]
    if max_tokens is None:
        max_tokens = figures["tokens"]
    checkpoint: Mapping[str, Any] | None = None
    confidence = None
    after: since.Since | None = None
    earlier: list[Mapping[str, Any]] = []
    failures: list[tasks.Failure] = []
    ranked: list[Memory] = []
    events: list[tuple[ev.Event, str]] = []
    interruptions = []
    working: list[workingset.FileState] = []
    more_memories = 0
    if chosen is not None and store is not None:
        proj = service.workspace.projection(store)
        checkpoint = chosen.latest_checkpoint
        ranked = taskmemory.for_task(proj, chosen, limit=200)
        # The depth's share of them, best ranked first; how many more there are is said.
        more_memories = max(0, len(ranked) - figures["memories"])
        ranked = ranked[: figures["memories"]]
        if checkpoint:
            files = workingset.pinned((checkpoint.get("working_set") or {}).get("files"))
            confidence = cp.confidence(
                checkpoint,
                saved_at=checkpoint["time"],
                now=ev.utc_now(),
                unchanged=service.handoffs.unchanged_share(store, files),
            )
            all_checkpoints = [
                {"task": chosen.id, **checkpoint_from(e, seq)}
                for seq, e in enumerate(
                    service.handoffs.checkpoint_events(store, chosen.id), start=1
                )
            ]
            earlier = list(reversed(all_checkpoints[:-1]))[:summaries_wanted]
            handoff = since.last_handoff(all_checkpoints) or checkpoint
            commits, store_dir = _commits(store, handoff)
            after = since.gather(
                chosen,
                handoff,
                checkpoints=all_checkpoints,
                memories=ranked,
                commits=commits,
                store_dir=store_dir,
            )
            checkpoint = since.fold(checkpoint, after)
            # The working set as the code is now, and the files worked on since the handoff.
            paths = [f["path"] for f in files]
            for item in after.progress:
                paths += [p for p in item.files if p not in paths]
            extra = [{"path": p} for p in paths[len(files) :]]
            working = workingset.current(store.work_tree, [*files, *extra])
        failures = list(chosen.failures)
        components = {f.component for f in chosen.failures if f.component}
        paths = [
            f["path"]
            for f in workingset.pinned(((checkpoint or {}).get("working_set") or {}).get("files"))
        ]
        for other in service.failures_for(files=paths):
            if other.task != chosen.id and other.component not in components:
                failures.append(
                    tasks.Failure(
                        event=other.event,
                        clock=other.clock,
                        time=other.time,
                        actor=other.actor,
                        session=other.session,
                        error=other.error,
                        component=other.component,
                        root_cause=other.root_cause,
                        fix=other.fix,
                    )
                )
        raw = proj.events(task=chosen.id, since_clock=since_clock, limit=events_wanted)
        events = [(e, describe(e)) for e in raw if ev.substantive(e.kind)]
        worked_in = proj.entity_sessions(chosen.id)
        for info in proj.sessions(states=["interrupted"], ids=sorted(worked_in)):
            interruptions.append(
                {
                    "id": info.id,
                    "agent": info.agent,
                    "machine": info.machine,
                    "reason": info.reason,
                    "evidence": info.evidence,
                }
            )
        interruptions = interruptions[:1]
    others: list[Memory] = []
    if restore != "none":
        # The newest valid ones, project store first: all of them for "full", for
        # "selective" the important and the traps (Projection's NOTABLE), read by index.
        seen = {m.id for m in ranked}
        wanted = figures["memories"] if restore == "selective" else 200
        now = ev.utc_now()
        for candidate in service.workspace.stores():
            reader = service.workspace.projection(candidate)
            if len(others) < wanted:
                others += reader.recent_memories(
                    wanted - len(others), now=now, exclude=seen, notable=restore == "selective"
                )
    if chosen is None:
        events = [(e, describe(e)) for e in service.recent_events(events_wanted or 200, since_text)]
    return rehydrate.render(
        task=chosen,
        checkpoint=checkpoint,
        confidence=confidence,
        earlier=earlier,
        failures=failures,
        freshness=Judge(service.workspace).many([*ranked, *others]),
        decisions=[m for m in ranked if m.kind == "decision"],
        gotchas=[m for m in ranked if m.kind in taskmemory.TRAPS],
        facts=[m for m in ranked if m.kind not in ("decision", *taskmemory.TRAPS)],
        memories=others,
        events=events,
        interruptions=interruptions,
        limit=limit,
        max_tokens=max_tokens,
        since=after,
        working=working,
        more_memories=more_memories,
    )
