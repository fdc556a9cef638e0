"""One Markdown table from several east-compare results.json files: a column per task, a row per variant.

Each cell: the task's target metric on the test split, mean ± std (``--se``: ± its standard error, std / sqrt(n)),
then the difference from the comparison's reference variant paired by seed, mean ± standard error, and wins / ties /
losses; the best mean of a column in bold.

Usage: python benchmarks/summary_table.py runs/evidence/tables/{lending_club,caravan,hpc,diamonds}/results.json \
           [--variants east,paper,ce,ce+tuned,...] [--se] [--markdown out.md]
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from paired import difference_text  # benchmarks/paired.py: this script's folder is on sys.path


def cell(result: dict, variant: str, best: float, se: bool = False) -> str:
    metric = result["metric"]
    stats = result["summary"].get(variant, {}).get(metric)
    if stats is None:
        return "-"
    mean, std, n = stats
    text = f"**{mean:.4f}**" if abs(mean - best) < 5e-5 else f"{mean:.4f}"
    text += f" ± {std / math.sqrt(n) if se else std:.4f}" if n > 1 else ""
    paired = result.get("paired", {})
    if variant == paired.get("reference"):
        return text + " (reference)"
    diff = paired.get("differences", {}).get(variant)
    if diff:
        text += " · " + difference_text(diff)
    return text


def table(paths: list[Path], variants: list[str] | None = None, se: bool = False) -> str:
    results = [json.loads(p.read_text()) for p in paths]
    if variants is None:
        variants = list(dict.fromkeys(v for r in results for v in r["summary"]))
    header = ["variant"]
    for path, r in zip(paths, results):
        n = max(s[r["metric"]][2] for s in r["summary"].values())
        header.append(f"{path.parent.name}, {r['metric']}, {n} seeds")
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    bests = [max(s[r["metric"]][0] for v, s in r["summary"].items() if v in variants) for r in results]
    for variant in variants:
        lines.append("| " + " | ".join([variant, *(cell(r, variant, b, se) for r, b in zip(results, bests))]) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="+", type=Path)
    parser.add_argument("--variants", default=None, help="comma-separated rows, in order (default: all)")
    parser.add_argument("--se", action="store_true", help="mean ± standard error (std / sqrt(n)) instead of ± std")
    parser.add_argument("--markdown", type=Path, default=None)
    args = parser.parse_args()
    text = table(args.results, args.variants.split(",") if args.variants else None, args.se)
    print(text, end="")
    if args.markdown:
        args.markdown.write_text(text)


if __name__ == "__main__":
    main()
