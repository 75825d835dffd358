"""Ranking by meaning alone, offline: how a formula or a model ranks the coding-recall answers.

Every memory and question of the dev and holdout sets is embedded once (with `--embedding-cache`,
the file `benchmarks/scale.py` keeps, nothing is embedded twice), and each variant below ranks
the memories of a store by a number worked out in numpy: at 80 memories (one set, as
`coding_recall.py` stores it) and at 3,220 (both sets, LoCoMo's chat turns and the generated
memories of `scale.py`). It prints paraphrase and all-answerable Hit@5 per model, set, size and
variant: what the model itself can do, without words, time, kind or context, in seconds.

Variants (memories as Engram embeds them, `kind (tags): text`, unless said):

- `cosine`: the model's cosine alone;
- `ordinary`: the cosine less half of how much nearer ordinary text the memory lies than the
  question (`recall.memory_background`, see docs/search.md);
- `plain cosine`, `plain ordinary`: the same, the memories embedded as their text alone;
- `s-norm`: the cosine read against the question's background and against the memory's own
  (the sum of both z-scores, as speaker verification normalises scores);
- `either form`: the higher of the two cosines, the memory embedded both ways;
- `bare question`, `bare ordinary`: the question embedded without its opening ("how do I",
  "why is there", "what does"), as a statement of what it asks about;
- `with builtin`: with another model given (`--model`), the sum of both models' z-scores
  against their own backgrounds, ordinariness taken off each.

    .venv/bin/python benchmarks/meaning.py ../shared/data/coding-recall-dev.json \\
        ../shared/data/locomo-dev.json --embedding-cache /tmp/scale-emb.sqlite3 \\
        --model builtin --model ~/.cache/engram/models/all-mpnet-base-v2-int8
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from locomo import load_conversations, turn_content  # noqa: E402  (sibling scripts)
from scale import HOLDOUT, generated_memories  # noqa: E402

ORDINARY = 0.5  # recall.memory_background's default
K = 5
_ASKING = r"(?:how|what|why|which|where|when|who|whose)"
_AUX = r"(?:do|does|did|is|are|was|were|can|could|should|would|will|has|have|had|am)"
_WHO = r"(?:i|we|you|they|it|there|he|she)"
OPENING = re.compile(
    rf"^\s*(?:{_ASKING}(?:\s+{_AUX})?(?:\s+{_WHO})?|{_AUX}(?:\s+{_WHO})?)\b\s*", re.I
)


def bare(question: str) -> str:
    """The question without its opening words and question mark (kept whole if little is left)."""
    rest = OPENING.sub("", question).rstrip(" ?")
    return rest if len(rest.split()) >= 2 else question


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dev", type=Path, help="coding-recall-dev.json")
    parser.add_argument("locomo", type=Path, help="locomo-dev.json (its turns are distractors)")
    parser.add_argument("--holdout", type=Path, default=HOLDOUT)
    parser.add_argument("--model", action="append", default=[], help="a search.model value")
    parser.add_argument("--embedding-cache", type=Path, help="an embedding cache (SQLite)")
    args = parser.parse_args(argv)

    from engram.search import background
    from engram.search.embed import EmbeddingCache, embed_with_cache, load_embedder
    from engram.search.hits import embedding_text
    from engram.search.ranking import nearest_mean

    sets = {
        "dev": json.loads(args.dev.read_text("utf-8")),
        "holdout": json.loads(args.holdout.read_text("utf-8")),
    }
    chat = [
        {"kind": "fact", "text": turn_content(t, True), "tags": []}
        for conv in load_conversations(args.locomo)
        for t in conv.turns
    ]
    others = chat + generated_memories(300)
    cache = EmbeddingCache(args.embedding_cache) if args.embedding_cache else None
    models = [str(Path(m).expanduser()) if m.startswith("~") else m for m in args.model]
    models = models or ["builtin"]

    def embedded(embedder: Any, memories: list[dict[str, Any]], plain: bool) -> np.ndarray:
        texts = [
            m["text"] if plain else embedding_text(m["kind"], m.get("tags", []), m["text"])
            for m in memories
        ]
        if cache is None:
            return np.asarray(embedder.embed(texts), dtype=np.float32)
        vectors, _ = embed_with_cache(embedder, cache, texts)
        return np.asarray(vectors, dtype=np.float32)

    # Per model: the store's memories (80 of one set, or all 3,220), their vectors both ways,
    # the questions' vectors and the background.
    prepared = {}
    for model in models:
        embedder = load_embedder(model)
        fixed = np.asarray(background.vectors(embedder), dtype=np.float32)
        data = {}
        for plain in (False, True):
            own = {name: embedded(embedder, s["memories"], plain) for name, s in sets.items()}
            rest = embedded(embedder, others, plain)
            data[plain] = {
                **{("80", name): own[name] for name in sets},
                "3220": np.vstack([own["dev"], own["holdout"], rest]),
            }
        questions = {
            (name, form): np.stack(
                [embedder.embed_query(form(q["q"])) for q in s["queries"] if q["answers"]]
            ).astype(np.float32)
            for name, s in sets.items()
            for form in (str, bare)
        }
        prepared[model] = (fixed, data, questions)

    def matrices(
        model: str, plain: bool, key: Any, name: str, form: Callable[[str], str] = str
    ) -> dict[str, np.ndarray]:
        """Each question's score of each memory (rows: the set's answerable questions)."""
        fixed, data, questions = prepared[model]
        memories, q = data[plain][key], questions[name, form]
        cos = q @ memories.T
        to_fixed = q @ fixed.T
        mean, deviation = to_fixed.mean(axis=1)[:, None], to_fixed.std(axis=1)[:, None]
        near = nearest_mean(memories @ fixed.T)[None, :] - nearest_mean(to_fixed)[:, None]
        ordinary = cos - ORDINARY * near
        own = memories @ fixed.T
        return {
            "cosine": cos,
            "ordinary": ordinary,
            "z ordinary": (ordinary - mean) / deviation,
            "s-norm": (cos - mean) / deviation
            + (cos - own.mean(axis=1)[None, :]) / own.std(axis=1)[None, :],
        }

    for model in models:
        for name, s in sets.items():
            answerable = [q for q in s["queries"] if q["answers"]]
            for size in ("80", "3220"):
                key: Any = ("80", name) if size == "80" else "3220"
                if size == "80":
                    ids = [m["id"] for m in s["memories"]]
                    wanted = [set(q["answers"]) for q in answerable]
                else:
                    ids = [f"{n}:{m['id']}" for n in sets for m in sets[n]["memories"]]
                    ids += ["-"] * len(others)
                    wanted = [{f"{name}:{a}" for a in q["answers"]} for q in answerable]
                ours = matrices(model, False, key, name)
                plain = matrices(model, True, key, name)
                asked = matrices(model, False, key, name, bare)
                variants = {
                    "cosine": ours["cosine"],
                    "ordinary": ours["ordinary"],
                    "plain cosine": plain["cosine"],
                    "plain ordinary": plain["ordinary"],
                    "either form": np.maximum(ours["cosine"], plain["cosine"]),
                    "bare question": asked["cosine"],
                    "bare ordinary": asked["ordinary"],
                    "s-norm": ours["s-norm"],
                }
                for other in models:
                    if other != model:
                        theirs = matrices(other, False, key, name)
                        variants[f"with {Path(other).name}"] = (
                            ours["z ordinary"] + theirs["z ordinary"]
                        )
                for label, score in variants.items():
                    hits: dict[str, list[bool]] = {"paraphrase": [], "all": []}
                    for q, want, row in zip(answerable, wanted, score, strict=True):
                        hit = bool({ids[i] for i in np.argsort(-row)[:K]} & want)
                        hits["all"].append(hit)
                        if q["type"] == "paraphrase":
                            hits["paraphrase"].append(hit)
                    print(
                        f"{Path(model).name:28} {name:8} {size:>5} {label:26} "
                        f"paraphrase Hit@5 {np.mean(hits['paraphrase']):.3f}  "
                        f"all answerable {np.mean(hits['all']):.3f}",
                        flush=True,
                    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
