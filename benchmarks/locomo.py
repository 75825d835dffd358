"""Retrieval benchmark of Engram on LoCoMo (long-term conversational memory).

What it measures
----------------
LoCoMo (Maharana et al., ACL 2024; data CC BY-NC 4.0, not shipped with Engram) holds long
multi-session chats between two people, and questions about them whose answers are backed by
"evidence" turns (dialogue ids such as ``D3:12``). For each conversation on its own, this script:

1. creates a fresh personal store in a temporary directory (``ENGRAM_HOME``, ``HOME`` and the
   git configuration are pointed away from the user's own);
2. remembers every dialogue turn as one memory, ``"Speaker: text"`` (plus
   ``" [shares a photo: caption]"`` when the turn shared an image and ``--no-captions`` is not
   given), ``kind="fact"``, dated with its session's date (``at=``), without the near-duplicate
   check; no tags, nothing question-specific;
3. asks every question (categories 1-4; category 5, adversarial, has no evidence and is left out)
   with ``Engram.recall(question, k=10, now=<last session + 1 day>)`` - the questions are asked
   at the end of the conversation, and memories lose strength with age;
4. scores whether the evidence turns come back:

   - Hit@k (k = 1, 5, 10): at least one evidence turn is among the top k;
   - Recall@5: the share of the question's evidence turns found in the top 5;
   - session Hit@5 (S@5): an evidence turn's session is among the sessions of the top 5 turns
     (the level most published results use).

Figures are given per category (1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop), per
conversation and overall (micro-averaged over questions). Times: ingestion (``remember`` of every
turn and a final ``commit``), index build (the first ``recall``, which indexes every memory in
tantivy and embeds it for usearch; for the first conversation it also loads the model), and query
latency (later recalls).

Evidence ids are cleaned as the dataset's README asks: entries such as ``"D8:6; D9:17"`` are
split on ``;``, ``,`` and whitespace, ids that are not turns of the conversation are dropped, and
questions left without evidence are skipped (and counted).

Settings
--------
Each run evaluates the store's default settings ("default"). ``--set KEY=VALUE`` changes a
setting for every variant; ``--variant KEY=VALUE[,KEY=VALUE...]`` (repeatable) adds a variant
evaluated on the *same* ingested store after the default one (settings are read per recall, so
the turns are ingested and embedded once per conversation). Keys are Engram settings, e.g.
``recall.weight_vector``, ``recall.weight_strength``, ``recall.min_relevance``,
``recall.candidates`` (see ``engram config list``).

How to run
----------
::

    .venv/bin/python benchmarks/locomo.py /path/to/locomo-dev.json
    .venv/bin/python benchmarks/locomo.py /path/to/locomo-dev.json \\
        --conversations conv-26,conv-30 --json /tmp/locomo.json
    .venv/bin/python benchmarks/locomo.py /path/to/locomo-dev.json \\
        --variant recall.weight_vector=0.3 --variant recall.min_relevance=0

The whole dev file (five conversations, about 2,800 turns) takes a few minutes on two cores,
most of it embedding. ``--details`` adds each question's retrieved turn ids to the JSON output
(it then holds dataset text: keep it out of the repository, the data is CC BY-NC).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
ADVERSARIAL = 5
K = 10  # memories asked for per question
HIT_KS = (1, 5, 10)
RECALL_K = 5
ACTOR = "bench <bench@example.com>"
_EVIDENCE_SPLIT = re.compile(r"[;,\s]+")
_SESSION_KEY = re.compile(r"^session_(\d+)$")


# -- the dataset -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Turn:
    dia_id: str
    speaker: str
    text: str
    caption: str | None
    at: datetime  # the session's date and time, UTC


@dataclass(frozen=True)
class Question:
    index: int  # position in the conversation's `qa` list
    question: str
    category: int
    evidence: tuple[str, ...]


@dataclass
class Conversation:
    sample_id: str
    turns: list[Turn]
    questions: list[Question]
    now: datetime  # when the questions are asked: the last session + 1 day
    asked: int = 0  # questions of categories 1-4, before skipping those without evidence
    skipped: int = 0  # of those, left without evidence once cleaned
    dropped_ids: list[str] = field(default_factory=list)  # evidence ids that are not turns


def parse_session_time(text: str) -> datetime:
    """'1:56 pm on 8 May, 2023' as a timezone-aware UTC datetime."""
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def clean_evidence(raw: Sequence[str], known: set[str]) -> tuple[tuple[str, ...], list[str]]:
    """Evidence ids split on ';' ',' and whitespace; returns (kept ids, dropped ids)."""
    kept: list[str] = []
    dropped: list[str] = []
    for entry in raw:
        for part in _EVIDENCE_SPLIT.split(str(entry)):
            if not part:
                continue
            if part in known:
                if part not in kept:
                    kept.append(part)
            else:
                dropped.append(part)
    return tuple(kept), dropped


def load_conversations(path: Path, wanted: Sequence[str] = ()) -> list[Conversation]:
    data = json.loads(path.read_text(encoding="utf-8"))
    by_id = {c["sample_id"]: c for c in data}
    missing = [w for w in wanted if w not in by_id]
    if missing:
        raise SystemExit(
            f"no conversation {', '.join(missing)} in {path}; it has {', '.join(by_id)}"
        )
    chosen = [by_id[w] for w in wanted] if wanted else data
    out = []
    for sample in chosen:
        conv = sample["conversation"]
        sessions = sorted(
            (int(m[1]), key)
            for key in conv
            if (m := _SESSION_KEY.match(key)) and isinstance(conv[key], list)
        )
        turns: list[Turn] = []
        dates: list[datetime] = []
        for _, key in sessions:
            at = parse_session_time(conv[f"{key}_date_time"])
            dates.append(at)
            for t in conv[key]:
                turns.append(
                    Turn(t["dia_id"], t["speaker"], t["text"], t.get("blip_caption") or None, at)
                )
        known = {t.dia_id for t in turns}
        result = Conversation(sample["sample_id"], turns, [], max(dates) + timedelta(days=1))
        for index, qa in enumerate(sample["qa"]):
            category = int(qa["category"])
            if category == ADVERSARIAL:
                continue
            result.asked += 1
            evidence, dropped = clean_evidence(qa.get("evidence") or [], known)
            result.dropped_ids.extend(dropped)
            if not evidence:
                result.skipped += 1
                continue
            result.questions.append(Question(index, qa["question"], category, evidence))
        out.append(result)
    return out


def turn_content(turn: Turn, captions: bool) -> str:
    content = f"{turn.speaker}: {turn.text}"
    if captions and turn.caption:
        content += f" [shares a photo: {turn.caption}]"
    return content


# -- running Engram ----------------------------------------------------------------------------


@contextmanager
def isolated_environment(root: Path) -> Iterator[None]:
    """Point Engram and git at a throwaway home; restore the environment afterwards."""
    home = root / "home"
    home.mkdir()
    values = {
        "ENGRAM_HOME": str(root / "engram"),
        "HOME": str(home),
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_CONFIG_NOSYSTEM": "1",
        "ENGRAM_ACTOR": ACTOR,
    }
    saved = {key: os.environ.get(key) for key in [*values, "ENGRAM_SESSION"]}
    os.environ.update(values)
    os.environ.pop("ENGRAM_SESSION", None)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def parse_assignments(text: str) -> dict[str, str]:
    """'a.b=1,c.d=2' -> {'a.b': '1', 'c.d': '2'}, checked against Engram's settings."""
    from engram.base.config import SETTINGS

    out: dict[str, str] = {}
    for part in text.split(","):
        if not part.strip():
            continue
        key, sep, value = part.partition("=")
        key = key.strip()
        if not sep or key not in SETTINGS:
            raise SystemExit(
                f"bad setting {part!r}: give KEY=VALUE with a key from `engram config list`"
            )
        out[key] = value.strip()
    return out


@dataclass
class Variant:
    name: str
    settings: dict[str, str]  # on top of the base (--set) settings


@dataclass
class ConversationRun:
    sample_id: str
    turns: int
    ingest_seconds: float
    index_seconds: float
    refused: list[str]  # dia_ids Engram would not store (e.g. looked like a secret)
    warnings: list[str]
    # variant name -> list of per-question records
    answers: dict[str, list[dict[str, Any]]]
    query_seconds: dict[str, list[float]]


def run_conversation(
    conv: Conversation, base: dict[str, str], variants: Sequence[Variant], captions: bool, log: Any
) -> ConversationRun:
    from engram.base.config import SETTINGS
    from engram.base.errors import EngramError

    touched = sorted({key for v in variants for key in v.settings})
    with (
        tempfile.TemporaryDirectory(prefix="engram-locomo-") as tmp,
        isolated_environment(Path(tmp)),
    ):
        from engram.api import Engram

        work = Path(tmp) / "work"  # not inside any git repository: no project store applies
        work.mkdir()
        e = Engram(cwd=work)
        try:
            e.init()
            for key, value in base.items():
                e.config_set(key, value)

            by_memory: dict[str, str] = {}
            refused: list[str] = []
            start = time.perf_counter()
            for turn in conv.turns:
                try:
                    r = e.remember(
                        turn_content(turn, captions),
                        kind="fact",
                        at=turn.at,
                        check_duplicates=False,
                    )
                except EngramError as exc:
                    refused.append(turn.dia_id)
                    log(f"  {conv.sample_id} {turn.dia_id}: not stored ({exc})")
                    continue
                by_memory[r.id] = turn.dia_id
            e.commit()
            ingest_seconds = time.perf_counter() - start

            # The first recall brings the indexes up to date: every memory is indexed by
            # tantivy and embedded for usearch. Timed apart from the queries.
            start = time.perf_counter()
            e.recall("warm-up", k=1, now=conv.now)
            index_seconds = time.perf_counter() - start

            answers: dict[str, list[dict[str, Any]]] = {}
            timings: dict[str, list[float]] = {}
            for variant in variants:
                for key in touched:
                    value = variant.settings.get(key, base.get(key))
                    if value is None:
                        value = _setting_text(SETTINGS[key].default)
                    e.config_set(key, value)
                records = []
                spent = []
                for q in conv.questions:
                    start = time.perf_counter()
                    hits = e.recall(q.question, k=K, now=conv.now)
                    spent.append(time.perf_counter() - start)
                    records.append(
                        {
                            "index": q.index,
                            "category": q.category,
                            "evidence": list(q.evidence),
                            "retrieved": [by_memory.get(h.memory.id, "?") for h in hits],
                        }
                    )
                answers[variant.name] = records
                timings[variant.name] = spent
            warnings = list(dict.fromkeys(e.warnings))
        finally:
            e.close()
    return ConversationRun(
        conv.sample_id,
        len(conv.turns),
        ingest_seconds,
        index_seconds,
        refused,
        warnings,
        answers,
        timings,
    )


def _setting_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "null" if value is None else str(value)


# -- scoring -----------------------------------------------------------------------------------


def _session(dia_id: str) -> str:
    return dia_id.split(":", 1)[0]


def score_one(evidence: Sequence[str], retrieved: Sequence[str]) -> dict[str, float]:
    wanted = set(evidence)
    out = {f"hit@{k}": float(bool(wanted & set(retrieved[:k]))) for k in HIT_KS}
    out[f"recall@{RECALL_K}"] = len(wanted & set(retrieved[:RECALL_K])) / len(wanted)
    # Session level, as most published results count: an evidence session is found when any
    # of its turns is among the first five.
    out["session_hit@5"] = float(
        bool({_session(e) for e in wanted} & {_session(r) for r in retrieved[:5]})
    )
    return out


def aggregate(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Mean of every metric over `records`, with their count."""
    scores = [score_one(r["evidence"], r["retrieved"]) for r in records]
    metrics = [f"hit@{k}" for k in HIT_KS] + [f"recall@{RECALL_K}", "session_hit@5"]
    out: dict[str, Any] = {"n": len(scores)}
    for metric in metrics:
        out[metric] = sum(s[metric] for s in scores) / len(scores) if scores else None
    return out


def summarise(runs: Sequence[ConversationRun], variant: str) -> dict[str, Any]:
    records = [r for run in runs for r in run.answers[variant]]
    query_times = [t for run in runs for t in run.query_seconds[variant]]
    return {
        "overall": aggregate(records),
        "by_category": {
            f"{c} {name}": aggregate([r for r in records if r["category"] == c])
            for c, name in CATEGORIES.items()
        },
        "by_conversation": {run.sample_id: aggregate(run.answers[variant]) for run in runs},
        "query_ms": {
            "mean": 1000 * statistics.fmean(query_times) if query_times else None,
            "median": 1000 * statistics.median(query_times) if query_times else None,
            "p95": 1000 * _quantile(query_times, 0.95) if query_times else None,
        },
    }


def _quantile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


# -- output ------------------------------------------------------------------------------------


def _pct(value: float | None) -> str:
    return "   -" if value is None else f"{100 * value:5.1f}"


def format_table(title: str, rows: Sequence[tuple[str, dict[str, Any]]]) -> str:
    head = f"{'':24} {'n':>4}  {'Hit@1':>5}  {'Hit@5':>5}  {'Hit@10':>6}  {'R@5':>5}  {'S@5':>5}"
    lines = [title, head, "-" * len(head)]
    for label, agg in rows:
        lines.append(
            f"{label:24} {agg['n']:>4}  {_pct(agg['hit@1'])}  {_pct(agg['hit@5'])}  "
            f"{_pct(agg['hit@10']):>6}  {_pct(agg[f'recall@{RECALL_K}'])}  "
            f"{_pct(agg['session_hit@5'])}"
        )
    return "\n".join(lines)


def report(summary: dict[str, Any], variant: Variant, runs: Sequence[ConversationRun]) -> str:
    rows = [(f"cat {label}", agg) for label, agg in summary["by_category"].items()]
    rows.append(("overall", summary["overall"]))
    settings = ", ".join(f"{k}={v}" for k, v in variant.settings.items()) or "defaults"
    parts = [format_table(f"Variant {variant.name!r} ({settings}) - by category", rows)]
    if len(runs) > 1:
        parts.append(format_table("by conversation", list(summary["by_conversation"].items())))
    q = summary["query_ms"]
    if q["mean"] is not None:
        parts.append(
            f"query latency: mean {q['mean']:.1f} ms, median {q['median']:.1f} ms, "
            f"p95 {q['p95']:.1f} ms"
        )
    return "\n\n".join(parts)


def comparison(summaries: dict[str, dict[str, Any]]) -> str:
    cats = list(CATEGORIES)
    head = f"{'variant':42} {'Hit@1':>5}  {'Hit@5':>5}  {'Hit@10':>6}  {'R@5':>5}  | " + "  ".join(
        f"H@5 c{c}" for c in cats
    )
    lines = ["Variants (overall, and Hit@5 per category)", head, "-" * len(head)]
    for name, s in summaries.items():
        o = s["overall"]
        per_cat = "  ".join(f"{_pct(a['hit@5']):>6}" for a in s["by_category"].values())
        lines.append(
            f"{name[:42]:42} {_pct(o['hit@1'])}  {_pct(o['hit@5'])}  "
            f"{_pct(o['hit@10']):>6}  {_pct(o[f'recall@{RECALL_K}'])}  | {per_cat}"
        )
    return "\n".join(lines)


def engram_revision() -> str | None:
    """The git commit of the checkout Engram is imported from, if it is one (read-only)."""
    import engram

    try:
        done = subprocess.run(
            ["git", "-C", str(Path(engram.__file__).resolve().parent), "rev-parse", "HEAD"],
            check=False,
            capture_output=True,
            text=True,
            timeout=10,
            env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"},
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    return done.stdout.strip() or None


# -- main --------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Retrieval benchmark of Engram on LoCoMo (Hit@1/5/10, Recall@5)."
    )
    parser.add_argument("dataset", type=Path, help="LoCoMo JSON file (e.g. locomo-dev.json)")
    parser.add_argument(
        "--conversations",
        default="",
        help="comma-separated sample ids (default: all), e.g. conv-26,conv-30",
    )
    parser.add_argument("--json", type=Path, help="write the figures to this file")
    parser.add_argument(
        "--no-captions",
        action="store_true",
        help="do not append shared photos' captions to their turns",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an Engram setting for every variant (repeatable)",
    )
    parser.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="KEY=VALUE[,...]",
        help="also evaluate with these settings, on the same store (repeatable)",
    )
    parser.add_argument(
        "--details",
        action="store_true",
        help="put each question's retrieved turn ids in the JSON output",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")
    args = parser.parse_args(argv)

    def log(message: str) -> None:
        if not args.quiet:
            print(message, file=sys.stderr, flush=True)

    import engram

    revision = engram_revision()
    base: dict[str, str] = {}
    for item in args.set:
        base.update(parse_assignments(item))
    variants = [Variant("default", {})]
    for spec in args.variant:
        variants.append(Variant(spec, parse_assignments(spec)))
    captions = not args.no_captions
    wanted = [w.strip() for w in args.conversations.split(",") if w.strip()]
    conversations = load_conversations(args.dataset, wanted)

    runs: list[ConversationRun] = []
    for conv in conversations:
        log(
            f"{conv.sample_id}: {len(conv.turns)} turns, {len(conv.questions)} questions "
            f"({conv.asked} in categories 1-4, {conv.skipped} without evidence)"
        )
        run = run_conversation(conv, base, variants, captions, log)
        log(f"  ingest {run.ingest_seconds:.1f} s, index {run.index_seconds:.1f} s")
        for warning in run.warnings:
            log(f"  warning: {warning}")
        runs.append(run)

    summaries = {v.name: summarise(runs, v.name) for v in variants}
    asked = sum(c.asked for c in conversations)
    skipped = sum(c.skipped for c in conversations)
    turns = sum(r.turns for r in runs)
    ingest = sum(r.ingest_seconds for r in runs)
    index = sum(r.index_seconds for r in runs)
    dropped = [i for c in conversations for i in c.dropped_ids]

    print(
        f"Engram {engram.__version__} ({revision[:12] if revision else 'no git revision'}, "
        f"{Path(engram.__file__).parent}) on LoCoMo: {args.dataset.name}, conversations "
        f"{', '.join(c.sample_id for c in conversations)}"
    )
    print(
        f"{turns} turns ingested as memories (photo captions "
        f"{'appended as [shares a photo: ...]' if captions else 'not used'}); "
        f"{asked} questions in categories 1-4, {skipped} skipped without evidence, "
        f"{asked - skipped} scored; evidence ids dropped: {', '.join(dropped) or 'none'}"
    )
    if base:
        print("settings for every variant: " + ", ".join(f"{k}={v}" for k, v in base.items()))
    print(f"recall(question, k={K}, now=last session + 1 day); category 5 (adversarial) left out")
    print(
        f"time: ingest {ingest:.1f} s ({1000 * ingest / max(turns, 1):.1f} ms/turn), "
        f"index build {index:.1f} s (first recall: tantivy + embeddings)"
    )
    refused = [i for r in runs for i in r.refused]
    if refused:
        print(f"turns Engram refused to store: {', '.join(refused)}")
    warnings = list(dict.fromkeys(w for r in runs for w in r.warnings))
    for warning in warnings:
        print(f"warning: {warning}")
    print()
    for variant in variants:
        print(report(summaries[variant.name], variant, runs))
        print()
    if len(variants) > 1:
        print(comparison(summaries))

    if args.json:
        out: dict[str, Any] = {
            "benchmark": "locomo-retrieval",
            "dataset": str(args.dataset),
            "conversations": [c.sample_id for c in conversations],
            "engram_version": engram.__version__,
            "engram_revision": revision,
            "engram_path": str(Path(engram.__file__).parent),
            "python": platform.python_version(),
            "captions": captions,
            "k": K,
            "base_settings": base,
            "questions": {
                "asked": asked,
                "skipped_no_evidence": skipped,
                "scored": asked - skipped,
                "dropped_evidence_ids": dropped,
            },
            "timing": {
                "turns": turns,
                "ingest_seconds": round(ingest, 3),
                "index_seconds": round(index, 3),
                "by_conversation": {
                    r.sample_id: {
                        "turns": r.turns,
                        "ingest_seconds": round(r.ingest_seconds, 3),
                        "index_seconds": round(r.index_seconds, 3),
                    }
                    for r in runs
                },
            },
            "refused_turns": refused,
            "warnings": warnings,
            "variants": {v.name: {"settings": v.settings, **summaries[v.name]} for v in variants},
        }
        if args.details:
            out["details"] = {
                v.name: {r.sample_id: r.answers[v.name] for r in runs} for v in variants
            }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
        log(f"figures written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
