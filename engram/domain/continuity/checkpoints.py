"""Checkpoints: versioned continuation packages for a task, and how a reviewer reads them.

A checkpoint is one `checkpoint.saved` event whose payload is the whole package (below). A
handoff is a checkpoint someone asked for; the others are saved by triggers (a failure, a plan
change, a working-set shift, a quiet period) with a debounce per reason.

Each handoff (not the automatic checkpoints) is also rendered to Markdown at
`handoffs/<task>/<seq>-<checkpoint>.md` in the store, committed with it: a new file every time,
so two machines never edit the same file, and each file says field by field what changed since
the previous handoff. That is what a reviewer reads in a pull request.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...base.display import md, md_code, md_lines
from ...base.errors import UsageError
from ...base.vocab import CHECKPOINT_REASON
from ...storage import events as ev

if TYPE_CHECKING:
    from ...base.validation import Checks

LIST_FIELDS = (
    "completed",
    "in_progress",
    "blocked",
    "next",
    "must_not_redo",
    "must_preserve",
    "open_questions",
)
TEXT_FIELDS = ("goal", "summary")
REASONS = CHECKPOINT_REASON.names
# Checkpoints someone asked for. Only these are rendered to Markdown for review; the automatic
# ones (failure, plan_change, working_set, quiet, and overflow, saved before a context is
# compacted) stay in the events, for `engram checkpoints` and `engram resume`.
EXPLICIT = tuple(term.name for term in CHECKPOINT_REASON.terms if term.data["asked"])


def rendered(reason: object) -> bool:
    """Whether a checkpoint saved for this reason gets a Markdown file under handoffs/."""
    return reason in EXPLICIT


TITLES = {
    "goal": "Goal",
    "summary": "Summary",
    "completed": "Completed",
    "in_progress": "In progress",
    "blocked": "Blocked",
    "next": "Next steps (in order)",
    "must_not_redo": "Must not redo",
    "must_preserve": "Must preserve",
    "open_questions": "Open questions",
    "working_set": "Working set",
}

# How much each part of a package is worth to the next agent (sums to 1).
COMPLETENESS_WEIGHTS = {
    "goal": 0.20,
    "next": 0.25,
    "completed": 0.15,
    "must_not_redo": 0.10,
    "working_set": 0.10,
    "in_progress": 0.10,
    "summary": 0.05,
    "must_preserve": 0.05,
}
FRESHNESS_HOURS = 72.0


def empty_package() -> dict[str, Any]:
    package: dict[str, Any] = {name: [] for name in LIST_FIELDS}
    package.update(goal="", summary="", working_set={"files": [], "commands": [], "artifacts": []})
    return package


def parse_package(data: bytes, *, name: str = "-") -> dict[str, Any]:
    """The mapping a package file holds: JSON when `name` ends in .json, else YAML (which
    reads JSON too). Checked field by field later, by `normalise`."""
    kind = "JSON" if name.endswith(".json") else "YAML"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"{name} is not valid UTF-8; re-encode it as UTF-8") from None
    try:
        if kind == "JSON":
            import orjson

            loaded = orjson.loads(text)
        else:
            from ruamel.yaml import YAML

            loaded = YAML(typ="safe").load(text)
    except Exception as exc:  # the parsers raise many types; all mean the same to a user
        raise UsageError(
            f"{name} is not valid {kind} ({type(exc).__name__}); fix it and try again"
        ) from None
    if not isinstance(loaded, dict):
        raise UsageError(
            f"{name} must hold a mapping of checkpoint fields, such as summary, next and files"
        )
    return loaded


def normalise(
    raw: Mapping[str, Any], checks: Checks, *, names_file: Callable[[str], bool] | None = None
) -> dict[str, Any]:
    """A package from user input (options, YAML or JSON), checked field by field; `names_file`
    tells a working-set file whose name holds `@` from `path@commit` (`split_pin`)."""
    unknown = {str(key) for key in raw} - {
        *LIST_FIELDS,
        *TEXT_FIELDS,
        "working_set",
        "task",
        "files",
        "commands",
        "artifacts",
    }
    if unknown:
        raise UsageError(
            f"unknown checkpoint field(s): {', '.join(sorted(unknown))[:200]}; "
            f"known: {', '.join((*TEXT_FIELDS, *LIST_FIELDS, 'working_set'))}"
        )
    package = empty_package()
    for name in TEXT_FIELDS:
        value = raw.get(name)
        if value is None or (isinstance(value, str) and not value.strip()):
            continue
        if not isinstance(value, str):
            raise UsageError(f"checkpoint field {name} must be text, not {type(value).__name__}")
        package[name] = checks.text(_fold(value), field=name)
    for name in LIST_FIELDS:
        package[name] = checks.items(_folded(_listed(raw.get(name), name)), field=name)
    working = raw.get("working_set")
    if working is None:
        working = {}
    if not isinstance(working, Mapping):
        raise UsageError(
            "checkpoint field working_set must be a mapping of files, commands, artifacts"
        )
    unknown = {str(key) for key in working} - {"files", "commands", "artifacts"}
    if unknown:
        raise UsageError(
            f"unknown working_set field(s): {', '.join(sorted(unknown))[:200]}; "
            "known: files, commands, artifacts"
        )
    package["working_set"] = {
        "files": checks.files(
            [
                *_listed(working.get("files"), "files", mappings=True),
                *_listed(raw.get("files"), "files", mappings=True),
            ],
            names_file=names_file,
        ),
        **{
            key: checks.items(
                _folded([*_listed(working.get(key), key), *_listed(raw.get(key), key)]), field=key
            )
            for key in ("commands", "artifacts")
        },
    }
    return package


def _listed(value: Any, name: str, *, mappings: bool = False) -> list[Any]:
    """A field that holds one item or a list of them, as a list."""
    if value is None:
        return []
    if isinstance(value, str) or (mappings and isinstance(value, Mapping)):
        return [value]
    if not isinstance(value, (list, tuple)):
        raise UsageError(f"checkpoint field {name} must be a list, not {type(value).__name__}")
    return list(value)


def _fold(value: str) -> str:
    """One-line text loses its runs of spaces; text of several lines is kept as written."""
    return " ".join(value.split()) if "\n" not in value else value.strip()


def _folded(items: list[Any]) -> list[Any]:
    return [_fold(item) if isinstance(item, str) else item for item in items]


def check_files(top: Path, files: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Working-set files as someone gives them (a handoff, a checkpoint, task progress): each a
    file of the work tree `top`, never outside the repository, through a symbolic link or in
    `.git/`, refused in the words a citation's path is (`tracked.work_tree_file`). A checkpoint
    commits the blob id of each, so a link would let it commit the id of any file it reaches."""
    from ...git.tracked import work_tree_file  # pygit2: only when there are files to check

    for item in files:
        work_tree_file(top, item["path"])
    return files


def file_paths(package: Mapping[str, Any]) -> set[str]:
    return {f["path"] for f in (package.get("working_set") or {}).get("files") or []}


def completeness(package: Mapping[str, Any]) -> float:
    score = 0.0
    for name, weight in COMPLETENESS_WEIGHTS.items():
        value = package.get(name)
        if name == "working_set":
            value = [*(value or {}).get("files", []), *(value or {}).get("commands", [])]
        if value:
            score += weight
    return round(score, 4)


def freshness(*, saved_at: str, now: datetime, unchanged: float | None = None) -> float:
    """1 when just saved; decays with age (time constant FRESHNESS_HOURS) and with the share
    of working-set files that changed since the commit they were seen at."""
    age_hours = max(0.0, (now - ev.parse_time(saved_at)).total_seconds() / 3600.0)
    value = math.exp(-age_hours / FRESHNESS_HOURS)
    if unchanged is not None:
        value *= 0.5 + 0.5 * unchanged
    return round(value, 4)


def confidence(
    package: Mapping[str, Any], *, saved_at: str, now: datetime, unchanged: float | None = None
) -> float:
    """How well the next agent can continue from this package: completeness x freshness."""
    fresh = freshness(saved_at=saved_at, now=now, unchanged=unchanged)
    return round(completeness(package) * (0.5 + 0.5 * fresh), 4)


def changes(before: Mapping[str, Any] | None, after: Mapping[str, Any]) -> dict[str, Any]:
    """Field-by-field change from one package to the next."""
    before = before or empty_package()
    out: dict[str, Any] = {}
    for name in TEXT_FIELDS:
        if (before.get(name) or "") != (after.get(name) or ""):
            out[name] = {"from": before.get(name) or "", "to": after.get(name) or ""}
    for name in LIST_FIELDS:
        old, new = before.get(name) or [], after.get(name) or []
        added = [x for x in new if x not in old]
        removed = [x for x in old if x not in new]
        if added or removed or (name == "next" and old != new):
            out[name] = {
                "added": added,
                "removed": removed,
                **({"reordered": True} if not added and not removed else {}),
            }
    old_files, new_files = file_paths(before), file_paths(after)
    if old_files != new_files:
        out["working_set"] = {
            "added": sorted(new_files - old_files),
            "removed": sorted(old_files - new_files),
        }
    return out


def jaccard_distance(a: Iterable[str], b: Iterable[str]) -> float:
    left, right = set(a), set(b)
    if not left and not right:
        return 0.0
    return 1.0 - len(left & right) / len(left | right)


def render(
    task: Mapping[str, Any], checkpoint: Mapping[str, Any], previous: Mapping[str, Any] | None
) -> str:
    """The Markdown a reviewer reads. Deterministic: the same checkpoint, the same bytes. What
    the checkpoint says is shown as written, never as markup (see `engram.display`)."""
    lines = [
        f"# Handoff: {md(task['name'])}",
        "",
        f"- task: {md_code(task['id'])}",
        f"- checkpoint: {checkpoint['seq']} ({md_code(checkpoint['checkpoint'])}), "
        f"reason: {md(checkpoint['reason'])}",
        f"- by: {md(ev.written_by(checkpoint['actor'], checkpoint.get('origin')))}"
        + (f", session {md_code(checkpoint['session'])}" if checkpoint.get("session") else "")
        + (f", on {md(checkpoint['machine'])}" if checkpoint.get("machine") else ""),
        f"- at: {md(checkpoint['time'])}",
        f"- continuation confidence: {checkpoint['confidence']:.2f}",
        "",
    ]
    for name in ("summary", "goal"):
        if checkpoint.get(name):
            lines += [f"## {TITLES[name]}", "", md_lines(checkpoint[name]), ""]
    for name in LIST_FIELDS:
        items = checkpoint.get(name) or []
        lines += [f"## {TITLES[name]}", ""]
        if not items:
            lines += ["(none)", ""]
            continue
        for number, item in enumerate(items, start=1):
            bullet = f"{number}." if name == "next" else "-"
            lines.append(f"{bullet} {md_lines(item, indent=len(bullet) + 1)}")
        lines.append("")
    working = checkpoint.get("working_set") or {}
    lines += [f"## {TITLES['working_set']}", ""]
    entries = [
        f"- {md_code(f['path'])}" + (f" @ {md(f['commit'][:12])}" if f.get("commit") else "")
        for f in working.get("files") or []
    ]
    entries += [f"- command: {md_code(c)}" for c in working.get("commands") or []]
    entries += [f"- artifact: {md_lines(a, indent=2)}" for a in working.get("artifacts") or []]
    lines += (entries or ["(none)"]) + [""]
    delta = changes(previous, checkpoint)
    title = f"checkpoint {previous['seq']}" if previous else "the start"
    lines += [f"## Changes since {title}", ""]
    if not delta:
        lines += ["(no change)", ""]
    for name, change in delta.items():
        label = TITLES[name].split(" (")[0].lower()
        if name in TEXT_FIELDS:
            lines.append(
                f'- {label}: was "{md(ev.one_line(change["from"], 80))}", '
                f'now "{md(ev.one_line(change["to"], 80))}"'
            )
            continue
        for item in change.get("added", []):
            lines.append(f"- {label}: + {md(item)}")
        for item in change.get("removed", []):
            lines.append(f"- {label}: − {md(item)}")
        if change.get("reordered"):
            lines.append(f"- {label}: reordered")
    lines.append("")
    return "\n".join(lines)


def render_path(task_id: str, checkpoint: Mapping[str, Any]) -> str:
    return f"handoffs/{task_id}/{checkpoint['seq']:04d}-{checkpoint['checkpoint'][:8]}.md"


def describe(event: ev.Event) -> str:
    data = event.data
    short = str(data.get("task", ""))[: ev.SHORT_ID_LEN]
    summary = ev.one_line(data.get("summary") or "", 60)  # cut with an ellipsis
    verb = "handoff" if data.get("reason") == "handoff" else f"checkpoint ({data.get('reason')})"
    return f"{verb} {short}" + (f" — {summary}" if summary else "")
