"""The checkpoint kept by the validation F1 against one kept by a smoother validation score, on binary tables.

A probe of selection by the soft surrogate: the validation F1 of the positive class jumps between evaluations where a
few of the tens of validation positives cross the decision boundary; EAST's soft confusion matrix at a temperature T
(``soft_confusion_matrix``) gives each row a share of a prediction and moves smoothly with the logits. This script
reads finished east-compare runs trained with every checkpoint kept (``--save_total_limit 1000``), scores every
evaluated checkpoint on the run's own validation split (rebuilt from ``run_settings.json``) and keeps, per rule, the
checkpoint with the best validation score (the first of equals, as the Trainer does); the kept checkpoints are scored
by the test F1 of the positive class at the argmax decision and paired by seed with the run's own (``hard``). Rules:

- ``hard``: the validation F1, as the run kept (checked against ``best_model_checkpoint`` and ``test_results.json``);
- ``softT``: the soft F1 of the positive class at temperature T (e.g. ``soft0.05``);
- ``hard+softT``: the validation F1, equals broken by the soft F1 at T;
- ``loss``: the lowest validation cross-entropy.

Selection is post hoc over the run's checkpoints: the training (the annealing's stage restores, judged by the
validation F1) is the run's own.

Usage::

    python benchmarks/soft_selection.py runs/evidence/stageavg_caravan/keepall \\
        --rules soft0.05,soft0.1,hard+soft0.1,loss --seeds 0-9 [--markdown FILE]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
from paired import against_reference, emit_table, seed_range  # benchmarks/paired.py, beside this script

from east_hf.core.surrogate import soft_confusion_matrix


def f1_of_positive(confusion: torch.Tensor) -> float:
    tp, fn, fp = confusion[1, 1], confusion[1, 0], confusion[0, 1]
    den = 2 * tp + fp + fn
    return float(2 * tp / den) if den > 0 else 0.0


@torch.no_grad()
def checkpoint_scores(model, validation, test, temperatures: list[float]) -> dict[str, float]:
    scores = {}
    for name, dataset in (("val", validation), ("test", test)):
        columns = dataset.with_format("torch")[:]
        logits = model(input_features=columns["input_features"].float()).logits.double()
        labels = columns["labels"]
        hard = torch.zeros(2, 2, dtype=torch.float64).index_put_(
            (labels, logits.argmax(-1)), torch.ones(len(labels), dtype=torch.float64), accumulate=True
        )
        scores[f"{name}_hard"] = f1_of_positive(hard)
        if name == "val":
            scores["val_loss"] = float(torch.nn.functional.cross_entropy(logits, labels))
            probs = logits.softmax(-1)
            for t in temperatures:
                scores[f"val_soft{t:g}"] = f1_of_positive(soft_confusion_matrix(probs, labels, t))
    return scores


def select(rows: dict[int, dict[str, float]], rule: str) -> int:
    """The step a rule keeps: the best validation score, the first of equals."""
    steps = sorted(rows)
    if rule == "hard":
        key = [(rows[s]["val_hard"],) for s in steps]
    elif rule == "loss":
        key = [(-rows[s]["val_loss"],) for s in steps]
    elif rule.startswith("hard+soft"):
        key = [(rows[s]["val_hard"], rows[s][f"val_soft{rule[9:]}"]) for s in steps]
    elif rule.startswith("soft"):
        key = [(rows[s][f"val_{rule}"],) for s in steps]
    else:
        raise ValueError(f"Expected a rule hard, softT, hard+softT or loss, got {rule!r}")
    best = max(key)
    return steps[key.index(best)]


def score_run(run: Path, rules: list[str], temperatures: list[float]) -> dict[str, float]:
    from east_hf.hf.data import load_data
    from east_hf.hf.data.arguments import DataArguments
    from east_hf.hf.models import load_pretrained

    settings = json.loads((run / "run_settings.json").read_text())
    data = load_data(DataArguments(**settings["data"]))
    state = json.loads((run / "trainer_state.json").read_text())
    steps = sorted(
        {e["step"] for e in state["log_history"] if "eval_fbeta" in e and (run / f"checkpoint-{e['step']}").is_dir()}
    )
    rows = {}
    for step in steps:
        model = load_pretrained(str(run / f"checkpoint-{step}")).eval()
        rows[step] = checkpoint_scores(model, data.validation, data.test, temperatures)
    kept = int(Path(state["best_model_checkpoint"]).name.split("-")[1])
    if select(rows, "hard") != kept:
        raise ValueError(f"{run}: the best validation F1 is at step {select(rows, 'hard')}, the run kept {kept}")
    recorded = json.loads((run / "test_results.json").read_text())["test_fbeta"]
    if abs(rows[kept]["test_hard"] - recorded) > 1e-6:
        raise ValueError(
            f"{run}: the kept checkpoint scores {rows[kept]['test_hard']:.6f} on test, the run {recorded:.6f}"
        )
    return {rule: rows[select(rows, rule)]["test_hard"] for rule in ["hard", *rules]}


def table(folder: Path, rules: list[str], seeds: list[int]) -> str:
    temperatures = sorted({float(r.rpartition("soft")[2]) for r in rules if "soft" in r})
    scores = {s: score_run(folder / f"seed-{s}", rules, temperatures) for s in seeds
              if (folder / f"seed-{s}" / "test_results.json").is_file()}  # fmt: skip
    if len(scores) < 2:
        raise ValueError(f"Expected finished runs for at least two of seeds {seeds} in {folder}, got {len(scores)}")
    lines = [
        f"{folder} (seeds {', '.join(map(str, scores))}): test F1 of the positive class, paired by seed",
        "",
        "| selected by | test F1 mean ± std | − hard, mean ± s.e. · wins/ties/losses |",
        "|---|---|---|",
    ]
    for rule, (spread, diff) in against_reference(scores, "hard", rules).items():
        shown = "hard (the run's)" if rule == "hard" else rule
        lines.append(f"| {shown} | {spread} | {diff} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folders", nargs="+", type=Path, help="east-compare variant folders holding seed-<n> runs")
    parser.add_argument("--rules", default="soft0.05,soft0.1,hard+soft0.1,loss", help="comma-separated rules")
    parser.add_argument("--seeds", default="0-9", help="a range of seeds, FIRST-LAST")
    parser.add_argument("--markdown", type=Path, help="also write the tables to this file")
    args = parser.parse_args()
    rules = [r for r in args.rules.split(",") if r]
    seeds = sorted(seed_range(args.seeds))
    emit_table([table(folder, rules, seeds) for folder in args.folders], args.markdown)


if __name__ == "__main__":
    main()
