"""Paired differences between any two variants of an east-compare results.json, by seed (east_hf.compare's own
``paired_differences``): mean ± standard error and wins / ties / losses of ``metric(A) - metric(B)``.

Usage: python benchmarks/paired.py benchmarks/results/lending_club/results.json east_mem:east east_mem:wce+tuned
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from east_hf.compare import paired_differences


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path)
    parser.add_argument("pairs", nargs="+", help="A:B, for metric(A) - metric(B) paired by seed")
    parser.add_argument("--metric", default=None, help="default: the comparison's target metric")
    args = parser.parse_args(argv)
    result = json.loads(args.results.read_text())
    metric = args.metric or result["metric"]
    for pair in args.pairs:
        a, sep, b = pair.partition(":")
        if not sep:
            parser.error(f"Expected a pair as A:B, got {pair!r}")
        diff = paired_differences(result["runs"], metric, b).get(a)
        if diff is None:
            known = sorted({run["variant"] for run in result["runs"]})
            parser.error(f"Expected variants with common seeds among {known}, got {a!r} and {b!r}")
        mean, se, wins, ties, losses, n = diff
        print(f"{a} - {b}: {mean:+.4f} ± {se:.4f} ({wins}/{ties}/{losses}, {n} seeds, {metric})")


if __name__ == "__main__":
    main()
