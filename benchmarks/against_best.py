"""Variants of one east-compare folder paired by seed with a baseline of another (each task's best tuned baseline).

A task is ``NAME=RUNS/results.json=BASELINES/results.json:VARIANT``: the runs to judge, and the table (its
results.json, under runs/evidence/tables/) whose ``VARIANT`` (e.g. ``wce+tuned``) they are paired with, seed by seed
(same seeds, same splits). The differences are east-compare's own ``paired_differences``; the table gives, per task and
variant, the test target's mean, the paired difference from the baseline (mean ± standard error · wins/ties/losses)
and, for every variant but the first, from the first.

Usage::

    R=runs/evidence/tables
    python benchmarks/against_best.py --variants east,decay075,nodecay \\
      lending_club=$R/ce_decay_lending_club/results.json=$R/lending_club/results.json:wce+tuned \\
      hpc=$R/ce_decay_hpc/results.json=$R/hpc/results.json:la+tuned --markdown table.md
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from paired import difference_text, emit_table, seed_range  # benchmarks/paired.py, beside this script

from east_hf.scripts.east_compare import paired_differences


def task_row(spec: str, variants: list[str], seeds: set[int] | None = None) -> str:
    """One Markdown row: the task, its baseline, then each variant's mean and paired differences, over the seeds both
    files have (and of those, ``seeds`` where given)."""
    name, runs_path, rest = spec.split("=", 2)
    base_path, _, base_variant = rest.rpartition(":")
    runs, baseline = json.loads(Path(runs_path).read_text()), json.loads(Path(base_path).read_text())
    shared = {run["seed"] for run in runs["runs"]} & {
        r["seed"] for r in baseline["runs"] if r["variant"] == base_variant
    }
    keep = shared if seeds is None else shared & seeds  # every mean is over the seeds both have
    runs["runs"] = [run for run in runs["runs"] if run["seed"] in keep]
    baseline["runs"] = [run for run in baseline["runs"] if run["seed"] in keep]
    metric = runs["metric"]
    reference = f"baseline:{base_variant}"
    base_runs = [dict(run, variant=reference) for run in baseline["runs"] if run["variant"] == base_variant]
    if not base_runs:
        raise SystemExit(f"Expected variant {base_variant!r} in {base_path}, got none of its runs")
    against_base = paired_differences(runs["runs"] + base_runs, metric, reference)
    against_first = paired_differences(runs["runs"], metric, variants[0])
    base_mean = statistics.mean(run["metrics"][metric] for run in base_runs)
    cells = [name, f"`{base_variant}` {base_mean:.4f}"]
    for i, variant in enumerate(variants):
        values = [run["metrics"][metric] for run in runs["runs"] if run["variant"] == variant]
        cell = f"{statistics.mean(values):.4f} · {difference_text(against_base.get(variant))}" if values else "-"
        if i > 0 and values:
            cell += f" · vs {variants[0]} {difference_text(against_first.get(variant))}"
        cells.append(cell)
    return "| " + " | ".join(cells) + " |"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tasks", nargs="+", help="NAME=RUNS/results.json=BASELINES/results.json:VARIANT")
    parser.add_argument("--variants", default="east", help="comma-separated variants of the runs (default: east)")
    parser.add_argument("--seeds", default=None, help="only these seeds, FIRST-LAST (e.g. 10-19; default: all)")
    parser.add_argument("--markdown", type=Path, default=None, help="also write the table here")
    args = parser.parse_args(argv)
    variants = args.variants.split(",")
    try:
        seeds = seed_range(args.seeds)
    except ValueError as e:
        parser.error(str(e))
    for spec in args.tasks:
        if spec.count("=") < 2 or ":" not in spec.split("=", 2)[2]:
            parser.error(f"Expected a task as NAME=RUNS.json=BASELINES.json:VARIANT, got {spec!r}")
    tuned = all(spec.endswith("+tuned") for spec in args.tasks)  # else a variant such as the default itself
    header = ["task", "best tuned baseline" if tuned else "baseline"] + [f"{v}: mean · − baseline" for v in variants]
    lines = ["| " + " | ".join(header) + " |", "|---" * len(header) + "|"]
    lines += [task_row(spec, variants, seeds) for spec in args.tasks]
    emit_table(lines, args.markdown)


if __name__ == "__main__":
    main()
