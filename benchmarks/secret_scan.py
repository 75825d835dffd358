"""How well and how fast the secret scanner works, on the corpora in tests/corpus/.

    .venv/bin/python benchmarks/secret_scan.py            # figures and timing
    .venv/bin/python benchmarks/secret_scan.py --misses   # also list what it gets wrong

Caught: the share of tests/corpus/secrets_positive.jsonl (natural secret forms) in which the
scanner finds a secret. Refused: the share of tests/corpus/secrets_negative.jsonl (ordinary
coding-agent text) in which it finds one. Time: the median over many runs of one scan of a
typical 200-character text (ordinary text from the negative corpus, joined and cut to 200
characters), as `remember` does it, after a first scan has paid for the imports.
(tests/corpus/make_secrets_corpus.py writes the corpora.)
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from engram.base.secrets import find_secrets  # noqa: E402

CORPUS = ROOT / "tests" / "corpus"


def load(name: str) -> list[dict[str, str]]:
    with open(CORPUS / name, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def typical_texts(negatives: list[dict[str, str]], size: int = 200) -> list[str]:
    texts, current = [], ""
    for row in negatives:
        current = f"{current} {row['text']}".strip()
        if len(current) >= size:
            texts.append(current[:size])
            current = ""
    return texts


def median_seconds(texts: list[str], rounds: int) -> float:
    samples = []
    for _ in range(rounds):
        for text in texts:
            start = time.perf_counter()
            find_secrets(text)
            samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--misses", action="store_true", help="list missed and refused texts")
    parser.add_argument("--rounds", type=int, default=50)
    args = parser.parse_args()
    positives, negatives = load("secrets_positive.jsonl"), load("secrets_negative.jsonl")
    find_secrets("warm up")
    start = time.perf_counter()
    missed = [row for row in positives if not find_secrets(row["text"])]
    refused = [row for row in negatives if find_secrets(row["text"])]
    elapsed = time.perf_counter() - start
    caught = len(positives) - len(missed)
    print(f"caught:  {caught}/{len(positives)} secret forms "
          f"({100 * caught / len(positives):.1f}%)")
    print(f"refused: {len(refused)}/{len(negatives)} ordinary texts "
          f"({100 * len(refused) / len(negatives):.2f}%)")
    texts = typical_texts(negatives)
    print(f"time:    {1e6 * median_seconds(texts, args.rounds):.1f} µs median per "
          f"200-character text ({len(texts)} texts x {args.rounds} rounds); "
          f"whole corpus {1e3 * elapsed:.0f} ms")
    if args.misses:
        for row in missed:
            print(f"missed   [{row['form']}] {row['text'][:100]!r}")
        for row in refused:
            print(f"refused  [{row['form']}] {row['text'][:100]!r} -> "
                  f"{[f.type for f in find_secrets(row['text'])]}")


if __name__ == "__main__":
    main()
