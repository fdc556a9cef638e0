"""The multi-label evidence table: each variant's test target over the seeds, and its paired difference from the
task's best tuned baseline.

For every east-compare ``results.json`` given (a task, named after its folder), a Markdown table with one row per
variant: the mean ± standard error of the test target (macro F1 for the multi-label recipes) over the seeds, and
``variant − best`` paired by seed (east-compare's own ``paired_differences``: mean ± standard error · wins / ties /
losses), where ``best`` is the tuned baseline (``ce+tuned``, ``wce+tuned``, ``la+tuned``, ``asl+tuned``: whichever
the results hold) with the highest mean; then each label's test score (mean over the seeds) for ``east``,
``east+tuned`` and ``best``. The tables open with one summary row per task.

Usage: python benchmarks/multilabel_table.py runs/evidence/tables/{movie_genres,gss_abortion}/results.json \\
           --markdown runs/evidence/tables/multilabel.md
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from paired import difference_text, emit_table  # benchmarks/paired.py, beside this script

from east_hf.scripts.east_compare import paired_differences

BASELINES = ("ce+tuned", "wce+tuned", "la+tuned", "asl+tuned")


def _scores(result: dict, variant: str) -> list[float]:
    return [run["metrics"][result["metric"]] for run in result["runs"] if run["variant"] == variant]


def _mean_se(values: list[float]) -> str:
    se = statistics.stdev(values) / len(values) ** 0.5 if len(values) > 1 else 0.0
    return f"{statistics.mean(values):.4f} ± {se:.4f}"


def best_baseline(result: dict) -> str:
    """The tuned baseline with the highest mean test target."""
    present = [b for b in BASELINES if _scores(result, b)]
    if not present:
        raise SystemExit(f"Expected one of {BASELINES} in the results, got none")
    return max(present, key=lambda b: statistics.mean(_scores(result, b)))


def task_table(name: str, result: dict) -> list[str]:
    """The task's table: a row per variant (in the results' order)."""
    best = best_baseline(result)
    against = paired_differences(result["runs"], result["metric"], best)
    variants = list(dict.fromkeys(run["variant"] for run in result["runs"]))
    seeds = len({run["seed"] for run in result["runs"]})
    lines = [
        f"**{name}** ({seeds} seed{'s' if seeds != 1 else ''}; best tuned baseline `{best}`)",
        "",
        f"| variant | test {result['metric']} (mean ± s.e.) | − `{best}` (paired, mean ± s.e. · wins/ties/losses) |",
        "|---|---|---|",
    ]
    for variant in variants:
        diff = "(reference)" if variant == best else difference_text(against.get(variant))
        lines.append(f"| {variant} | {_mean_se(_scores(result, variant))} | {diff} |")
    return lines + ["", *label_table(result, ["east", "east+tuned", best])]


def label_table(result: dict, variants: list[str]) -> list[str]:
    """Each label's test score (``<metric>_<label>``, the mean over the seeds) for ``variants``."""
    metric, summary = result["metric"], result["summary"]
    prefix = f"{metric}_"
    labels = [key[len(prefix) :] for key in summary[variants[0]] if key.startswith(prefix)]
    lines = [f"| {metric} per label (mean) | " + " | ".join(labels) + " |", "|---|" + "---|" * len(labels)]
    for variant in variants:
        cells = [f"{summary[variant][prefix + label][0]:.3f}" for label in labels]
        lines.append(f"| {variant} | " + " | ".join(cells) + " |")
    return lines


def summary_row(name: str, result: dict) -> str:
    best = best_baseline(result)
    against = paired_differences(result["runs"], result["metric"], best)
    cells = [name, f"`{best}` {statistics.mean(_scores(result, best)):.4f}"]
    for variant in ("east", "east+tuned"):
        values = _scores(result, variant)
        cells.append(f"{statistics.mean(values):.4f} · {difference_text(against.get(variant))}" if values else "-")
    ce = _scores(result, "ce")
    cells.append(f"{statistics.mean(ce):.4f}" if ce else "-")
    return "| " + " | ".join(cells) + " |"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="+", type=Path, help="east-compare results.json files, one per task")
    parser.add_argument("--markdown", type=Path, default=None, help="also write the tables here")
    args = parser.parse_args(argv)
    tasks = [(path.parent.name, json.loads(path.read_text())) for path in args.results]
    lines = [
        "| task | best tuned baseline | east · − best (paired) | east+tuned · − best (paired) | ce (argmax) |",
        "|---|---|---|---|---|",
        *(summary_row(name, result) for name, result in tasks),
    ]
    for name, result in tasks:
        lines += ["", *task_table(name, result)]
    emit_table(lines, args.markdown)


if __name__ == "__main__":
    main()
