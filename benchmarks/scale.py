"""Recall at the size of a real store: the same questions on 160 memories and on 3,000+.

What it measures
----------------
A personal store mixes projects, chat-like notes and years of history. This script asks the
coding-recall questions (the development set given on the command line and the holdout set in
``benchmarks/data``) twice, in one throwaway store:

1. **small**: only the 160 coding memories of the two sets (each dated ``age_days`` back);
2. **large**: the same store after adding, as distractors,

   - every LoCoMo dialogue turn of the given file (about 2,800 chat turns, ``kind="fact"``),
     re-dated so that each conversation ends within the last two months (recent chat, as a
     personal store holds it);
   - ``--generated`` coding memories of other fictional projects, built from templates (a
     project, a tool, an action), dated up to four years back.

For each size and each settings variant it reports, per question type and set: Hit@1, Hit@5,
MRR@10, the mean top score of answerable questions and of the "none" questions (topic absent),
and whether one score threshold keeps >= 90% of answerable questions (top score at or above it)
while rejecting >= 70% of "none" questions (top score below it) at both sizes. The row
``cosine`` is the model's own exact ranking: every memory of the store by cosine similarity to
the question, nothing else - the ceiling that ranking by meaning alone reaches.

How to run
----------
::

    .venv/bin/python benchmarks/scale.py ../shared/data/coding-recall-dev.json \\
        ../shared/data/locomo-dev.json --json /tmp/scale.json
    .venv/bin/python benchmarks/scale.py DEV.json LOCOMO.json --variant recall.strength_floor=0
    .venv/bin/python benchmarks/scale.py DEV.json LOCOMO.json --embedding-cache /tmp/scale.sqlite3

About ten minutes on two cores, most of it embedding the distractors once.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from locomo import (  # noqa: E402  (a sibling script)
    Variant,
    _setting_text,
    isolated_environment,
    load_conversations,
    parse_assignments,
    turn_content,
)

HOLDOUT = Path(__file__).resolve().parent / "data" / "coding-recall-holdout.json"
K = 10
TYPES = ("paraphrase", "overlap", "identifier", "kind_or_time")
KEEP, REJECT = 0.90, 0.70  # the single-threshold target

_PROJECTS = [
    "halyard",
    "quillon",
    "marrow",
    "bitterns",
    "ostrava",
    "pellucid",
    "wicket",
    "sorrel",
    "tamarack",
    "vesper",
    "lumen-ops",
    "brackish",
]
_TOOLS = [
    "Redis",
    "RabbitMQ",
    "Elasticsearch",
    "Jenkins",
    "GitLab CI",
    "Nginx",
    "Vue",
    "Angular",
    "Spring Boot",
    "Rails",
    "Laravel",
    "Flask",
    "FastAPI",
    "Prometheus",
    "Grafana",
    "Kubernetes",
    "Docker Compose",
    "MySQL",
    "MongoDB",
    "SQLite",
    "Webpack",
    "Vite",
    "Jest",
    "Mocha",
    "Gradle",
    "Maven",
    "Ansible",
    "Pulumi",
    "Sentry",
    "Datadog",
]
_TEMPLATES = [
    ("decision", "{p}: we chose {t} for the {area} layer after comparing it with {u}."),
    ("gotcha", "{p}: {t} silently drops {thing} when the {area} config is reloaded."),
    ("failure", "{p}: the {area} job failed because {t} ran out of {resource}; raised the limit."),
    ("procedure", "{p}: to rotate the {area} credentials, restart {t} then re-run the seeder."),
    ("convention", "{p}: every {area} module keeps its {t} settings in one file per environment."),
    ("fact", "{p}: the {area} service talks to {t} on the internal network only."),
    ("preference", "{p}: the team prefers {t} over {u} for {area} work."),
]
_AREAS = [
    "billing",
    "search",
    "auth",
    "reporting",
    "ingest",
    "notifications",
    "admin",
    "export",
    "scheduler",
    "upload",
    "cache",
    "metrics",
]
_THINGS = [
    "queued messages",
    "open connections",
    "pending writes",
    "scheduled tasks",
    "log lines",
    "session keys",
]
_RESOURCES = ["memory", "disk", "file handles", "threads", "connections"]


def generated_memories(count: int, seed: int = 7) -> list[dict[str, Any]]:
    """Coding memories of other fictional projects, from templates, dated up to four years."""
    rng = random.Random(seed)
    out = []
    seen: set[str] = set()
    while len(out) < count:
        kind, template = rng.choice(_TEMPLATES)
        tool, other = rng.sample(_TOOLS, 2)
        text = template.format(
            p=rng.choice(_PROJECTS),
            t=tool,
            u=other,
            area=rng.choice(_AREAS),
            thing=rng.choice(_THINGS),
            resource=rng.choice(_RESOURCES),
        )
        if text in seen:
            continue
        seen.add(text)
        out.append({"kind": kind, "text": text, "tags": [], "age_days": rng.randint(0, 1460)})
    return out


def remember_all(
    e: Any, memories: Sequence[dict[str, Any]], set_name: str, ids: dict[str, str], now: datetime
) -> None:
    from engram.base.errors import EngramError

    for m in memories:
        age = int(m.get("age_days") or 0)
        try:
            r = e.remember(
                m["text"],
                kind=m["kind"],
                tags=m.get("tags", []),
                at=now - timedelta(days=age),
                check_duplicates=False,
            )
        except EngramError as exc:
            print(f"  not stored ({exc})", file=sys.stderr)
            continue
        if "id" in m:
            ids[r.id] = f"{set_name}:{m['id']}"


def ask(
    e: Any, queries: Sequence[dict[str, Any]], ids: dict[str, str], now: datetime
) -> list[dict[str, Any]]:
    rows = []
    for q in queries:
        start = time.perf_counter()
        hits = e.recall(q["q"], k=K, now=now)
        spent = time.perf_counter() - start
        rows.append(
            {
                "set": q["set"],
                "type": q["type"],
                "answers": q["answers"],
                "retrieved": [ids.get(h.memory.id, "?") for h in hits],
                "top": hits[0].score if hits else 0.0,
                "seconds": spent,
            }
        )
    return rows


def cosine_ranking(
    e: Any, queries: Sequence[dict[str, Any]], ids: dict[str, str]
) -> list[dict[str, Any]]:
    """Every memory of the store ranked by the model's cosine alone (exact, no index)."""
    import numpy as np

    from engram.search.embed import embed_with_cache
    from engram.search.retrieval import memory_embedding_text

    ws = e.workspace
    store = ws.personal
    search, embedder = ws.search(store), ws.embedder(store)
    proj = ws.projection(store)
    all_ids = proj.all_memory_ids()
    found = proj.memories_by_id(all_ids)
    live = [found[i] for i in all_ids if i in found]
    vectors, _ = embed_with_cache(
        embedder, search.embeddings, [memory_embedding_text(m) for m in live]
    )
    matrix = np.asarray(vectors, dtype=np.float32)
    rows = []
    for q in queries:
        sims = matrix @ embedder.embed_query(q["q"])
        order = np.argsort(-sims)[:K]
        rows.append(
            {
                "set": q["set"],
                "type": q["type"],
                "answers": q["answers"],
                "retrieved": [ids.get(live[i].id, "?") for i in order],
                "top": float(sims[order[0]]),
                "seconds": 0.0,
            }
        )
    return rows


def figures(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        if r["answers"]:
            groups[r["type"]].append(r)
            groups["answerable"].append(r)
    out: dict[str, Any] = {}
    for name, group in groups.items():
        h1 = h5 = mrr = 0.0
        for r in group:
            wanted = {f"{r['set']}:{a}" for a in r["answers"]}
            ranks = [i for i, x in enumerate(r["retrieved"]) if x in wanted]
            if ranks:
                h1 += ranks[0] == 0
                h5 += ranks[0] < 5
                mrr += 1.0 / (ranks[0] + 1)
        n = len(group)
        out[name] = {
            "n": n,
            "hit1": h1 / n,
            "hit5": h5 / n,
            "mrr": mrr / n,
            "top": statistics.fmean(r["top"] for r in group),
        }
    nones = [r["top"] for r in rows if not r["answers"]]
    if nones:
        out["none"] = {"n": len(nones), "top": statistics.fmean(nones), "max": max(nones)}
    out["p50_ms"] = 1000 * statistics.median(r["seconds"] for r in rows)
    return out


def threshold(by_size: dict[str, Sequence[dict[str, Any]]]) -> dict[str, Any]:
    """The score cut-off that best keeps answerable and rejects "none" questions at every size
    at once: the worst of the kept and rejected shares, maximised."""
    best: dict[str, Any] = {"worst": -1.0}
    for step in range(1, 100):
        t = step / 100
        shares = {}
        for size, rows in by_size.items():
            answerable = [r["top"] for r in rows if r["answers"]]
            nones = [r["top"] for r in rows if not r["answers"]]
            shares[size] = (
                sum(x >= t for x in answerable) / len(answerable),
                sum(x < t for x in nones) / len(nones),
            )
        worst = min(min(keep - KEEP, reject - REJECT) for keep, reject in shares.values())
        if worst > best["worst"]:
            best = {
                "worst": worst,
                "threshold": t,
                "shares": {s: {"kept": k, "rejected": r} for s, (k, r) in shares.items()},
                "met": worst >= 0,
            }
    return best


def table(title: str, results: dict[str, dict[str, Any]]) -> str:
    lines = [title, f"{'':22} {'n':>4} " + " ".join(f"{col:>15}" for col in results)]
    names = ["answerable", *TYPES]
    for name in names:
        cells = []
        n = 0
        for res in results.values():
            f = res.get(name)
            if not f:
                cells.append(f"{'-':>15}")
                continue
            n = f["n"]
            cells.append(f"{f['hit1']:.3f} {f['hit5']:.3f} {f['top']:.2f}".rjust(15))
        lines.append(f"{name + ' H@1 H@5 top':22} {n:>4} " + " ".join(cells))
    cells = [
        (
            f"{res['none']['top']:.3f} max {res['none']['max']:.2f}".rjust(15)
            if "none" in res
            else f"{'-':>15}"
        )
        for res in results.values()
    ]
    lines.append(f"{'none mean top score':22} {'':>4} " + " ".join(cells))
    cells = [f"{res['p50_ms']:.0f} ms".rjust(15) for res in results.values()]
    lines.append(f"{'recall p50':22} {'':>4} " + " ".join(cells))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("dev", type=Path, help="coding-recall-dev.json")
    parser.add_argument("locomo", type=Path, help="locomo-dev.json (its turns are distractors)")
    parser.add_argument("--holdout", type=Path, default=HOLDOUT)
    parser.add_argument(
        "--generated",
        type=int,
        default=300,
        help="coding memories of other projects to add (default 300)",
    )
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--variant", action="append", default=[], metavar="KEY=VALUE[,...]")
    parser.add_argument(
        "--details",
        action="store_true",
        help="put each question's retrieved memories, per variant and size, in the --json file",
    )
    parser.add_argument("--json", type=Path, help="write every figure to this file")
    parser.add_argument(
        "--embedding-cache",
        type=Path,
        metavar="FILE",
        help="an embedding cache (SQLite) kept between runs: read before the "
        "memories are embedded, written back at the end (vectors are "
        "keyed by model and text, so any run may share it)",
    )
    args = parser.parse_args(argv)

    from engram.base.config import SETTINGS
    from engram.base.layout import EMBEDDINGS_DB, cache_dir

    base: dict[str, str] = {}
    for item in args.set:
        base |= parse_assignments(item)
    variants = [Variant("default", {})] + [Variant(v, parse_assignments(v)) for v in args.variant]
    touched = sorted({key for v in variants for key in v.settings})
    sets = {
        "dev": json.loads(args.dev.read_text("utf-8")),
        "holdout": json.loads(args.holdout.read_text("utf-8")),
    }
    queries = [{**q, "set": name} for name, data in sets.items() for q in data["queries"]]
    now = datetime.now(UTC).replace(microsecond=0)
    results: dict[str, dict[str, Any]] = {}
    rows_of: dict[str, dict[str, list[dict[str, Any]]]] = defaultdict(dict)
    sizes: dict[str, int] = {}
    with (
        tempfile.TemporaryDirectory(prefix="engram-scale-") as tmp,
        isolated_environment(Path(tmp)),
    ):
        from engram.api import Engram

        work = Path(tmp) / "work"
        work.mkdir()
        e = Engram(cwd=work)
        try:
            e.init()
            for key, value in base.items():
                e.config_set(key, value)
            cached = cache_dir(e.personal.local_dir) / EMBEDDINGS_DB
            if args.embedding_cache is not None and args.embedding_cache.exists():
                cached.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(args.embedding_cache, cached)
            ids: dict[str, str] = {}
            for name, data in sets.items():
                remember_all(e, data["memories"], name, ids, now)
            e.commit()

            def measure(size: str) -> None:
                start = time.perf_counter()
                e.recall("warm-up", k=1, now=now)
                print(
                    f"{size}: {len(e.workspace.projection(e.personal).all_memory_ids())} "
                    f"memories; first recall {time.perf_counter() - start:.1f} s",
                    file=sys.stderr,
                )
                sizes[size] = len(e.workspace.projection(e.personal).all_memory_ids())
                for variant in variants:
                    for key in touched:
                        value = variant.settings.get(key, base.get(key))
                        e.config_set(
                            key,
                            value if value is not None else _setting_text(SETTINGS[key].default),
                        )
                    rows_of[variant.name][size] = rows = ask(e, queries, ids, now)
                    results[f"{variant.name} {size}"] = {
                        s: figures([r for r in rows if r["set"] == s]) for s in sets
                    }
                rows_of["cosine"][size] = rows = cosine_ranking(e, queries, ids)
                results[f"cosine {size}"] = {
                    s: figures([r for r in rows if r["set"] == s]) for s in sets
                }

            measure("small")
            rng = random.Random(11)
            chat = []
            for conv in load_conversations(args.locomo):
                shift = now - timedelta(days=rng.randint(1, 60)) - conv.now
                chat += [
                    {
                        "kind": "fact",
                        "text": turn_content(t, True),
                        "age_days": max(0, (now - (t.at + shift)).days),
                    }
                    for t in conv.turns
                ]
            remember_all(e, chat, "chat", {}, now)
            remember_all(e, generated_memories(args.generated), "generated", {}, now)
            e.commit()
            measure("large")
        finally:
            e.close()
        if args.embedding_cache is not None and cached.exists():
            shutil.copyfile(cached, args.embedding_cache)

    for name in sets:
        print(
            table(
                f"\n{name} set ({', '.join(f'{s} {n}' for s, n in sizes.items())} memories)"
                f": Hit@1 Hit@5 mean-top-score per column",
                {col: res[name] for col, res in results.items()},
            )
        )
    thresholds = {}
    print("\none threshold for both sizes (keep >= 90% answerable, reject >= 70% none):")
    for variant in [*(v.name for v in variants), "cosine"]:
        for name in sets:
            t = threshold(
                {
                    size: [r for r in rows if r["set"] == name]
                    for size, rows in rows_of[variant].items()
                }
            )
            thresholds[f"{variant} {name}"] = t
            shares = ", ".join(
                f"{s}: kept {v['kept']:.2f} rejected {v['rejected']:.2f}"
                for s, v in t["shares"].items()
            )
            print(
                f"  {variant:>10} {name:8} best t={t['threshold']:.2f} ({shares})"
                f"{'  met' if t['met'] else '  not met'}"
            )
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "sizes": sizes,
                    "results": results,
                    "thresholds": thresholds,
                    **({"questions": rows_of} if args.details else {}),
                },
                indent=1,
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
