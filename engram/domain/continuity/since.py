"""What happened since the last handoff, folded into the package a resume gives.

A handoff says what was next when it was written; work goes on after it (progress, failures,
memories, automatic checkpoints, commits to the project). A resume that showed only the handoff
would send the next agent to redo what is already done. `gather` collects what came after the
newest handoff of a task, `fold` moves the steps done since out of the plan, and `lines` says it
in Markdown: plainly, with who did what and when.

Two machines can work on a task at once and merge later: a step one of them marked done before
the other's (newer) handoff, which did not know of it, is still done. So a done step counts as
since the handoff when it came after it, or when the handoff lists it in its plan and not among
what is completed (a handoff carries over every completed item its writer knew of).

A step of the plan counts as done when a progress item marked done since the handoff names it
(`engram.model.plans.same_step`: "Retry-After header" is the step "Add the Retry-After header").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ...base.display import md, md_code, md_lines
from ...base.wording import count, listing
from ...model.memories import Memory
from ...model.plans import PLAN, same_step, unknown_done
from ...model.tasks import Failure, Progress, Task
from ...storage import events as ev
from . import checkpoints as cp

SHOWN = 10  # items of each kind listed; the rest are counted


@dataclass(frozen=True)
class Since:
    """What was recorded after handoff `seq` (saved at `clock`): `done` maps each step of the
    plan found done to the progress that did it; `commits` is None when the project's history
    could not be read."""

    seq: int
    clock: int
    time: str
    actor: str
    origin: Any
    progress: tuple[Progress, ...] = ()
    failures: tuple[Failure, ...] = ()
    memories: tuple[Memory, ...] = ()
    checkpoints: tuple[Mapping[str, Any], ...] = ()
    commits: tuple[Any, ...] | None = None
    done: dict[str, Progress] = field(default_factory=dict)
    plan: tuple[str, ...] = ()  # the steps the handoff planned
    unknown: frozenset[str] = frozenset()  # progress before the handoff that it did not know of

    @property
    def files(self) -> list[str]:
        """The project files the commits since changed, each once, newest first."""
        seen: dict[str, None] = {}
        for commit in self.commits or ():
            seen.update(dict.fromkeys(commit.files))
        return list(seen)


def last_handoff(checkpoints: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The newest checkpoint someone asked for (a handoff), else the newest of all."""
    for index in range(len(checkpoints) - 1, -1, -1):
        if cp.rendered(checkpoints[index].get("reason")):
            return checkpoints[index]
    return checkpoints[-1] if checkpoints else None


def gather(
    task: Task,
    handoff: Mapping[str, Any],
    *,
    checkpoints: Sequence[Mapping[str, Any]],
    memories: Iterable[Memory],
    commits: Sequence[Any] | None,
    store_dir: str | None,
) -> Since:
    """What came after `handoff` on `task`: its progress, failures and later checkpoints, the
    `memories` written after it, and the `commits` that changed the project (those that touch
    only the store's own folder `store_dir` are Engram's, not the project's; None: the store is
    its repository's whole work tree, every commit is Engram's)."""
    clock = int(handoff.get("clock") or 0)
    plan = tuple(step for name in PLAN for step in handoff.get(name) or () if isinstance(step, str))
    before = [p for p in task.progress if p.clock <= clock and p.status == "done"]
    named = set(unknown_done(handoff, (p.feature for p in before)).values())
    unknown = tuple(p for p in before if p.feature in named)
    project_commits = None
    if commits is not None:
        project_commits = tuple(
            c
            for c in commits
            if store_dir is not None
            and any(not (f == store_dir or f.startswith(store_dir + "/")) for f in c.files)
        )
    return Since(
        seq=int(handoff.get("seq") or 0),
        clock=clock,
        time=str(handoff.get("time") or ""),
        actor=str(handoff.get("actor") or ""),
        origin=handoff.get("origin"),
        progress=(*unknown, *(p for p in task.progress if p.clock > clock)),
        failures=tuple(f for f in task.failures if f.clock > clock),
        memories=tuple(m for m in memories if m.created_clock > clock),
        checkpoints=tuple(c for c in checkpoints if int(c.get("clock") or 0) > clock),
        commits=project_commits,
        plan=plan,
        unknown=frozenset(p.event for p in unknown),
    )


def fold(package: Mapping[str, Any], since: Since) -> dict[str, Any]:
    """`package` (the newest checkpoint) with the steps of its plan that were done since taken
    out; `since.done` then maps each step of the handoff's plan or of `package`'s found done to
    the progress that did it (an automatic checkpoint saved since may have taken it out of its
    own plan already: it is still a planned step done)."""
    out = dict(package)
    done = [p for p in since.progress if p.status == "done"]

    def match(step: Any) -> Progress | None:
        if not isinstance(step, str):
            return None
        return next((p for p in done if same_step(p.feature, step)), None)

    for step in since.plan:
        if (found := match(step)) is not None:
            since.done.setdefault(step, found)
    for name in PLAN:
        kept = []
        for step in package.get(name) or []:
            if (found := match(step)) is None:
                kept.append(step)
            else:
                since.done.setdefault(step, found)
        out[name] = kept
    return out


def _by(actor: str, origin: Any, time: str) -> str:
    return f"{md(ev.written_by(actor, origin))}, {md(time[:16].replace('T', ' '))}"


def _more(items: Sequence[Any], lines: list[str]) -> None:
    if len(items) > SHOWN:
        lines.append(f"- … and {len(items) - SHOWN} more")


def summary(since: Since) -> str:
    """One sentence: what happened since the handoff, counted."""
    done_features = {p.event for p in since.done.values()}
    other_done = [p for p in since.progress if p.status == "done" and p.event not in done_features]
    parts = [
        count(len(since.done), "planned step", none="") + " done" if since.done else "",
        count(len(other_done), "other item", none="") + " done" if other_done else "",
        count(len([p for p in since.progress if p.status != "done"]), "progress note", none=""),
        count(len(since.failures), "failure", none=""),
        count(len(since.memories), "memory", none="") + " recorded" if since.memories else "",
        count(len(since.checkpoints), "automatic checkpoint", none=""),
    ]
    if since.commits:
        parts.append(
            f"{count(len(since.commits), 'commit')} changing "
            f"{count(len(since.files), 'project file')}"
        )
    said = listing(parts)
    if not said:
        said = "nothing was recorded on this task"
        if since.commits is not None:
            said += " and no commit changed the project"
    return said[0].upper() + said[1:] + "."


def lines(since: Since) -> list[str]:
    """The Markdown section a resume shows (after its header)."""
    out = [
        f"## Since handoff {since.seq} ({_by(since.actor, since.origin, since.time)})",
        "",
        md(summary(since)),
        "",
    ]
    items: list[str] = []
    for step, progress in since.done.items():
        unknown = " (the handoff did not know of it)" if progress.event in since.unknown else ""
        items.append(
            f"- done: {md_lines(step, indent=2)} — by "
            f"{_by(progress.actor, None, progress.time)}{unknown}; do not redo"
        )
    planned = {p.event for p in since.done.values()}
    rest = [p for p in since.progress if p.event not in planned]
    for progress in rest[:SHOWN]:
        items.append(
            f"- [{md(progress.status)}] {md_lines(progress.feature, indent=2)} — "
            f"{_by(progress.actor, None, progress.time)}"
        )
    _more(rest, items)
    for failure in since.failures[:SHOWN]:
        where = f"[{md(failure.component)}] " if failure.component else ""
        items.append(
            f"- failed: {where}{md_lines(failure.error, indent=2)} — "
            f"{_by(failure.actor, None, failure.time)}"
        )
    _more(since.failures, items)
    for memory in since.memories[:SHOWN]:
        items.append(
            f"- {md(memory.kind)} recorded: {md_lines(memory.content, indent=2)} "
            f"({md_code(memory.id[:8])})"
        )
    _more(since.memories, items)
    for commit in (since.commits or ())[:SHOWN]:
        files = ", ".join(md_code(f) for f in commit.files[:5])
        if len(commit.files) > 5:
            files += f" and {len(commit.files) - 5} more"
        items.append(
            f"- commit {md(commit.id[:12])} {md(ev.one_line(commit.subject, 80))} — "
            f"{md(commit.author)}, {md(commit.time[:16].replace('T', ' '))}: {files}"
        )
    _more(since.commits or (), items)
    return [*out, *items, ""] if items else out
