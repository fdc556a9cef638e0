"""How each annealed run of an east-compare folder ended: on the annealing criterion or on the budget, and where.

Reads every ``<variant>/seed-*/trainer_state.json`` (the annealing callback's saved state) and prints a Markdown
table: per variant, the runs that ended on the criterion (``stop_reason``), the temperatures reached (stages + 1),
and the epochs trained, against the budget. Baselines (one stage) are listed too: their early stopping is the
same stage criterion. With ``--reference VARIANT``, two more columns: the median training wall-clock
(``train_results.json``'s ``train_runtime``, evaluations within training included) and the median over seeds of
each run's wall-clock divided by the reference's run of the same seed (runs side by side on the same machine).

Usage: python benchmarks/annealing_report.py runs/evidence/hpc [--variants east,ce] [--reference ce]
       [--markdown out.md]
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import Counter
from pathlib import Path


def run_end(run_dir: Path) -> dict | None:
    path = run_dir / "trainer_state.json"
    if not path.is_file():
        return None
    state = json.loads(path.read_text())
    callback = state.get("stateful_callbacks", {}).get("TemperatureAnnealingCallback", {})
    schedule = callback.get("attributes", {}).get("schedule_state", {})
    settings = callback.get("args", {}).get("schedule", {})
    epochs = state.get("epoch") or 0.0
    budget = state.get("num_train_epochs") or float("nan")
    timing = run_dir / "train_results.json"
    return {
        "seed": run_dir.name,
        "seconds": json.loads(timing.read_text()).get("train_runtime") if timing.is_file() else None,
        "criterion": bool(schedule.get("finished")),
        "reason": schedule.get("stop_reason") or "budget",
        "temperatures": max(int(schedule.get("stage", 0)), 0) + 1,
        "epochs": float(epochs),
        "budget": float(budget),
        "threshold": f"{settings.get('threshold')} {settings.get('threshold_mode', 'abs')}",
        "anneal_threshold": f"{settings.get('anneal_threshold', 0.0):.4g}",
    }


def report(folder: Path, variants: list[str] | None = None, reference: str | None = None) -> list[dict]:
    rows = []
    reference_seconds = {}
    if reference is not None:
        ends = (run_end(d) for d in sorted((folder / reference).glob("seed-*")))
        reference_seconds = {e["seed"]: e["seconds"] for e in ends if e is not None and e["seconds"]}
    for variant in sorted(p for p in folder.iterdir() if p.is_dir() and (variants is None or p.name in variants)):
        ends = [e for e in (run_end(d) for d in sorted(variant.glob("seed-*"))) if e is not None]
        if not ends:
            continue
        anneal_thresholds = Counter(e["anneal_threshold"] for e in ends)  # several: runs kept across a default change
        temps = [e["temperatures"] for e in ends]
        seconds = [e["seconds"] for e in ends if e["seconds"]]
        ratios = [
            e["seconds"] / reference_seconds[e["seed"]]
            for e in ends
            if e["seconds"] and e["seed"] in reference_seconds
        ]
        rows.append(
            {
                "variant": variant.name,
                "runs": len(ends),
                "on_criterion": sum(e["criterion"] for e in ends),
                "temperatures_min": min(temps),
                "temperatures_median": statistics.median(temps),
                "epochs_median": statistics.median(e["epochs"] for e in ends),
                "epochs_max": max(e["epochs"] for e in ends),
                "budget": ends[0]["budget"],
                "seconds_median": statistics.median(seconds) if seconds else float("nan"),
                "ratio_median": statistics.median(ratios) if ratios else float("nan"),
                "threshold": ends[0]["threshold"],
                "anneal_threshold": ", ".join(
                    f"{value} ×{count}" if len(anneal_thresholds) > 1 else value
                    for value, count in sorted(anneal_thresholds.items())
                ),
            }
        )
    return rows


def markdown(folder: Path, rows: list[dict], reference: str | None = None) -> str:
    timing = f" wall-clock (median s) | × {reference} (median of seeds) |" if reference else ""
    lines = [
        f"# How the runs of {folder} ended",
        "",
        "| variant | runs | ended on the criterion | temperatures (min / median) | epochs (median / max) | budget | "
        f"stage threshold | across-stage threshold |{timing}",
        "|---|---|---|---|---|---|---|---|" + ("---|---|" if reference else ""),
    ]
    for r in rows:
        times = f" {r['seconds_median']:.0f} | {r['ratio_median']:.2f} |" if reference else ""
        lines.append(
            f"| {r['variant']} | {r['runs']} | {r['on_criterion']} | {r['temperatures_min']} / "
            f"{r['temperatures_median']:g} | {r['epochs_median']:g} / {r['epochs_max']:g} | {r['budget']:g} | "
            f"{r['threshold']} | {r['anneal_threshold']} |{times}"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--variants", default=None, help="comma-separated variants to report (default: every one)")
    parser.add_argument("--reference", default=None, help="variant whose wall-clock each run is divided by, per seed")
    parser.add_argument("--markdown", type=Path, default=None)
    args = parser.parse_args()
    variants = args.variants.split(",") if args.variants else None
    text = markdown(args.folder, report(args.folder, variants, args.reference), args.reference)
    print(text, end="")
    if args.markdown:
        args.markdown.write_text(text)


if __name__ == "__main__":
    main()
