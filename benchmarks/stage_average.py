"""The kept model against an average of the checkpoints around it, in its own temperature stage, on binary tables.

A probe of "averaging the last checkpoints of a stage" as a steadier selection than the single best evaluation. It
reads finished east-compare runs trained with every checkpoint kept (``--save_total_limit 1000``), finds the
checkpoint the run kept (``best_model_checkpoint``) and its temperature stage (``east_stage`` in the log), averages
the weights of a window of that stage's checkpoints (uniform, floating-point tensors), and scores the kept and the
averaged weights on the run's own validation and test splits (rebuilt from ``run_settings.json``): the F1 of the
positive class at the argmax decision, the default's untuned rule. The kept model's recomputed test score is checked
against the run's ``test_results.json``. Windows, each within the kept checkpoint's stage:

- ``prevK``: the kept checkpoint and the K - 1 before it;
- ``aroundK``: the kept checkpoint and (K - 1) / 2 on each side (the evaluations after the best,
  up to the stage's end);
- ``stage``: every checkpoint of the stage.

The averaging is post hoc: it changes the final model only, not the starting point of later stages.

Usage::

    python benchmarks/stage_average.py runs/evidence/stageavg_caravan/keepall \\
        --windows prev3,around3,stage --seeds 0-9 [--markdown FILE]
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import torch
from paired import against_reference, emit_table, seed_range  # benchmarks/paired.py, beside this script
from safetensors.torch import load_file


def stage_steps(state: dict) -> tuple[int, list[int]]:
    """(the kept checkpoint's step, the steps of its stage's checkpoints, in order) from trainer_state.json."""
    kept = int(Path(state["best_model_checkpoint"]).name.split("-")[1])
    stage_of = {}
    for entry in state["log_history"]:
        if "east_stage" in entry and any(k.startswith("eval_") for k in entry):
            stage_of.setdefault(entry["step"], entry["east_stage"])
    stage = stage_of[kept]
    return kept, sorted(step for step, s in stage_of.items() if s == stage)


def window(kept: int, steps: list[int], name: str) -> list[int]:
    i = steps.index(kept)
    if name == "stage":
        return steps
    if name.startswith("prev"):
        k = int(name[4:])
        return steps[max(0, i - k + 1) : i + 1]
    if name.startswith("around"):
        half = (int(name[6:]) - 1) // 2
        return steps[max(0, i - half) : i + half + 1]
    raise ValueError(f"Expected a window prevK, aroundK or stage, got {name!r}")


def average(run: Path, steps: list[int]) -> dict[str, torch.Tensor]:
    states = [load_file(run / f"checkpoint-{step}" / "model.safetensors") for step in steps]
    return {
        key: torch.stack([s[key].float() for s in states]).mean(0).to(value.dtype)
        if value.is_floating_point()
        else value
        for key, value in states[0].items()
    }


@torch.no_grad()
def positive_f1(model, dataset) -> float:
    columns = dataset.with_format("torch")[:]
    features, labels = columns["input_features"].float(), columns["labels"]
    predicted = model(input_features=features).logits.argmax(-1)
    tp = int(((predicted == 1) & (labels == 1)).sum())
    fp = int(((predicted == 1) & (labels == 0)).sum())
    fn = int(((predicted == 0) & (labels == 1)).sum())
    return 2 * tp / (2 * tp + fp + fn) if tp else 0.0


def score_run(run: Path, windows: list[str]) -> dict[str, dict[str, float]]:
    from east_hf.hf.data import load_data
    from east_hf.hf.data.arguments import DataArguments
    from east_hf.hf.models import load_pretrained

    settings = json.loads((run / "run_settings.json").read_text())
    data = load_data(DataArguments(**settings["data"]))
    state = json.loads((run / "trainer_state.json").read_text())
    kept, steps = stage_steps(state)
    model = load_pretrained(str(run / f"checkpoint-{kept}")).eval()
    out = {"kept": {"val": positive_f1(model, data.validation), "test": positive_f1(model, data.test), "n": 1}}
    recorded = json.loads((run / "test_results.json").read_text())["test_fbeta"]
    if abs(out["kept"]["test"] - recorded) > 1e-6:
        raise ValueError(
            f"{run}: the kept checkpoint scores {out['kept']['test']:.6f} on test, the run {recorded:.6f}"
        )
    for name in windows:
        chosen = window(kept, steps, name)
        model.load_state_dict(average(run, chosen))
        out[name] = {
            "val": positive_f1(model, data.validation),
            "test": positive_f1(model, data.test),
            "n": len(chosen),
        }
    return out


def table(folder: Path, windows: list[str], seeds: list[int]) -> str:
    scores = {}
    for seed in seeds:
        run = folder / f"seed-{seed}"
        if (run / "test_results.json").is_file():
            scores[seed] = score_run(run, windows)
    if len(scores) < 2:
        raise ValueError(f"Expected finished runs for at least two of seeds {seeds} in {folder}, got {len(scores)}")
    rows = against_reference(
        {seed: {k: v["test"] for k, v in s.items()} for seed, s in scores.items()}, "kept", windows
    )
    lines = [
        f"{folder} (seeds {', '.join(map(str, scores))}): test F1 of the positive class, paired by seed",
        "",
        "| weights | checkpoints averaged (mean) | test F1 mean ± std | − kept, mean ± s.e. · wins/ties/losses |",
        "|---|---|---|---|",
    ]
    for name, (spread, diff) in rows.items():
        n = statistics.fmean(s[name]["n"] for s in scores.values())
        lines.append(f"| {name} | {n:.1f} | {spread} | {diff} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folders", nargs="+", type=Path, help="east-compare variant folders holding seed-<n> runs")
    parser.add_argument("--windows", default="prev3,around3,stage", help="comma-separated: prevK, aroundK, stage")
    parser.add_argument("--seeds", default="0-9", help="a range of seeds, FIRST-LAST")
    parser.add_argument("--markdown", type=Path, help="also write the tables to this file")
    args = parser.parse_args()
    windows = [w for w in args.windows.split(",") if w]
    seeds = sorted(seed_range(args.seeds))
    emit_table([table(folder, windows, seeds) for folder in args.folders], args.markdown)


if __name__ == "__main__":
    main()
