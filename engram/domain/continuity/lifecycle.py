"""Sessions: an agent's run, from start to end, and the interruptions found when it stopped.

A session is opened for a process, says it is alive (a local heartbeat file), and is closed
with an outcome that adjusts the importance of the memories it made or relied on; a session
whose process is gone is classified (crash, overflow, ...) and recorded as interrupted.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ...base import layout
from ...base.config import PID_MOST, check_count
from ...base.errors import EngramError, NotFoundError, UsageError
from ...base.validation import session_id as check_session_id
from ...base.vocab import AGENT, INTERRUPTION, OUTCOME
from ...model import sessions
from ...model.memories import Memory
from ...model.sessions import Session
from ...storage import events as ev
from ...storage.store import Store
from ..workspace import Workspace


class Sessions:
    """Opening, closing and reading sessions, over a workspace's stores."""

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace

    def session_start(
        self, *, agent: str = "cli", session_id: str | None = None, pid: int | None = None
    ) -> Session:
        """Open a session for this process (or `pid`): later events carry its id."""
        store = self.workspace.write_store()
        AGENT.one_of(agent)
        if session_id is None:
            session_id = ev.new_entity_id()
        else:
            session_id = self.workspace.checks(store).scan(
                check_session_id(session_id), field="session id", redactable=False
            )
            if any(
                self.workspace.projection(s).sessions(ids=[session_id])
                for s in self.workspace.stores()
            ):
                raise UsageError(
                    f"session {session_id} exists already; give a new id, or none for a fresh one"
                )
        pid = check_count(pid or None, "pid", PID_MOST) or os.getpid()
        self.workspace.session = session_id
        from .handoffs import head_commit  # (and the checkpoint machinery) only to start one

        self.workspace.emit(
            store,
            "session.started",
            {"session_id": session_id, "agent": agent, "pid": pid, "head": head_commit(store)},
        )
        sessions.write_beat(store.local_dir, session_id, pid=pid)
        return self.session_info(session_id)

    def close_session_on_exit(self) -> None:
        """Close this process's session at normal exit and on SIGTERM (a kill -9 cannot be
        caught: the next command finds the session stale and records a crash)."""
        import atexit
        import signal

        session_id = self.workspace.session
        if not session_id:
            raise UsageError("no session to close: start one first")

        def close(how: str) -> None:
            try:
                if self.session_info(session_id).state == "open":
                    self.session_end(how=how, session_id=session_id)
            except EngramError:
                pass

        def on_sigterm(signum: int, frame: object) -> None:
            close("sigterm")
            raise SystemExit(128 + signum)

        atexit.register(close, "exit")
        signal.signal(signal.SIGTERM, on_sigterm)

    def heartbeat(self, *, context: float | None = None, session_id: str | None = None) -> None:
        """Say the session is alive (and, optionally, how full its context is, 0..1)."""
        self.workspace.write_store()  # (refused as any write is, on stores as of a commit)
        session_id = self._session_id(session_id)
        if context is not None and not 0 <= context <= 1:
            raise UsageError("context is the share of the context window in use, 0 to 1")
        store, current = self._session_store(session_id)
        beat = sessions.read_beat(store.local_dir, current.id)
        if beat is None:  # not opened on this clone: it must at least exist, and be open
            self._open_session(current.id)
            beat = {}
        # The agent's process, as the session recorded it: this command's own is gone at once.
        pid = beat.get("pid") or current.pid or os.getpid()
        sessions.write_beat(store.local_dir, current.id, pid=pid, context=context)

    def report_interruption(
        self, reason: str, *, note: str | None = None, session_id: str | None = None
    ) -> None:
        """Say why the session is about to stop; used when its interruption is classified."""
        INTERRUPTION.one_of(reason)
        self.workspace.write_store()
        store, session = self._session_store(self._session_id(session_id))
        session_id = self._open_session(session.id).id
        data = {"session_id": session_id, "reason": reason}
        if note:
            data["note"] = self.workspace.checks(store).text(
                note, field="note", limit="limits.item_bytes"
            )
        self.workspace.emit(store, "session.reported", data)

    def session_end(
        self, *, outcome: str | None = None, how: str = "exit", session_id: str | None = None
    ) -> Session:
        """Close the session; its outcome adjusts the importance of the memories it made or
        relied on (success +0.05, failure -0.05). Commits pending events."""
        written = self.workspace.write_store()
        session_id = self._session_id(session_id)
        if outcome is not None:
            OUTCOME.one_of(outcome)
        home, session = self._session_store(session_id)
        session_id = self._open_session(session.id).id
        # The session's events go to the store that holds it; the memories it made or relied
        # on may be in the other one too (a session opened outside the project, work done in
        # it), and each store's changes of importance go to that store.
        delta = {"success": 0.05, "failure": -0.05}.get(outcome or "", 0.0)
        touched = [home.root, written.root]  # and the stores of its memories
        for store in self.workspace.stores():
            items: list[tuple[str, dict[str, Any]]] = []
            if store.root == home.root:
                items.append(
                    ("session.ended", {"session_id": session_id, "outcome": outcome, "how": how})
                )
            memories = self._session_memories(store, session_id)
            for memory in memories if delta else ():
                value = round(min(1.0, max(0.0, memory.importance + delta)), 4)
                if value != memory.importance:
                    items.append(("memory.updated", {"memory": memory.id, "importance": value}))
            if items:
                self.workspace.emit_many(store, items, commit=False)
            if memories:
                touched.append(store.root)
        sessions.drop_beat(home.local_dir, session_id)
        for store in self.workspace.stores():
            if store.root not in touched:
                continue
            try:  # what the session did that still waits
                self.workspace.commit_store(store)
            except EngramError as exc:
                self.workspace.warnings.append(f"session closed; events not committed yet: {exc}")
        if self.workspace.session == session_id:
            self.workspace.session = None
        return self.session_info(session_id)

    def _session_memories(self, store: Store, session_id: str) -> list[Memory]:
        proj = self.workspace.projection(store)
        ids = {
            e.data["memory"]
            for e in proj.events(kinds=["memory.created"], limit=None)
            if e.session == session_id
        }
        ids |= set(_read_lines(layout.session_file(store.local_dir, session_id, ".recalled")))
        return list(proj.memories_by_id(sorted(ids)).values())

    def note_recalled(self, memory_ids: Sequence[str]) -> None:
        """Remember, locally, which memories this session relied on."""
        if not self.workspace.session or not memory_ids:
            return
        for store in self.workspace.stores():
            path = layout.session_file(store.local_dir, self.workspace.session, ".recalled")
            if path.parent.exists():
                with open(path, "a", encoding="utf-8") as handle:
                    handle.write("".join(f"{m}\n" for m in memory_ids))

    def _session_id(self, session_id: str | None) -> str:
        """The session meant: the one given, else this instance's own."""
        if session_id is None:
            session_id = self.workspace.session
            if not session_id:
                raise UsageError("no session: start one with `engram session start`")
        return check_session_id(session_id)

    def _open_session(self, session_id: str) -> Session:
        current = self.session_info(session_id)
        if current.state != "open":
            why = f" ({current.reason})" if current.reason else ""
            raise UsageError(
                f"session {current.id[:8]} is {current.state}{why}: it is history; open "
                "another with `engram session start` (and set ENGRAM_SESSION to it)"
            )
        return current

    def session_info(self, session_id: str) -> Session:
        return self._session_store(session_id)[1]

    def _session_store(self, session_id: str) -> tuple[Store, Session]:
        """A session by id (or unique prefix), and the store that holds it: where its
        heartbeat is kept and its later events are written, whichever store takes other writes."""
        session_id = check_session_id(session_id)
        for store in self.workspace.stores():
            found = self.workspace.projection(store).sessions(ids=[session_id])
            if found:
                return store, found[0]
        matches = (
            [f for f in self.workspace.resolve(session_id, what="session")]
            if len(session_id) >= 4
            else []
        )
        if len({m[1] for m in matches}) == 1:
            store = matches[0][0]
            return store, self.workspace.projection(store).sessions(ids=[matches[0][1]])[0]
        raise NotFoundError("session", session_id)

    def sessions(self, *, states: Sequence[str] = ()) -> list[Session]:
        out = [
            s
            for store in self.workspace.stores()
            for s in self.workspace.projection(store).sessions(states=states)
        ]
        return sorted(out, key=lambda s: (s.started_clock, s.id), reverse=True)

    def detect_interruptions(self) -> list[Session]:
        """Find open sessions of this machine whose process is gone (or whose heartbeat
        stopped), classify why, and record it. Runs when a store is opened for resume or by
        the MCP server; safe to run often."""
        found = []
        machine = ev.machine_name()
        for store in self.workspace.stores():
            settings = self.workspace.settings(store)
            window = settings["session.stale_minutes"] * 60
            proj = self.workspace.projection(store)
            for session in proj.sessions(states=["open"]):
                if session.machine != machine or session.id == self.workspace.session:
                    continue
                beat = sessions.read_beat(store.local_dir, session.id)
                why = sessions.staleness(session, beat, machine=machine, window_seconds=window)
                if why is None:
                    continue
                recent = [e for e in proj.events(limit=200) if e.session == session.id]
                recent.reverse()
                reason, evidence = sessions.classify(session, beat, why, recent)
                try:
                    self.workspace.emit(
                        store,
                        "session.interrupted",
                        {
                            "session_id": session.id,
                            "reason": reason,
                            "evidence": evidence,
                            "detected_by": self.workspace.session or "cli",
                        },
                    )
                except EngramError as exc:  # a read-only store still resumes
                    self.workspace.warnings.append(f"could not record the interruption: {exc}")
                    continue
                sessions.drop_beat(store.local_dir, session.id)
                found.append(self.workspace.projection(store).sessions(ids=[session.id])[0])
        return found


def _read_lines(path: Path) -> list[str]:
    try:
        return [line.strip() for line in path.read_text().splitlines() if line.strip()]
    except FileNotFoundError:
        return []
