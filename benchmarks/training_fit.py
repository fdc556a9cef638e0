"""How well the selected models of an ``east-compare`` run fit their training split (dead positives).

For every ``DIR/<variant>/seed-<s>`` with a saved model, reload the model (the best checkpoint east-train saved),
rebuild the data splits from the recipe exactly as east-train did, and count, per split, the recall of one class
and how many of its samples the model gives a probability below ``--dead`` ("dead" samples: the softmax gradient
``p (1 - p)`` leaves a probability surrogate almost nothing to pull them back with). Tabular recipes only.

Usage::

    python benchmarks/training_fit.py benchmarks/recipes/digits9_binary.yaml runs/evidence/digits9_binary \\
        --variants east,ce,cold_start --markdown runs/evidence/tables/digits9_binary_ablations/training_fit.md
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

import numpy as np
import torch


def class_fit(model, ds, label: int, dead: float) -> tuple[float, int, int]:
    """(recall of ``label``, samples of ``label`` with p(label) < dead, samples of ``label``) on a tabular split."""
    rows = ds.with_format(None)
    x = torch.tensor(np.asarray(rows["input_features"]), dtype=torch.float32)
    y = np.asarray(rows["labels"])
    with torch.no_grad():
        probs = model(input_features=x).logits.float().softmax(-1).numpy()
    mine = y == label
    recall = float((probs[mine].argmax(1) == label).mean())
    return recall, int((probs[mine, label] < dead).sum()), int(mine.sum())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("recipe")
    parser.add_argument("runs", help="an east-compare output directory")
    parser.add_argument("--variants", default="east,ce", help="comma-separated variant names")
    parser.add_argument("--label", type=int, default=1, help="class index to report (default 1, the positive class)")
    parser.add_argument("--dead", type=float, default=1e-3, help="probability below which a sample counts as dead")
    parser.add_argument("--markdown", help="also write the table here")
    args = parser.parse_args()

    from transformers import AutoModelForSequenceClassification

    from east_hf.hf.data import load_data
    from east_hf.scripts.arguments import EASTArgumentParser

    data = load_data(EASTArgumentParser().parse([args.recipe, "--output_dir", args.runs]).data)
    if data.modality != "tabular":
        raise SystemExit(f"Expected a tabular recipe, got a {data.modality} data set from {args.recipe}")
    lines = [
        f"# Training fit of the selected models: class {data.label_names[args.label]!r}",
        "",
        f"Command: `python benchmarks/training_fit.py {args.recipe} {args.runs} --variants {args.variants}"
        f" --label {args.label} --dead {args.dead}`",
        "",
        f"Mean over seeds (min-max); dead = samples of the class with p < {args.dead} (of {{n}} in the split).",
        "",
        "| variant | seeds | train recall | train dead | validation recall | test recall | test dead |",
        "|---|---|---|---|---|---|---|",
    ]
    sizes = {}
    for variant in args.variants.split(","):
        fits: dict[str, list[tuple[float, int, int]]] = {"train": [], "validation": [], "test": []}
        seeds = sorted(Path(args.runs, variant).glob("seed-*/model.safetensors"))
        for weights in seeds:
            model = AutoModelForSequenceClassification.from_pretrained(weights.parent).eval()
            for split in fits:
                fits[split].append(class_fit(model, getattr(data, split), args.label, args.dead))
        if not seeds:
            raise SystemExit(f"Expected saved models under {args.runs}/{variant}/seed-*, found none")

        def cell(split: str, k: int, fits=fits) -> str:
            values = [f[k] for f in fits[split]]
            fmt = "{:.3f}" if k == 0 else "{:.1f}"
            return f"{fmt.format(statistics.mean(values))} ({fmt.format(min(values))}-{fmt.format(max(values))})"

        sizes = {split: fits[split][0][2] for split in fits}
        lines.append(
            f"| {variant} | {len(seeds)} | {cell('train', 0)} | {cell('train', 1)} | {cell('validation', 0)} "
            f"| {cell('test', 0)} | {cell('test', 1)} |"
        )
    lines[4] = lines[4].format(n=", ".join(f"{n} {split}" for split, n in sizes.items()))
    table = "\n".join(lines) + "\n"
    print(table)
    if args.markdown:
        Path(args.markdown).parent.mkdir(parents=True, exist_ok=True)
        Path(args.markdown).write_text(table)


if __name__ == "__main__":
    main()
