"""A task's timeline (`engram.domain.timeline`) as one self-contained HTML file.

The page needs nothing but itself: CSS, the SVG chart and a little JavaScript (filters,
highlighting) are inline, and it loads nothing from anywhere.
"""

from __future__ import annotations

import html
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from ..base.display import visible
from ..storage import events as ev
from .continuity import checkpoints as cp
from .timeline import CATEGORIES, FIELD_LABELS, Item, Timeline

CSS = """
:root { --fg:#1d2330; --muted:#667085; --line:#d9dee7; --bg:#ffffff; --panel:#f6f8fb;
  --checkpoint:#2f6fed; --failure:#d92d20; --progress:#12a150; --decision:#8e44ad;
  --memory:#8a94a6; --session:#c4841d; --task:#475467; }
* { box-sizing: border-box; }
body { margin: 0; padding: 24px 32px 48px; font: 14px/1.45 system-ui, -apple-system,
  "Segoe UI", Roboto, sans-serif; color: var(--fg); background: var(--bg); }
h1 { font-size: 22px; margin: 0 0 4px; }
h2 { font-size: 16px; margin: 28px 0 10px; }
.meta { color: var(--muted); margin: 0 0 4px; }
.goal { margin: 8px 0 0; max-width: 70em; }
code { font: 12px ui-monospace, SFMono-Regular, Menlo, monospace; }
.legend { display: flex; flex-wrap: wrap; gap: 14px; margin: 18px 0 8px; }
.legend label { display: inline-flex; align-items: center; gap: 6px; cursor: pointer; }
.swatch { width: 11px; height: 11px; border-radius: 2px; display: inline-block; }
.chart { width: 100%; overflow-x: auto; border: 1px solid var(--line); border-radius: 8px;
  background: var(--panel); }
svg { display: block; }
svg .lane-label { font-size: 12px; fill: var(--fg); }
svg .lane-sub { font-size: 11px; fill: var(--muted); }
svg .tick { stroke: var(--line); }
svg .tick-label { font-size: 11px; fill: var(--muted); }
svg .lane { fill: #ffffff; stroke: var(--line); }
svg .span { opacity: .28; }
svg .span.interrupted { fill: var(--failure); }
svg .span.ended { fill: var(--session); }
svg .span.open { fill: var(--session); opacity: .15; }
svg .mark { stroke: #fff; stroke-width: 1.5; cursor: pointer; }
svg .mark.checkpoint { fill: var(--checkpoint); }
svg .mark.failure { fill: var(--failure); }
svg .mark.progress { fill: var(--progress); }
svg .mark.decision { fill: var(--decision); }
svg .mark.memory { fill: var(--memory); }
svg .mark.session { fill: var(--session); }
svg .mark.task { fill: var(--task); }
svg a:hover .mark, svg a.active .mark { stroke: var(--fg); stroke-width: 2.5; }
table { border-collapse: collapse; }
.fields { font-size: 12px; }
.fields th, .fields td { border: 1px solid var(--line); padding: 4px 8px; text-align: left;
  vertical-align: top; }
.fields th { background: var(--panel); font-weight: 600; }
.fields td.changed { background: #eef4ff; font-weight: 600; }
.fields td.same { color: var(--muted); }
ol.items { list-style: none; padding: 0; margin: 0; }
li.item { border-left: 4px solid var(--task); background: var(--panel); border-radius: 6px;
  padding: 8px 12px; margin: 0 0 8px; }
li.item.active { outline: 2px solid var(--fg); }
li.item.checkpoint { border-color: var(--checkpoint); }
li.item.failure { border-color: var(--failure); background: #fff4f3; }
li.item.progress { border-color: var(--progress); }
li.item.decision { border-color: var(--decision); }
li.item.memory { border-color: var(--memory); }
li.item.session { border-color: var(--session); }
.head { display: flex; flex-wrap: wrap; gap: 10px; color: var(--muted); font-size: 12px; }
.badge { font-weight: 600; text-transform: uppercase; letter-spacing: .04em; }
.title { margin: 2px 0; white-space: pre-wrap; }
.details { margin: 2px 0 0; padding-left: 18px; color: #344054; }
.changes { margin: 6px 0 0; font-size: 12px; }
.changes td { padding: 1px 8px 1px 0; vertical-align: top; }
.changes .add { color: var(--progress); } .changes .del { color: var(--failure); }
.changes .mod { color: var(--checkpoint); }
""" + "".join(f"body.hide-{c} .{c} {{ display: none; }}\n" for c in CATEGORIES)

_JS = """
(function () {
  var body = document.body;
  document.querySelectorAll('input[data-category]').forEach(function (box) {
    box.addEventListener('change', function () {
      body.classList.toggle('hide-' + box.dataset.category, !box.checked);
    });
  });
  function highlight(id) {
    document.querySelectorAll('.active').forEach(function (n) { n.classList.remove('active'); });
    var card = document.getElementById(id);
    if (!card) { return; }
    card.classList.add('active');
    document.querySelectorAll('svg a[data-item="' + id + '"]').forEach(function (a) {
      a.classList.add('active');
    });
  }
  window.addEventListener('hashchange', function () { highlight(location.hash.slice(1)); });
  if (location.hash) { highlight(location.hash.slice(1)); }
  var counts = {};
  document.querySelectorAll('li.item').forEach(function (li) {
    counts[li.dataset.category] = (counts[li.dataset.category] || 0) + 1;
  });
  Object.keys(counts).forEach(function (c) {
    var n = document.querySelector('.count[data-category="' + c + '"]');
    if (n) { n.textContent = counts[c]; }
  });
  body.dataset.rendered = document.querySelectorAll('li.item').length;
  // Marks the browser actually laid out on the chart (a broken SVG lays out none).
  body.dataset.marks = Array.prototype.filter.call(
    document.querySelectorAll('svg .mark'),
    function (m) { var b = m.getBBox(); return b.width > 0 && b.height > 0; }).length;
})();
"""


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")


def escape(value: Any) -> str:
    """Store text as data: HTML-escaped, and with the controls and bidi overrides that would
    hide or reorder it shown as escapes (`\\u202e`), as on a terminal (engram.display). The
    text comes from other people's pushes; the browse page writes its text the same way."""
    return html.escape(visible(str(value)), quote=True)


_e = escape


def _utc(stamp: str) -> str:
    return stamp[:19].replace("T", " ") + " UTC" if stamp else ""


def _seconds(stamp: str) -> float:
    return ev.parse_time(stamp).timestamp()


def _axis(stamps: Sequence[float]) -> tuple[float, float]:
    """The times the chart's axis spans: those of the events, but only from 1970 to a day
    ahead of this machine's clock. A time outside (year 1, year 9999: a wrong or hostile clock)
    would squeeze every other event into one point; such events sit at the axis's edge."""
    latest = time.time() + ev.CLOCK_AHEAD_US / 1e6
    inside = [s for s in stamps if 0 <= s <= latest] or [min(max(s, 0.0), latest) for s in stamps]
    return min(inside), max(inside)


def render_html(timeline: Timeline) -> str:
    task = timeline.task
    counts = {c: sum(1 for i in timeline.items if i.category == c) for c in CATEGORIES}
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>Timeline: {_e(task['name'])}</title>",
        f"<style>{CSS}</style></head>",
        f'<body data-task="{_e(task["id"])}">',
        f"<h1>{_e(task['name'])}</h1>",
        f'<p class="meta">task <code>{_e(task["id"])}</code> · {_e(task["status"])} · '
        f"created {_e(_utc(task['created_at']))} by {_e(task['created_by'])} · "
        f"{_plural(len(timeline.checkpoints), 'checkpoint')}, "
        f"{_plural(counts['failure'], 'failure')}, "
        f"{_plural(len(timeline.spans), 'session')}</p>",
    ]
    if task.get("goal"):
        parts.append(f'<p class="goal"><strong>Goal:</strong> {_e(task["goal"])}</p>')
    parts.append('<div class="legend">')
    for category, (label, what) in CATEGORIES.items():
        parts.append(
            f'<label title="{_e(what)}"><input type="checkbox" checked '
            f'data-category="{category}"><span class="swatch" '
            f'style="background:var(--{category})"></span><span>{label} '
            f'(<span class="count" data-category="{category}">{counts[category]}</span>)'
            "</span></label>"
        )
    parts.append("</div>")
    parts.append(f'<div class="chart">{_svg(timeline)}</div>')
    if timeline.checkpoints:
        parts.append("<h2>Handoff fields, checkpoint by checkpoint</h2>")
        parts.append(_fields_table(timeline.checkpoints))
    parts.append("<h2>Everything that happened, in order</h2>")
    parts.append('<ol class="items">')
    for item in timeline.items:
        parts.append(_card(item))
    parts.append("</ol>")
    if not timeline.items:
        parts.append("<p>Nothing recorded for this task yet.</p>")
    parts.append(f"<script>{_JS}</script></body></html>")
    return "\n".join(parts) + "\n"


def _svg(timeline: Timeline) -> str:
    width, left, right, top, lane_height = 1100, 230, 24, 34, 46
    lanes: list[tuple[str, str | None]] = []
    for who in [(s.actor, s.machine) for s in timeline.spans] + [
        (i.actor, i.machine) for i in timeline.items
    ]:
        if who not in lanes:
            lanes.append(who)
    stamps = [_seconds(i.time) for i in timeline.items]
    stamps += [_seconds(s.start) for s in timeline.spans]
    stamps += [_seconds(s.end) for s in timeline.spans if s.end]
    if not stamps:
        return '<svg viewBox="0 0 1100 40" width="1100" height="40" role="img"></svg>'
    first, last = _axis(stamps)
    span = (last - first) or 1.0
    usable = width - left - right - 20

    def x(stamp: str) -> float:
        at = min(max(_seconds(stamp), first), last)
        return round(left + 10 + (at - first) / span * usable, 1)

    def off(stamp: str) -> bool:
        return not first <= _seconds(stamp) <= last

    height = top + lane_height * max(1, len(lanes)) + 10
    out = [
        f'<svg viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
        f'role="img" aria-label="timeline of the task">'
    ]
    for number in range(6):
        at = first + span * number / 5
        tx = round(left + 10 + usable * number / 5, 1)
        stamp = ev.format_time(datetime.fromtimestamp(at, UTC))
        label = (
            stamp[:10]
            if span > 366 * 86400
            else stamp[5:16].replace("T", " ")
            if span > 120
            else stamp[11:19]
            if span > 10
            else stamp[11:21]
        )
        out.append(
            f'<line class="tick" x1="{tx}" y1="{top - 6}" x2="{tx}" y2="{height - 6}"></line>'
        )
        out.append(
            f'<text class="tick-label" x="{tx}" y="{top - 12}" '
            f'text-anchor="middle">{_e(label)} UTC</text>'
            if number == 0
            else f'<text class="tick-label" x="{tx}" y="{top - 12}" '
            f'text-anchor="middle">{_e(label)}</text>'
        )
    for index, (actor, machine) in enumerate(lanes):
        y = top + index * lane_height
        out.append(
            f'<rect class="lane" x="4" y="{y + 3}" width="{width - 8}" '
            f'height="{lane_height - 6}" rx="5"></rect>'
        )
        out.append(
            f'<text class="lane-label" x="12" y="{y + 20}">{_e(ev.one_line(actor, 34))}</text>'
        )
        out.append(
            f'<text class="lane-sub" x="12" y="{y + 35}">'
            f"on {_e(machine or 'an unknown machine')}</text>"
        )
    for span_ in timeline.spans:
        y = top + lanes.index((span_.actor, span_.machine)) * lane_height
        x1 = x(span_.start)
        x2 = x(span_.end) if span_.end else x1
        tip = f"session {span_.id[:8]} ({span_.agent}) {span_.state}" + (
            f": {span_.note}" if span_.note else ""
        )
        out.append(
            f'<rect class="span session {span_.state}" x="{x1}" y="{y + 9}" '
            f'width="{max(4.0, round(x2 - x1, 1))}" height="{lane_height - 18}" '
            f'rx="4"><title>{_e(tip)}</title></rect>'
        )
    offsets = {
        "checkpoint": 0,
        "failure": 9,
        "progress": -9,
        "decision": -9,
        "memory": 9,
        "session": 0,
        "task": 0,
    }
    for item in timeline.items:
        cx = x(item.time)
        cy = (
            top
            + lanes.index((item.actor, item.machine)) * lane_height
            + lane_height // 2
            + offsets[item.category]
        )
        tip = f"{_utc(item.time)} · {item.category}: {ev.one_line(item.title, 120)}" + (
            " (off the time axis)" if off(item.time) else ""
        )
        shape = _shape(item.category, cx, cy)
        out.append(
            f'<a href="#{_e("ev-" + item.id)}" data-item="ev-{_e(item.id)}" '
            f'class="{item.category}"><title>{_e(tip)}</title>{shape}</a>'
        )
    out.append("</svg>")
    return "".join(out)


def _shape(category: str, cx: float, cy: float) -> str:
    cls = f'class="mark {category}"'
    if category == "checkpoint":
        r = 8
        return (
            f'<polygon {cls} points="{cx},{cy - r} {cx + r},{cy} {cx},{cy + r} '
            f'{cx - r},{cy}"></polygon>'
        )
    if category == "failure":
        return f'<circle {cls} cx="{cx}" cy="{cy}" r="7"></circle>'
    if category in ("decision", "memory", "task"):
        r = 5 if category != "decision" else 6
        return f'<rect {cls} x="{cx - r}" y="{cy - r}" width="{2 * r}" height="{2 * r}"></rect>'
    if category == "session":
        return f'<rect {cls} x="{cx - 2}" y="{cy - 12}" width="4" height="24"></rect>'
    return f'<circle {cls} cx="{cx}" cy="{cy}" r="5"></circle>'


def _fields_table(checkpoints: Sequence[dict[str, Any]]) -> str:
    names = [*cp.TEXT_FIELDS, *cp.LIST_FIELDS, "working_set"]
    rows = ['<table class="fields"><thead><tr><th>field</th>']
    for package in checkpoints:
        rows.append(
            f"<th>#{_e(package.get('seq'))} {_e(package.get('reason'))}<br>"
            f'<span class="meta">{_e(_utc(package.get("time", "")))}</span></th>'
        )
    rows.append("</tr></thead><tbody>")
    previous: dict[str, Any] | None = None
    deltas = []
    for package in checkpoints:
        deltas.append(cp.changes(previous, package))
        previous = package
    for name in names:
        rows.append(f"<tr><th>{_e(FIELD_LABELS[name])}</th>")
        for package, delta in zip(checkpoints, deltas, strict=True):
            value = package.get(name)
            if name == "working_set":
                value = sorted(cp.file_paths(package))
            shown = (
                (ev.one_line(value, 60) if value else "—")
                if name in cp.TEXT_FIELDS
                else f"{len(value or [])} item{'s' if len(value or []) != 1 else ''}"
            )
            change = delta.get(name)
            if change is None:
                rows.append(f'<td class="same" title="{_e(_full(value))}">{_e(shown)}</td>')
                continue
            if name in cp.TEXT_FIELDS:
                note = "changed"
            else:
                bits = [
                    f"+{len(change.get('added', []))}" if change.get("added") else "",
                    f"−{len(change.get('removed', []))}" if change.get("removed") else "",
                    "reordered" if change.get("reordered") else "",
                ]
                note = " ".join(b for b in bits if b)
            rows.append(
                f'<td class="changed" title="{_e(_full(value))}">{_e(shown)} ({_e(note)})</td>'
            )
        rows.append("</tr>")
    rows.append("</tbody></table>")
    return "".join(rows)


def _full(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return "\n".join(str(v) for v in value)
    return str(value or "")


def _card(item: Item) -> str:
    session = f"<span>session <code>{_e(item.session[:8])}</code></span>" if item.session else ""
    parts = [
        f'<li class="item {item.category}" id="ev-{_e(item.id)}" '
        f'data-category="{item.category}" data-kind="{_e(item.kind)}">',
        f'<div class="head"><span class="badge">{_e(item.category)}</span>'
        f'<time datetime="{_e(item.time)}">{_e(_utc(item.time))}</time>'
        f'<span class="who">{_e(item.actor)}</span>'
        f'<span class="machine">on {_e(item.machine or "an unknown machine")}</span>'
        f"{session}</div>",
        f'<p class="title">{_e(item.title)}</p>',
    ]
    if item.details:
        parts.append(
            '<ul class="details">' + "".join(f"<li>{_e(d)}</li>" for d in item.details) + "</ul>"
        )
    if item.changes:
        parts.append('<table class="changes"><tbody>')
        for name, change, text in item.changes:
            cls = {"+": "add", "-": "del", "~": "mod"}[change]
            sign = {"+": "+", "-": "−", "~": "~"}[change]
            parts.append(
                f'<tr class="{cls}"><td>{_e(name)}</td><td>{sign}</td><td>{_e(text)}</td></tr>'
            )
        parts.append("</tbody></table>")
    parts.append("</li>")
    return "".join(parts)
