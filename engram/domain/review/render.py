"""A store's review as Markdown (a pull-request comment) and as one line (`--stat`).

Every text from the store is shown as data (`base.display.md`): a memory cannot add a heading,
a link, an image or a mention to the comment.
"""

from __future__ import annotations

from collections.abc import Sequence

from ...base.display import md, md_code
from .summary import Review

_WIDTH = 300  # characters of a memory's text shown; the full text is in `engram show`


def _short(text: str, width: int = _WIDTH) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def stat_line(review: Review) -> str:
    """`project  main...feature  memories 3 added, 1 forgotten; 1 task changed; 2 progress;
    1 failure; 1 handoff`: every count the Markdown's top line gives, those that are not 0."""
    c = review.counts
    parts = [
        f"{c[f'memories_{what}']} {what}"
        for what in ("added", "updated", "superseded", "forgotten", "reinforced")
        if c[f"memories_{what}"]
    ]
    memories = ("memories " if parts else "") + ", ".join(parts)
    rest = [
        _plural(c["tasks_created"], "task") + " created" if c["tasks_created"] else "",
        _plural(c["tasks_changed"], "task") + " changed" if c["tasks_changed"] else "",
        f"{c['progress']} progress" if c["progress"] else "",
        _plural(c["failures"], "failure") if c["failures"] else "",
        _plural(c["handoffs"], "handoff") if c["handoffs"] else "",
    ]
    body = "; ".join(filter(None, [memories, *rest])) or "no changes"
    return f"{review.store}\t{review.range}\t{body}"


def _counts(review: Review) -> str:
    c = review.counts
    memories = [f"{c['memories_added']} added"]
    for what in ("updated", "superseded", "forgotten", "reinforced"):
        if c[f"memories_{what}"]:
            memories.append(f"{c[f'memories_{what}']} {what}")
    tasks = [f"{c['tasks_created']} created"] + (
        [f"{c['tasks_changed']} changed"] if c["tasks_changed"] else []
    )
    return (
        f"**Memories:** {', '.join(memories)} · **Tasks:** {', '.join(tasks)} · "
        f"**Progress:** {c['progress']} · **Failures:** {c['failures']} · "
        f"**Handoffs:** {c['handoffs']}"
    )


def markdown(reviews: Sequence[Review]) -> str:
    """The reviews as one Markdown document."""
    out: list[str] = []
    for review in reviews:
        base = review.base[:8] if review.base else "nothing"
        out += [
            f"### Engram: what {md_code(review.range)} changed in the {review.store} store",
            "",
            f"Compared {md_code(base)} with {md_code(review.head[:8])}.",
            "",
        ]
        out += [f"> **Note:** {md(note)}" for note in review.notes]
        out += [""] if review.notes else []
        if review.empty:
            out += ["No memories, tasks or handoffs changed.", ""]
            continue
        out += [_counts(review), ""]
        out.append(
            "**By author:** " + ", ".join(f"{md(who)} ({n})" for who, n in review.authors.items())
        )
        out.append("")
        out += _memories(review)
        out += _tasks(review)
        out += _handoffs(review)
        if review.skipped:
            out += [
                f"{_plural(review.skipped, 'line')} of the new event files are not events "
                "and were skipped (`engram verify` names them).",
                "",
            ]
    return "\n".join(out).rstrip("\n") + "\n"


def _who(authors: Sequence[str]) -> str:
    return ", ".join(md(a) for a in authors)


def _memories(review: Review) -> list[str]:
    out: list[str] = []
    titles = {
        "added": "Added",
        "updated": "Updated",
        "superseded": "Superseded",
        "forgotten": "Forgotten",
        "reinforced": "Confirmed again",
    }
    for change, title in titles.items():
        items = [m for m in review.memories if m.change == change]
        if not items:
            continue
        out += [f"#### Memories {title.lower()}", ""]
        for m in items:
            head = f"- {md_code(m.memory[:8])} [{md(m.kind)}] {md(_short(m.content))}"
            if change == "added" and m.status != "active":
                head += (
                    f" (then {m.status} on the branch"
                    + (f": {md(m.reason)}" if m.reason else "")
                    + ")"
                )
            if change == "updated":
                if m.before is not None:
                    head = (
                        f"- {md_code(m.memory[:8])} [{md(m.kind)}] {md(_short(m.before))} "
                        f"→ {md(_short(m.content))}"
                    )
                else:
                    head += f" ({md(', '.join(m.fields) or 'no field')} changed)"
            if change == "forgotten":
                head += f" — reason: {md(m.reason)}" if m.reason else " — no reason given"
            if change == "superseded" and m.by:
                head += f" → replaced by {md_code(m.by[:8])}"
            out.append(f"{head} — {_who(m.authors)}")
        out.append("")
    return out


def _tasks(review: Review) -> list[str]:
    if not review.tasks:
        return []
    out = ["#### Tasks", ""]
    for t in review.tasks:
        if t.created:
            status = f"created ({md(t.status)})"
        elif t.status_before != t.status:
            status = f"{md(t.status_before)} → {md(t.status)}"
        else:
            status = md(t.status)
        out.append(f"- {md_code(t.task[:8])} {md(t.name)}: {status} — {_who(t.authors)}")
        out += [
            f"  - progress [{md(p['status'])}] {md(_short(p['feature']))}"
            + (f": {md(_short(p['note']))}" if p.get("note") else "")
            for p in t.progress
        ]
        out += [
            f"  - failure{' in ' + md(f['component']) if f.get('component') else ''}: "
            f"{md(_short(f['error']))}"
            + (f" (root cause: {md(_short(f['root_cause']))})" if f.get("root_cause") else "")
            for f in t.failures
        ]
        if t.checkpoints:
            out.append(f"  - {_plural(t.checkpoints, 'automatic checkpoint')}")
    return [*out, ""]


def _handoffs(review: Review) -> list[str]:
    if not review.handoffs:
        return []
    out = ["#### Handoffs", ""]
    for h in review.handoffs:
        out.append(
            f"- {md(h.task_name)} ({md_code(h.task[:8])}), by {md(h.author)}: "
            f"{md(_short(h.summary))}"
        )
        out += [f"  - next: {md(_short(step))}" for step in h.next]
    return [*out, ""]
