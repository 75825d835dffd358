"""How many phrasings of a phrasing set Engram reads right: tense, kinds and time window.

Each phrasing of the set (default: tests/corpus/intent_heldout.json; also
tests/corpus/intent_heldout2.json; docs/search.md says how each was written) names the tense
it asks for ("past": the state before a change, "current": the state after it, or none), the
kinds of memory it names, and whether it names a time window. A phrasing is read right when
all three match what `engram.search.intent.analyse` reads.

  .venv/bin/python benchmarks/intent.py [SET.json] [--misses]
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from engram.search.intent import analyse  # noqa: E402

DEFAULT = ROOT / "tests" / "corpus" / "intent_heldout.json"
NOW = datetime(2026, 6, 15, 12, 0, tzinfo=UTC)


def read(phrasing: dict[str, object]) -> dict[str, object]:
    intent = analyse(str(phrasing["q"]), NOW)
    return {
        "tense": intent.tense,
        "kinds": sorted(intent.kinds),
        "window": intent.window is not None,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("set", nargs="?", type=Path, default=DEFAULT)
    parser.add_argument("--misses", action="store_true", help="list the phrasings read wrong")
    args = parser.parse_args()
    phrasings = json.loads(args.set.read_text(encoding="utf-8"))["phrasings"]
    right = {"tense": 0, "kinds": 0, "window": 0, "all": 0}
    misses = []
    for phrasing in phrasings:
        got = read(phrasing)
        want = {
            "tense": phrasing["tense"],
            "kinds": sorted(phrasing["kinds"]),
            "window": phrasing["window"],
        }
        for key in ("tense", "kinds", "window"):
            right[key] += got[key] == want[key]
        if got == want:
            right["all"] += 1
        else:
            misses.append((phrasing["q"], want, got))
    n = len(phrasings)
    print(f"{args.set.name}: {n} phrasings")
    for key, count in right.items():
        print(f"  {key:7} {count:3d}/{n} ({count / n:.0%})")
    if args.misses:
        for q, want, got in misses:
            wrong = {k: (want[k], got[k]) for k in want if want[k] != got[k]}
            print(
                f"  - {q}  " + "  ".join(f"{k}: want {w}, read {g}" for k, (w, g) in wrong.items())
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
