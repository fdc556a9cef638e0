"""Which finished runs a new across-stage threshold would have changed:
replay each run's annealing decisions from its log.

The across-stage threshold acts only where a stage ends: a stage's best anneal value (the hard metric) counts as
an improvement on the best so far if it beats it by more than the threshold. A run's ``trainer_state.json`` holds
every evaluation with its stage, so the decisions of that run under another threshold can be replayed: where no
stage improved on the best so far by more than 0 and at most the new threshold, every decision, and so the whole
run (the stages, the model kept), is the same. This brings runs trained with an across-stage threshold of 0 up to
the default ``east_anneal_threshold``, two validation samples' worth (``EASTConfig.resolved_anneal_threshold``:
2 / n for a hard metric, 0 for a loss):

    python benchmarks/anneal_threshold_replay.py runs/evidence/hpc runs/evidence/diamonds ...           # report
    python benchmarks/anneal_threshold_replay.py runs/evidence/hpc ... --apply runs/evidence_anneal0    # migrate
    python benchmarks/anneal_threshold_replay.py runs/evidence --paired runs/evidence_anneal0           # new - old

``--apply``: a run trained with a threshold of 0 by default (its saved schedule has the threshold 0, its
``run_settings.json`` does not set it) whose decisions change is moved to the given folder (kept, not deleted), so
that the next ``east-compare`` trains it again; the others stay (their training is what the default 2 / n trains;
east-compare's records list only settings that differ from the defaults, so they are kept as they are). Runs that set
the threshold themselves, and runs trained with 2 / n, are left alone. The validation size is the one of the run's logs
(samples per second times seconds, rounded).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
from pathlib import Path


def anneal_history(state: dict) -> tuple[str, dict, list[tuple[int, float]]]:
    """The anneal monitor, the saved schedule settings and (stage, value) of every evaluation of a run's
    ``trainer_state.json``."""
    callback = state.get("stateful_callbacks", {}).get("TemperatureAnnealingCallback", {}).get("args", {})
    key, schedule = callback.get("anneal_monitor", "eval_fbeta"), callback.get("schedule", {})
    history = [(int(h["east_stage"]), float(h[key])) for h in state["log_history"] if key in h and "east_stage" in h]
    return key, schedule, history


def changed_stages(history: list[tuple[int, float]], mode: str, threshold: float) -> list[tuple[int, float]]:
    """The stages whose end the threshold decides differently from 0: (stage, gain over the best so far) where
    0 < gain <= threshold. The first stage (the warm start, or stage 0 without one) is the reference.

    >>> changed_stages([(-1, 0.90), (0, 0.91), (1, 0.912), (2, 0.95)], "max", 0.005)
    [(1, 0.002)]
    """
    sign = 1.0 if mode == "max" else -1.0
    best_by_stage: dict[int, float] = {}
    for stage, value in history:
        best_by_stage[stage] = max(best_by_stage.get(stage, -float("inf")), sign * value)
    stages = sorted(best_by_stage.items())
    if not stages:
        return []
    best, out = stages[0][1], []
    for stage, value in stages[1:]:
        gain = value - best
        if 0 < gain <= threshold:
            out.append((stage, round(gain, 6)))
        best = max(best, value)
    return out


def replay(run_dir: Path) -> dict | None:
    state_file, settings_file = run_dir / "trainer_state.json", run_dir / "run_settings.json"
    if not (state_file.is_file() and settings_file.is_file() and (run_dir / "test_results.json").is_file()):
        return None
    state = json.loads(state_file.read_text())
    key, schedule, history = anneal_history(state)
    mode, trained_with = schedule.get("anneal_mode", "max"), schedule.get("anneal_threshold")
    first = next((h for h in state["log_history"] if "eval_runtime" in h and key in h), None)
    size = round(first["eval_samples_per_second"] * first["eval_runtime"]) if first else 0
    new = 0.0 if mode == "min" or not size else 2.0 / size  # EASTConfig.resolved_anneal_threshold's rule
    changed = changed_stages(history, mode, new)
    return {"key": key, "size": size, "threshold": new, "trained_with": trained_with, "changed": changed}


def paired_with_old(old_root: Path, new_root: Path) -> list[str]:
    """After ``--apply`` and the retraining: per task and variant, the test target with the default 2 / n minus that
    with 0, paired by seed (a run whose decisions did not change counts as a difference of 0), and median epochs of the
    retrained runs before and after."""
    lines = [
        "| folder | variant | retrained | new - old, mean ± s.e. · wins/ties/losses "
        "| epochs of those (median, old → new) |",
        "|---|---|---|---|---|",
    ]
    for task in sorted(p.name for p in old_root.iterdir() if p.is_dir()):
        for variant in sorted(p.name for p in (old_root / task).iterdir() if p.is_dir()):
            diffs, old_epochs, new_epochs = [], [], []
            for run_dir in sorted((new_root / task / variant).glob("seed-*")):
                new_file, old_dir = run_dir / "test_results.json", old_root / task / variant / run_dir.name
                if not new_file.is_file():
                    continue
                new = json.loads(new_file.read_text())["test_fbeta"]
                if (old_dir / "test_results.json").is_file():
                    diffs.append(new - json.loads((old_dir / "test_results.json").read_text())["test_fbeta"])
                    old_epochs.append(json.loads((old_dir / "trainer_state.json").read_text())["epoch"])
                    new_epochs.append(json.loads((run_dir / "trainer_state.json").read_text())["epoch"])
                else:
                    diffs.append(0.0)
            if len(diffs) < 2:
                continue
            mean, se = statistics.mean(diffs), statistics.stdev(diffs) / len(diffs) ** 0.5
            wtl = f"{sum(d > 0 for d in diffs)}/{sum(d == 0 for d in diffs)}/{sum(d < 0 for d in diffs)}"
            epochs = f"{statistics.median(old_epochs):g} → {statistics.median(new_epochs):g}" if old_epochs else "-"
            lines.append(
                f"| {task} | {variant} | {len(old_epochs)} of {len(diffs)} "
                f"| {mean:+.4f} ± {se:.4f} · {wtl} | {epochs} |"
            )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folders", nargs="+", type=Path, help="east-compare output folders (runs/evidence/<task>)")
    parser.add_argument("--apply", type=Path, default=None, help="migrate: move the runs whose decisions change here")
    parser.add_argument("--paired", type=Path, default=None, help="after retraining: compare with the moved runs")
    args = parser.parse_args()
    if args.paired is not None:
        print("\n".join(paired_with_old(args.paired, args.folders[0])))
        return
    print("| folder | variant | runs | validation size | threshold | runs whose decisions change |")
    print("|---|---|---|---|---|---|")
    for folder in args.folders:
        for variant in sorted(p for p in folder.iterdir() if p.is_dir()):
            runs, changed, size, threshold = 0, [], 0, 0.0
            for run_dir in sorted(variant.glob("seed-*")):
                settings_file = run_dir / "run_settings.json"
                if not settings_file.is_file() or "east_anneal_threshold" in settings_file.read_text():
                    continue  # set by the variant itself: the default does not touch it
                result = replay(run_dir)
                if result is None or result["trained_with"] != 0.0:
                    continue  # unfinished, or trained with 2 / n already
                runs += 1
                size, threshold = result["size"], result["threshold"]
                if result["changed"]:
                    changed.append(run_dir.name)
                    if args.apply is not None:
                        target = args.apply / folder.name / variant.name / run_dir.name
                        target.parent.mkdir(parents=True, exist_ok=True)
                        shutil.move(str(run_dir), str(target))
            if runs:
                print(
                    f"| {folder.name} | {variant.name} | {runs} | {size} | {threshold:.4f} | {len(changed)}"
                    f"{' (' + ', '.join(changed) + ')' if changed else ''} |"
                )


if __name__ == "__main__":
    main()
