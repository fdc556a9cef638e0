"""The default against every baseline, focal loss and LDAM-DRW included: one row per task, paired by seed.

A task is ``NAME=DEFAULT/results.json:VARIANT=BASELINES/results.json[,MORE/results.json...]``: the default's runs
(``VARIANT`` of the first file) and the files holding the baselines, whose variants of the losses of ``BASELINES``, as
trained and ``+tuned``, are the candidates; all on the same seeds and splits. A row gives the default's mean, each
long-tail baseline's mean as trained and tuned, the best baseline by mean (the default's opponent, chosen after the
fact on the test scores, which favours the baselines), and the paired differences (mean ± standard error ·
wins/ties/losses) of the default against it, against focal+tuned and against ldam+tuned; and the seed standard
deviations of the default and of the best baseline.

Usage::

    R=runs/evidence/tables
    BASELINES=$R/lending_club/results.json,$R/long_tail_lending_club/results.json
    python benchmarks/long_tail_table.py \\
      lending_club=$R/ce_decay_lending_club/results.json:east=$BASELINES \\
      --markdown table.md

Without tasks: the evidence tasks of ``bash benchmarks/run_evidence.sh long_tail`` (``TASKS``).
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from paired import difference_text, emit_table, seed_range  # benchmarks/paired.py, beside this script

from east_hf.scripts.east_compare import paired_differences

BASELINES = ("ce", "wce", "la", "dice", "focal", "ldam")
R = "runs/evidence/tables"  # where run_evidence.sh copies every table's results.json
# The default's runs: with one class scored (the binary tables) the learning rate halves at each temperature
# decrease (run_evidence.sh lr_decay, variant lrd05); with several, one rate (ce_decay, many_classes).
TASKS = [
    f"{name}={R}/{runs}={R}/{folder}/results.json,{R}/long_tail_{folder}/results.json"
    for name, folder, runs in (
        ("lending_club", "lending_club", "lrdecay_lending_club/results.json:lrd05"),
        ("caravan", "caravan", "lrdecay_caravan/results.json:lrd05"),
        ("digits9_binary", "digits9_binary", "lrdecay_digits9_binary/results.json:lrd05"),
        ("synthetic_binary", "synthetic_binary", "lrdecay_synthetic_binary/results.json:lrd05"),
        ("hpc", "hpc", "ce_decay_hpc/results.json:east"),
        ("diamonds", "diamonds", "ce_decay_diamonds/results.json:east"),
        ("long-tailed digits", "digits_longtail", "ce_decay_digits_longtail/results.json:east"),
    )
] + [f"hotel_countries={R}/hotel_countries/results.json:east={R}/hotel_countries/results.json"]


def _values(runs: list[dict], variant: str, metric: str) -> list[float]:
    return [run["metrics"][metric] for run in runs if run["variant"] == variant and metric in run["metrics"]]


def task_row(spec: str, only: set[int] | None = None) -> str:
    """One Markdown row of the table (see the module's docstring), over the seeds ``only`` where given."""
    name, default_spec, files = spec.split("=", 2)
    default_path, _, default_variant = default_spec.rpartition(":")
    default = json.loads(Path(default_path).read_text())
    metric = default["metric"]
    reference = "default"
    runs = [
        dict(run, variant=reference)
        for run in default["runs"]
        if run["variant"] == default_variant and (only is None or run["seed"] in only)
    ]
    if not runs:
        raise SystemExit(f"Expected variant {default_variant!r} in {default_path}, got none of its runs")
    seeds = {run["seed"] for run in runs}
    baselines = {}  # variant: its runs on the default's seeds
    for path in files.split(","):
        result = json.loads(Path(path).read_text())
        if result["metric"] != metric:
            raise SystemExit(f"Expected target {metric!r} in {path} (as {default_path}), got {result['metric']!r}")
        for run in result["runs"]:
            base = run["variant"].partition("+")[0]
            if base in BASELINES and run["seed"] in seeds:  # never the default, whose loss is east
                baselines.setdefault(run["variant"], []).append(run)
    tuned = {v: r for v, r in baselines.items() if len(r) == len(seeds)}  # as trained and tuned
    if not tuned:
        raise SystemExit(f"Expected baselines on the seeds {sorted(seeds)} in {files}, got none")
    best = max(tuned, key=lambda v: statistics.fmean(_values(tuned[v], v, metric)))
    pairs = {v: paired_differences(runs + tuned[v], metric, v).get(reference) for v in tuned}

    def mean(variant: str) -> str:
        values = _values(baselines.get(variant, []), variant, metric)
        return f"{statistics.fmean(values):.4f}" if len(values) == len(seeds) else "-"

    default_values = _values(runs, reference, metric)
    cells = [
        f"{name} ({len(seeds)})",
        f"{statistics.fmean(default_values):.4f}",
        f"{mean('focal')} / {mean('focal+tuned')}",
        f"{mean('ldam')} / {mean('ldam+tuned')}",
        f"`{best}` {mean(best)}",
        difference_text(pairs[best]),
        difference_text(pairs.get("focal+tuned")),
        difference_text(pairs.get("ldam+tuned")),
        f"{statistics.stdev(default_values):.4f} / {statistics.stdev(_values(tuned[best], best, metric)):.4f}",
    ]
    return "| " + " | ".join(cells) + " |"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tasks", nargs="*", help="NAME=DEFAULT/results.json:VARIANT=BASELINES/results.json[,...]")
    parser.add_argument("--markdown", type=Path, default=None, help="also write the table here")
    parser.add_argument("--label", default="default", help="what the columns call the runs judged (default: default)")
    parser.add_argument("--seeds", default=None, help="only these seeds, FIRST-LAST (e.g. 0-9; default: all)")
    args = parser.parse_args(argv)
    try:
        only = seed_range(args.seeds)
    except ValueError as e:
        parser.error(str(e))
    name = args.label
    lines = [
        f"| task (seeds) | {name} | focal / +tuned | ldam / +tuned | best baseline | {name} − best | "
        f"{name} − focal+tuned | {name} − ldam+tuned | seed std: {name} / best |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for spec in args.tasks or TASKS:
        if spec.count("=") < 2 or ":" not in spec.split("=", 2)[1]:
            raise SystemExit(f"Expected NAME=DEFAULT/results.json:VARIANT=BASELINES/results.json[,...], got {spec!r}")
        lines.append(task_row(spec, only))
    emit_table(lines, args.markdown)


if __name__ == "__main__":
    main()
