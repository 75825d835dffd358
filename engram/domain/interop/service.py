"""Import, export, browse and the task timeline, over a workspace's stores.

The work is done by the readers in this package, `engram.export`, `engram.browse` and
`engram.timeline`; the methods here open the store, check, write and commit.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...base import layout
from ...base.errors import EngramError, GitError, UsageError
from ...base.files import atomic_write
from ...storage import events as ev
from ..continuity.handoffs import checkpoint_from
from ..messages import describe
from ..workspace import Workspace

if TYPE_CHECKING:
    from ...storage.store import Store
    from ..browse import Browse
    from ..timeline import Timeline
    from . import Input, Plan


SHOWN = 100  # changes listed in a report (all are counted)


@dataclass
class ImportReport:
    """What an import did (or, with `dry_run`, would do)."""

    format: str
    source: str
    store: str
    read: int
    added: list[tuple[str, str]] = field(default_factory=list)  # (kind, description): created
    already: int = 0  # records already in the store: not written again
    ignored: dict[str, int] = field(default_factory=dict)  # source records with no counterpart
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (file:line, why), the first
    skipped_count: int = 0  # source records left out: damaged, or failing the checks
    # Records that change what the store holds (see `changes`): (file:line, what), the first.
    changes: list[tuple[str, str]] = field(default_factory=list)
    changes_count: int = 0
    changes_allowed: bool = False  # written (--allow-changes), else refused and not written
    dry_run: bool = False
    commit: str | None = None

    def counts(self) -> dict[str, int]:
        return dict(Counter(kind for kind, _ in self.added).most_common())

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": self.format,
            "source": self.source,
            "store": self.store,
            "read": self.read,
            "added": len(self.added),
            "by_kind": self.counts(),
            "already": self.already,
            "ignored": self.ignored,
            "skipped": self.skipped_count,
            "skipped_records": [{"where": where, "reason": why} for where, why in self.skipped],
            "changes": self.changes_count,
            "changes_allowed": self.changes_allowed,
            "change_records": [{"where": where, "change": what} for where, what in self.changes],
            "dry_run": self.dry_run,
            "commit": self.commit,
            "events": [{"kind": kind, "description": text} for kind, text in self.added],
        }


@dataclass(frozen=True)
class JsonlExport:
    """What `export` wrote as JSON Lines: the file and how many events."""

    format: str
    path: str
    events: int


@dataclass(frozen=True)
class MarkdownExport:
    """What `export` wrote as Markdown: the directory, its files, tasks and memories."""

    format: str
    path: str
    files: int
    tasks: int
    memories: int


ExportReport = JsonlExport | MarkdownExport


class Interop:
    """Bringing records in from other tools and files, and writing them out."""

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace

    # -- import ----------------------------------------------------------------------------

    def import_from(
        self,
        path: str | Path,
        *,
        format: str | None = None,
        dry_run: bool = False,
        redact: bool = False,
        allow_changes: bool = False,
    ) -> ImportReport:
        """Bring in an mcp-engram data directory, an MCP memory graph or an Engram export.

        The input is untrusted. Everything is read and checked before anything is written; a
        record that is damaged or fails the checks of a write is left out and reported in
        `skipped` (file, line, why). Input over `limits.import_bytes` raises a `UsageError`
        and nothing is written. Records already in the store are not written again, so a
        second import adds nothing. An import creates: a record that would change a memory,
        task or session the store holds (see `changes`) is left out and listed in `changes`,
        unless `allow_changes`.
        """
        from . import Input, Plan, check_format, detect
        from . import changes as ch

        source = Path(path)
        if not source.is_absolute():
            source = self.workspace.cwd / source
        if not source.exists():
            raise UsageError(
                f"{source} does not exist; give an mcp-engram data directory, a "
                "memory.jsonl, or a file written by `engram export`"
            )
        store = self.workspace.write_store()
        settings = self.workspace.settings(store)
        line_bytes = settings["limits.import_line_bytes"]
        fmt = check_format(format) if format else detect(source, line_bytes=line_bytes)
        reader = Input(
            Plan(fmt, source), line_bytes=line_bytes, total_bytes=settings["limits.import_bytes"]
        )
        plan = self._read_source(store, source, reader, redact=redact)
        if (
            fmt == "engram-go"
            and store.kind == "personal"
            and (source.is_dir() or source.name.endswith((".jsonl.gz", "manifest.json")))
        ):
            _belong_to_project(plan, source, self.workspace.personal)
        proj = self.workspace.projection(store)
        fresh = []
        known_memories = proj.memories_by_id([r.key for r in plan.records if r.key])
        for record in plan.records:
            if record.event is not None:
                if any(proj.event(i) is not None for i in (record.event.id, *record.sources)):
                    continue
            elif record.key in known_memories:
                continue
            fresh.append(record)
        already = len(plan.records) - len(fresh)
        described = [_describe(r.kind, r.data) for r in fresh]
        found = ch.find(proj, fresh, described)
        added = [(r.kind, described[i]) for i, r in enumerate(fresh) if i not in found]
        if not allow_changes:
            fresh = [r for i, r in enumerate(fresh) if i not in found]
        report = ImportReport(
            format=fmt,
            source=str(source),
            store=store.kind,
            read=plan.read,
            added=added,
            already=already,
            ignored=dict(plan.ignored),
            skipped=list(plan.skipped),
            skipped_count=plan.skipped_count,
            changes=[(c.where, c.text) for c in found.values()][:SHOWN],
            changes_count=len(found),
            changes_allowed=allow_changes,
            dry_run=dry_run,
        )
        if dry_run or not fresh:
            return report
        fixed = [r.event for r in fresh if r.event is not None]
        live = [(r.kind, r.data) for r in fresh if r.event is None]
        if fixed:
            self._append_fixed(store, fixed)
        if live:
            self.workspace.emit_many(store, live, commit=False)
        self._render_imported_checkpoints(store, {e.id for e in fixed})
        subject = f"import: {len(fresh)} events from {fmt} ({source.name})"
        try:
            report.commit = self.workspace.commit_store(store, subject=subject).commit
        except GitError as exc:
            self.workspace.warnings.append(
                f"the {len(fresh)} imported event(s) are saved but not committed yet: {exc}"
            )
        return report

    def _read_source(self, store: Store, source: Path, reader: Input, *, redact: bool) -> Plan:
        from ...base.validation import Checks
        from . import Checker

        check = Checker(Checks(self.workspace.settings(store)), redact=redact)
        fmt = reader.plan.format
        if fmt == "mcp-engram":
            from . import mcp_engram

            return mcp_engram.read(source, check, reader)
        if fmt == "engram-go":
            from . import engram_go

            return engram_go.read(source, check, reader)
        if fmt == "mcp-memory":
            from . import mcp_memory

            return mcp_memory.read(source, check, reader)
        from . import engram_jsonl

        return engram_jsonl.read(source, check, reader, self.workspace.actor(store))

    def _append_fixed(self, store: Store, events: list[ev.Event]) -> None:
        """Append events whose ids, clocks and times are fixed (they come from elsewhere).

        They go into new files of their own, one per month, each starting a new writer: their
        clocks are older than this writer's, and within a file clocks must increase.
        """
        from ...storage.local import WriterState

        runs: list[list[ev.Event]] = []
        for event in sorted(events, key=lambda e: e.sort_key):
            last = runs[-1][-1] if runs else None
            if last is not None and last.time[:7] == event.time[:7] and last.clock < event.clock:
                runs[-1].append(event)
            else:
                runs.append([event])
        skew = self.workspace.settings(store)["clock.max_skew"] * 1_000_000
        with store.lock():
            for run in runs:
                state = WriterState.load(store)
                state.writer = None
                state.segment = None
                state.save(store)
                store.append(run, skew_us=skew)  # followed like any clock from elsewhere
            self.workspace.warnings.extend(store.repairs)
            store.repairs.clear()

    def _render_imported_checkpoints(self, store: Store, imported: set[str]) -> None:
        """Imported handoffs get their review Markdown, like every handoff (automatic
        checkpoints have none)."""
        from ..continuity import checkpoints as cp

        proj = self.workspace.projection(store)
        tasks = {
            e.data["task"]
            for e in (proj.event(i) for i in imported)
            if e is not None and e.kind == "checkpoint.saved"
        }
        for task_id in sorted(tasks):
            found = proj.tasks(ids=[task_id])
            if not found:
                continue
            task = found[0].to_dict()
            previous = None
            saved = [e for e in proj.entity_events(task_id) if e.kind == "checkpoint.saved"]
            for seq, event in enumerate(saved, start=1):
                checkpoint = checkpoint_from(event, seq)
                if not cp.rendered(checkpoint.get("reason")):
                    continue
                if (
                    event.id in imported
                    and isinstance(checkpoint.get("seq"), int)
                    and isinstance(checkpoint.get("confidence"), (int, float))
                ):
                    target = store.root / cp.render_path(task_id, checkpoint)
                    if not target.exists():
                        target.parent.mkdir(parents=True, exist_ok=True)
                        atomic_write(
                            target,
                            cp.render(task, checkpoint, previous),
                            durable=False,
                            hidden=True,
                        )
                previous = checkpoint

    # -- export ----------------------------------------------------------------------------

    def export_events(self) -> list[ev.Event]:
        """Every event of the selected stores, each once, in (clock, id) order."""
        seen: dict[str, ev.Event] = {}
        for store in self.workspace.stores():
            for event in self.workspace.projection(store).events(limit=None, newest_first=False):
                seen.setdefault(event.id, event)
        return sorted(seen.values(), key=lambda e: e.sort_key)

    def export(
        self,
        out: str | Path,
        *,
        format: str = "jsonl",
        force: bool = False,
    ) -> ExportReport:
        """Write the selected stores out: `jsonl` (the events, re-importable with `engram
        import`) or `markdown` (a directory: one file per task, the memories by kind)."""
        from .. import export as ex

        target = Path(out)
        if not target.is_absolute():
            target = self.workspace.cwd / target
        if format == "jsonl":
            events = self.export_events()
            ex.write_jsonl(target, events, force=force)
            return JsonlExport(format, str(target), len(events))
        if format != "markdown":
            raise UsageError(f"unknown export format {format!r}; use jsonl or markdown")
        if str(out) == "-":
            raise UsageError("Markdown is written to a directory, not to stdout; give its path")
        stores = []
        for store in self.workspace.stores():
            proj = self.workspace.projection(store)
            tasks = proj.tasks()
            checkpoints = {
                task.id: [
                    checkpoint_from(e, seq)
                    for seq, e in enumerate(
                        (e for e in proj.entity_events(task.id) if e.kind == "checkpoint.saved"),
                        start=1,
                    )
                ]
                for task in tasks
            }
            stores.append(
                ex.StoreContent(
                    kind=store.kind,
                    path=str(store.root),
                    tasks=tasks,
                    checkpoints=checkpoints,
                    memories=list(proj.memories(statuses=())),
                    events=proj.counts()["events"],
                )
            )
        written = ex.write_markdown(target, stores, force=force)
        return MarkdownExport(
            format,
            str(target),
            files=len(written),
            tasks=sum(len(s.tasks) for s in stores),
            memories=sum(len(s.memories) for s in stores),
        )

    # -- browse ----------------------------------------------------------------------------

    def browse(self) -> Browse:
        """What `engram browse` shows (`engram.browse.Browse`): every memory of the selected
        stores (forgotten and superseded ones too) with its history, and every task with its
        checkpoints. Inside a repository, personal memories of other projects are left out,
        as `memories` and `recall` leave them out."""
        from dataclasses import replace

        from .. import browse as br

        memories: list[br.MemoryCard] = []
        tasks: list[br.TaskCard] = []
        stores: list[tuple[str, str]] = []
        for store in self.workspace.stores():
            proj = self.workspace.projection(store)
            stores.append((store.kind, str(store.root)))
            for memory in proj.memories(statuses=()):
                if not self.workspace.belongs_here(store, memory):
                    continue
                history = [
                    (e.time, e.actor, e.kind, _one(describe, e))
                    for e in proj.entity_events(memory.id)
                ]
                memories.append(br.MemoryCard(replace(memory, store=store.kind), history))
            for task in proj.tasks():
                saved = [e for e in proj.entity_events(task.id) if e.kind == "checkpoint.saved"]
                tasks.append(
                    br.TaskCard(
                        {**task.to_dict(), "store": store.kind},
                        [checkpoint_from(e, seq) for seq, e in enumerate(saved, start=1)],
                    )
                )
        memories.sort(key=lambda c: (c.memory.updated_at, c.memory.id), reverse=True)
        tasks.sort(key=lambda c: (c.task["updated_at"], c.task["id"]), reverse=True)
        return br.Browse(stores, memories, tasks, ev.format_time(ev.utc_now()))

    # -- timeline --------------------------------------------------------------------------

    def timeline(self, ident: str) -> Timeline:
        """A task's history in time: its progress, failures, checkpoints (and how the handoff
        changed between them), decisions and other memories, and the sessions that worked on
        it, with who and on which machine."""
        from .. import timeline as tl

        store, task = self.workspace.find_task(ident)
        proj = self.workspace.projection(store)
        events = proj.events(task=task.id, limit=None, newest_first=False)
        sessions = sorted({e.session for e in events if e.session})
        for session_id in sessions:
            events.extend(proj.entity_events(session_id))
        unique = {e.id: e for e in events}
        return tl.build(task, sorted(unique.values(), key=lambda e: e.sort_key))


def _belong_to_project(plan: Plan, source: Path, personal: Store) -> None:
    """The Go engram's sync folder holds the memories of the project it is in (`engram sync`
    writes those of the current directory's project): in the personal store they belong to
    that repository's project, as memories written there do (engram.git.identity)."""
    from ...git.identity import project_of

    cache = layout.cache_dir(personal.local_dir) if personal.exists() else None
    here = project_of(source if source.is_dir() else source.parent, cache)
    if here is None or (here.root is None and here.remote is None):
        return
    for record in plan.records:
        if record.kind == "memory.created" and record.event is None:
            if here.root is not None:
                record.data["project"] = here.root
            if here.remote is not None:
                record.data["project_remote"] = here.remote


def _one(describe: Any, event: ev.Event) -> str:
    try:
        return str(describe(event))
    except (KeyError, TypeError, ValueError, EngramError):
        return event.kind


def _describe(kind: str, data: dict[str, Any]) -> str:
    try:
        return describe(
            ev.Event(
                id="0" * 26,
                kind=kind,
                clock=0,
                time="",
                actor="",
                session=None,
                machine=None,
                data=data,
            )
        )
    except (KeyError, TypeError, ValueError, EngramError):
        return kind
