"""`engram browse --html FILE`: the memories, tasks and handoffs of the stores as one
self-contained HTML page to search, filter and read.

Like the timeline's page (engram.timeline), it needs nothing but itself: CSS and a little
JavaScript are inline, and it loads nothing from anywhere, so it can be opened from disk or
mailed. Every piece of store text is HTML-escaped where it is written into the page, its control
and bidi characters shown as escapes: it arrives from other people's pushes and is shown as data,
never markup, and cannot reorder what is around it. The script only shows and hides
what is there (it reads no store text as HTML).

Each memory is a card with its kind, status, store, scope, tags, project, who wrote it and when,
and its history (every event, oldest first). Each task is a card with its status, goal, latest
handoff, progress, failures and checkpoints. A search box matches any words of a card; select
boxes filter by kind, tag, scope, store and status.

`write_page` writes this page, and the timeline's, to the file asked for: never over an existing
file or through a symbolic link without `force` (as `engram export`), and whole or not at all.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..base.errors import UsageError
from ..base.files import atomic_write, folder_exists
from .continuity import checkpoints as cp
from .timeline_html import CSS as TIMELINE_CSS
from .timeline_html import escape as _e

FILTERS = ("kind", "tag", "scope", "store", "status")


@dataclass
class MemoryCard:
    memory: Any  # engram.memories.Memory, with `store` set
    history: list[tuple[str, str, str, str]]  # (time, actor, event kind, what it did)


@dataclass
class TaskCard:
    task: dict[str, Any]  # Task.to_dict(), with `store`
    checkpoints: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Browse:
    stores: list[tuple[str, str]]  # (kind, path)
    memories: list[MemoryCard]
    tasks: list[TaskCard]
    generated: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "stores": [{"kind": k, "path": p} for k, p in self.stores],
            "memories": len(self.memories),
            "tasks": len(self.tasks),
            "handoffs": sum(
                1 for t in self.tasks for c in t.checkpoints if c.get("reason") == "handoff"
            ),
        }


def write_page(target: Path, page: str, *, force: bool = False) -> None:
    """Write an HTML page to `target`, in a folder that exists (`folder_exists`). An existing
    file, or a symbolic link (even one that points nowhere), is replaced only with `force`, and
    then the link itself is replaced: what it points to is never written."""
    if target.is_dir() and not target.is_symlink():
        raise UsageError(f"{target} is a directory; give the file to write")
    if target.is_symlink() and not force:
        raise UsageError(
            f"{target} is a symbolic link; choose another name, or pass --force to "
            "replace the link (what it points to is not written)"
        )
    if target.exists() and not force:
        raise UsageError(f"{target} exists; choose another name or pass --force to replace it")
    folder_exists(target)
    atomic_write(target, page, durable=False, hidden=True)


def _utc(stamp: str | None) -> str:
    return stamp[:19].replace("T", " ") + " UTC" if stamp else ""


def _words(*values: Any) -> str:
    """A filter attribute's value: names joined by spaces (names hold none)."""
    return " ".join(str(v) for v in values if v)


def render_html(page: Browse) -> str:
    memories, tasks = page.memories, page.tasks
    options: dict[str, Counter[str]] = {name: Counter() for name in FILTERS}
    for card in memories:
        m = card.memory
        options["kind"][m.kind] += 1
        options["tag"].update(m.tags)
        options["scope"][m.scope or "-"] += 1
        options["store"][m.store or "-"] += 1
        options["status"][m.status] += 1
    for task_card in tasks:
        options["kind"]["task"] += 1
        options["store"][task_card.task.get("store") or "-"] += 1
        options["status"][task_card.task["status"]] += 1
    handoffs = sum(1 for t in tasks for c in t.checkpoints if c.get("reason") == "handoff")
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        "<title>Engram memories</title>",
        f"<style>{TIMELINE_CSS}{_CSS}</style></head>",
        f'<body data-cards="{len(memories) + len(tasks)}">',
        "<h1>Engram memories</h1>",
        f'<p class="meta">{len(memories)} memories, {len(tasks)} tasks, {handoffs} handoffs · '
        + " · ".join(f"{_e(kind)} store <code>{_e(path)}</code>" for kind, path in page.stores)
        + f" · written {_e(_utc(page.generated))}</p>",
        '<div class="controls">',
        (
            '<input id="q" type="search" placeholder="Search memories, tasks and handoffs" '
            'autocomplete="off" aria-label="Search">'
        ),
    ]
    for name in FILTERS:
        parts.append(f'<label>{name} <select data-filter="{name}"><option value="">all</option>')
        for value, count in sorted(options[name].items()):
            parts.append(f'<option value="{_e(value)}">{_e(value)} ({count})</option>')
        parts.append("</select></label>")
    parts.append(
        f'<span class="shown"><span id="shown">{len(memories) + len(tasks)}</span> '
        "shown</span></div>"
    )
    parts.append("<h2>Memories</h2>")
    parts.append('<ol class="items" id="memories">')
    parts.extend(_memory(card) for card in memories)
    parts.append("</ol>")
    if not memories:
        parts.append("<p>No memories yet.</p>")
    parts.append("<h2>Tasks and handoffs</h2>")
    parts.append('<ol class="items" id="tasks">')
    parts.extend(_task(card) for card in tasks)
    parts.append("</ol>")
    if not tasks:
        parts.append("<p>No tasks yet.</p>")
    parts.append('<p id="none" hidden>Nothing matches.</p>')
    parts.append(f"<script>{_JS}</script></body></html>")
    return "\n".join(parts) + "\n"


def _memory(card: MemoryCard) -> str:
    m = card.memory
    tags = " ".join(f'<span class="tag">#{_e(t)}</span>' for t in m.tags)
    project = (
        f"<span>project <code>{_e(m.project[:12])}</code></span>"
        if m.project
        else f"<span>project {_e(m.project_remote)}</span>"
        if m.project_remote
        else ""
    )
    head = (
        f'<div class="head"><span class="badge">{_e(m.kind)}</span>'
        f'<span class="status {_e(m.status)}">{_e(m.status)}</span>'
        f"<span>{_e(m.store)} store</span>"
        + (f"<span>scope {_e(m.scope)}</span>" if m.scope else "")
        + project
        + f"<span>{_e(m.created_by)}, {_e(_utc(m.created_at))}</span>"
        + (f"<span>about {_e(_utc(m.at))}</span>" if m.at else "")
        + f"<code>{_e(m.id)}</code></div>"
    )
    rows = "".join(
        f"<tr><td>{_e(_utc(t))}</td><td>{_e(who)}</td><td>{_e(kind)}</td><td>{_e(what)}</td></tr>"
        for t, who, kind, what in card.history
    )
    history = (
        f"<details><summary>history ({len(card.history)} "
        f"event{'' if len(card.history) == 1 else 's'})</summary>"
        f'<table class="history">{rows}</table></details>'
    )
    return (
        f'<li class="item memory card {_e(m.kind)}" data-kind="{_e(m.kind)}" '
        f'data-tag="{_e(_words(*m.tags))}" data-scope="{_e(m.scope or "-")}" '
        f'data-store="{_e(m.store or "-")}" data-status="{_e(m.status)}" '
        f'data-id="{_e(m.id)}">{head}<p class="title">{_e(m.content)}</p>'
        + (f'<p class="tags">{tags}</p>' if tags else "")
        + f"{history}</li>"
    )


def _list(title: str, values: Sequence[Any]) -> str:
    if not values:
        return ""
    items = "".join(f"<li>{_e(v)}</li>" for v in values)
    return f'<div class="field"><strong>{_e(title)}</strong><ul>{items}</ul></div>'


def _task(card: TaskCard) -> str:
    t = card.task
    latest = t.get("latest_checkpoint") or {}
    handoffs = [c for c in card.checkpoints if c.get("reason") == "handoff"]
    head = (
        f'<div class="head"><span class="badge">task</span>'
        f'<span class="status {_e(t["status"])}">{_e(t["status"])}</span>'
        f"<span>{_e(t.get('store'))} store</span>"
        f"<span>{_e(t['created_by'])}, {_e(_utc(t['created_at']))}</span>"
        f"<code>{_e(t['id'])}</code></div>"
    )
    body = [f'<p class="title"><strong>{_e(t["name"])}</strong></p>']
    if t.get("goal"):
        body.append(f'<p class="goal">Goal: {_e(t["goal"])}</p>')
    if latest:
        body.append(
            f'<div class="handoff"><p><strong>Latest checkpoint '
            f"({_e(latest.get('reason', ''))}, {_e(_utc(latest.get('time')))}, "
            f"{_e(latest.get('actor', ''))}):</strong> "
            f"{_e(latest.get('summary') or '')}</p>"
        )
        for name in cp.LIST_FIELDS:
            body.append(_list(cp.TITLES[name].split(" (")[0], latest.get(name) or ()))
        body.append("</div>")
    if t.get("failures"):
        body.append(
            _list(
                "Failures",
                [
                    f.get("error", "")
                    + (f" — cause: {f['root_cause']}" if f.get("root_cause") else "")
                    + (f" — fix: {f['fix']}" if f.get("fix") else "")
                    for f in t["failures"]
                ],
            )
        )
    if t.get("progress"):
        body.append(
            _list("Progress", [f"[{p.get('status')}] {p.get('feature')}" for p in t["progress"]])
        )
    if card.checkpoints:
        rows = "".join(
            f"<tr><td>{_e(c.get('seq'))}</td><td>{_e(_utc(c.get('time')))}</td>"
            f"<td>{_e(c.get('actor'))}</td><td>{_e(c.get('reason'))}</td>"
            f"<td>{_e(c.get('summary') or '')}</td></tr>"
            for c in card.checkpoints
        )
        body.append(
            f"<details><summary>{len(card.checkpoints)} checkpoints, "
            f"{len(handoffs)} handoffs</summary>"
            f'<table class="history">{rows}</table></details>'
        )
    return (
        f'<li class="item task card" data-kind="task" data-tag="" data-scope="-" '
        f'data-store="{_e(t.get("store") or "-")}" data-status="{_e(t["status"])}" '
        f'data-id="{_e(t["id"])}">{head}{"".join(body)}</li>'
    )


_CSS = """
.controls { display: flex; flex-wrap: wrap; gap: 12px; align-items: center; margin: 16px 0;
  position: sticky; top: 0; background: var(--bg); padding: 8px 0; z-index: 1; }
#q { flex: 1 1 320px; font: inherit; padding: 6px 10px; border: 1px solid var(--line);
  border-radius: 6px; }
.controls select { font: inherit; }
.shown { color: var(--muted); }
li.item.task { border-color: var(--checkpoint); }
li.item.decision { border-color: var(--decision); }
li.item.failure, li.item.gotcha { border-color: var(--failure); }
li.item.lesson, li.item.procedure { border-color: var(--progress); }
.status.forgotten, .status.superseded, .status.abandoned { text-decoration: line-through; }
.tag { color: var(--checkpoint); margin-right: 6px; font-size: 12px; }
.tags { margin: 2px 0; }
details { margin-top: 4px; font-size: 12px; }
table.history td { padding: 1px 10px 1px 0; vertical-align: top; white-space: pre-wrap; }
.field ul { margin: 2px 0 4px; padding-left: 18px; }
.handoff p { margin: 4px 0; }
"""

_JS = """
(function () {
  var q = document.getElementById('q');
  var selects = Array.prototype.slice.call(document.querySelectorAll('select[data-filter]'));
  var cards = Array.prototype.slice.call(document.querySelectorAll('li.card'));
  var texts = cards.map(function (c) { return c.textContent.toLowerCase(); });
  function apply() {
    var words = q.value.toLowerCase().split(/\\s+/).filter(Boolean);
    var shown = 0;
    cards.forEach(function (card, i) {
      var ok = words.every(function (w) { return texts[i].indexOf(w) >= 0; });
      selects.forEach(function (s) {
        if (!ok || !s.value) return;
        var have = (card.getAttribute('data-' + s.getAttribute('data-filter')) || '');
        ok = have.split(' ').indexOf(s.value) >= 0;
      });
      card.hidden = !ok;
      if (ok) shown++;
    });
    document.getElementById('shown').textContent = String(shown);
    document.getElementById('none').hidden = shown > 0;
    document.body.setAttribute('data-shown', String(shown));
  }
  q.addEventListener('input', apply);
  selects.forEach(function (s) { s.addEventListener('change', apply); });
  apply();
  document.body.setAttribute('data-ready', '1');
})();
"""
