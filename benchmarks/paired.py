"""Paired differences between any two variants of east-compare results.json files, by seed
(east_hf.scripts.east_compare's own ``paired_differences``): ``metric(A) - metric(B)``, mean ± standard error and
wins / ties / losses.

One file: a line per pair. Several: a Markdown table, a row per pair and a column per file (its folder's name); a cell
is "-" where the file lacks one of the two variants.

Usage: python benchmarks/paired.py runs/evidence/tables/lending_club/results.json east_mem:east east_mem:wce+tuned
       python benchmarks/paired.py runs/evidence/tables/{lending_club,caravan}/results.json --pair east_mem:east
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from east_hf.scripts.east_compare import paired_differences


def difference(result: dict, a: str, b: str, metric: str | None = None):
    """(mean, standard error, wins, ties, losses, n) of metric(a) - metric(b) over the seeds both have, or None."""
    return paired_differences(result["runs"], metric or result["metric"], b).get(a)


def difference_text(diff) -> str:
    """``+0.0123 ± 0.0045 · 7/0/3`` (Unicode minus), or "-" for a missing difference."""
    if diff is None:
        return "-"
    mean, se, wins, ties, losses, n = diff
    return f"{mean:+.4f} ± {se:.4f} · {wins}/{ties}/{losses}".replace("-", "−")


def against_reference(scores: dict[int, dict[str, float]], reference: str, names: list[str]) -> dict[str, tuple]:
    """{name: ("mean ± std" over the seeds, the paired difference from ``reference`` as ``difference_text``, "" for
    the reference itself)} of per-seed scores ``{seed: {name: value}}``, for the reference and each of ``names``."""
    runs = [
        {"variant": n, "seed": seed, "metrics": {"score": v}} for seed, row in scores.items() for n, v in row.items()
    ]
    diffs = paired_differences(runs, "score", reference)
    out = {}
    for name in [reference, *names]:
        values = [row[name] for row in scores.values()]
        spread = f"{statistics.fmean(values):.4f} ± {statistics.stdev(values):.4f}"
        out[name] = (spread, "" if name == reference else difference_text(diffs.get(name)))
    return out


def seed_range(text: str | None) -> set[int] | None:
    """``--seeds FIRST-LAST`` as the set of seeds (None: every seed); a ValueError naming what arrived otherwise."""
    if text is None:
        return None
    first, _, last = text.partition("-")
    if not (first.isdigit() and last.isdigit() and int(first) <= int(last)):
        raise ValueError(f"Expected --seeds as FIRST-LAST, e.g. 10-19, got {text!r}")
    return set(range(int(first), int(last) + 1))


def emit_table(lines: list[str], markdown: Path | None) -> None:
    """Print a markdown table's lines, and write them to ``markdown`` where given."""
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if markdown:
        markdown.write_text(text)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", nargs="+", help="results.json files, then (with one file) the pairs A:B")
    parser.add_argument("--pair", action="append", default=[], help="A:B (repeatable)")
    parser.add_argument("--metric", default=None, help="default: each comparison's target metric")
    parser.add_argument("--markdown", type=Path, default=None, help="also write the table here")
    args = parser.parse_args(argv)
    files = [Path(x) for x in args.results if ":" not in x]
    pairs = [x for x in args.results if ":" in x] + args.pair
    for pair in pairs:
        if not all(pair.partition(":")[::2]):
            parser.error(f"Expected a pair as A:B, got {pair!r}")
    if not files or not pairs:
        parser.error("Expected at least one results.json and one pair A:B")
    results = [json.loads(f.read_text()) for f in files]
    if len(files) == 1:
        for pair in pairs:
            a, _, b = pair.partition(":")
            diff = difference(results[0], a, b, args.metric)
            if diff is None:
                known = sorted({run["variant"] for run in results[0]["runs"]})
                parser.error(f"Expected variants with common seeds among {known}, got {a!r} and {b!r}")
            print(f"{a} - {b}: {difference_text(diff)} ({diff[-1]} seeds, {args.metric or results[0]['metric']})")
        return
    lines = [
        "| paired difference | " + " | ".join(f.parent.name for f in files) + " |",
        "|---|" + "---|" * len(files),
    ]
    for pair in pairs:
        a, _, b = pair.partition(":")
        cells = [difference_text(difference(r, a, b, args.metric)) for r in results]
        lines.append(f"| {a} − {b} | " + " | ".join(cells) + " |")
    emit_table(lines, args.markdown)


if __name__ == "__main__":
    main()
