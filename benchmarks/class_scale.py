"""EAST against cross-entropy as the number of classes grows: one step of a linear head, batch 512.

One step is forward + backward of a linear head (``nn.Linear(d, C)`` on fixed (512, d) features, d = 512 by default)
and of the loss on its logits. Three losses, each the Trainer's path for its statistics
(``loss_from_statistics(statistics(logits, labels, validate_args=False))``, EAST's defaults: macro F1, T = 0.2):

- ``ce``: ``F.cross_entropy`` of the logits, the cheapest baseline;
- ``counts``: ``EASTLoss`` as it trains, its statistics the (3, C) counts of the soft confusion matrix (TP, support,
  predicted), O(C) memory;
- ``matrix``: ``EASTLoss`` with the (C, C) soft confusion matrix as its statistics, as a metric callable needs
  (with the fused metric loss of the matrix); O(C^2) memory, skipped where the matrix would not fit
  (``--max_matrix_classes``, default 10,000: at C = 100,000 it is 40 GB).

The head's weights are drawn so that the logits spread with a standard deviation of ``--scale`` (default 3, a trained
classifier's spread; ``--scale 0.01`` gives the near-uniform rows of a freshly initialised head). Labels are uniform.

Timing (``benchmarks/timing.py``): after a warm-up, each repeat times a block of steps of every loss back to back,
in an order that alternates between repeats; the table gives the median ms per step and the median over repeats of the
per-repeat ratio to ``ce``. Peak memory: the peak of extra bytes allocated during one step (the head's and the
logits' gradients included), from the allocator's events recorded by ``torch.profiler`` on CPU or
``torch.cuda.max_memory_allocated`` on CUDA.

Usage::

    python benchmarks/class_scale.py --threads 1 --markdown benchmarks/results/class_scale_cpu.md
    python benchmarks/class_scale.py --classes 2 10 100 --repeats 5      # a quick look at small C
"""

from __future__ import annotations

import argparse
import gc
import platform
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from timing import against, median_ms, peak_bytes, time_interleaved

from east_hf import EASTLoss

CLASSES = [2, 10, 100, 1000, 10000, 100000]


class MatrixEAST(EASTLoss):
    """``EASTLoss`` whose statistics are the (C, C) soft confusion matrix, as for a metric callable."""

    def _uses_counts(self, num_classes: int) -> bool:
        return False


def losses(classes: int, max_matrix_classes: int) -> dict:
    counts, matrix = EASTLoss(num_classes=classes), MatrixEAST(num_classes=classes)

    def trainer_path(loss):
        return lambda logits, labels: loss.loss_from_statistics(loss.statistics(logits, labels, validate_args=False))

    chosen = {"ce": F.cross_entropy, "counts": trainer_path(counts)}
    if classes <= max_matrix_classes:
        chosen["matrix"] = trainer_path(matrix)
    return chosen


def make_step(head: torch.nn.Linear, features: torch.Tensor, labels: torch.Tensor, loss_fn):
    def step():
        head.zero_grad(set_to_none=True)
        loss_fn(head(features), labels).backward()

    return step


def run(classes: int, args) -> dict:
    gen = torch.Generator().manual_seed(0)
    features = torch.randn(args.batch, args.features, generator=gen).to(args.device)
    labels = torch.randint(0, classes, (args.batch,), generator=gen).to(args.device)
    head = torch.nn.Linear(args.features, classes)
    with torch.no_grad():
        head.weight.normal_(0.0, args.scale / args.features**0.5, generator=gen)
        head.bias.zero_()
    head = head.to(args.device)
    steps = {
        name: make_step(head, features, labels, fn) for name, fn in losses(classes, args.max_matrix_classes).items()
    }
    big = classes >= 10000
    repeats = args.big_repeats if big else args.repeats
    times = time_interleaved(steps, repeats, args.device, args.target_ms, warmup=1 if big else 5)
    row = {"classes": classes, "calls": times["calls_per_block"], "repeats": repeats}
    for name in steps:
        row[f"{name}_ms"] = median_ms(times, name)
        if name != "ce":
            row[f"{name}_ratio"] = against(times, name, "ce")["ratio"]
        gc.collect()
        row[f"{name}_peak"] = peak_bytes(steps[name], args.device)
    return row


def _mb(value) -> str:
    return "—" if value is None else f"{value / 2**20:,.1f}"


def markdown(rows: list[dict], args, command: str) -> str:
    lines = [
        "# EAST against cross-entropy as the number of classes grows (CPU)",
        "",
        f"One step: forward + backward of `nn.Linear({args.features}, C)` on fixed features and of the loss on its "
        f"logits, batch {args.batch}, logits spread {args.scale:g}; EAST's defaults (macro F1, T = 0.2) on the "
        "Trainer's path. `counts`: EAST as it trains, statistics the (3, C) counts of the soft confusion matrix; "
        "`matrix`: the (C, C) matrix as statistics (what a metric callable gets). Ratios are medians over "
        "interleaved repeats of the per-repeat ratio to cross-entropy; peak is the extra memory allocated during "
        "one step. — : not run (the matrix alone would take C² × 4 bytes).",
        "",
        f"Machine: {platform.processor() or platform.machine()}, {torch.get_num_threads()} thread(s), "
        f"torch {torch.__version__}, Python {platform.python_version()}.",
        "",
        "```",
        command,
        "```",
        "",
        "| C | CE ms | counts ms | matrix ms | counts / CE | matrix / CE | CE peak MB | counts peak MB | "
        "matrix peak MB | repeats |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        matrix_ms = f"{r['matrix_ms']:.2f}" if "matrix_ms" in r else "—"
        matrix_ratio = f"{r['matrix_ratio']:.2f}" if "matrix_ratio" in r else "—"
        lines.append(
            f"| {r['classes']:,} | {r['ce_ms']:.2f} | {r['counts_ms']:.2f} | {matrix_ms} | {r['counts_ratio']:.2f} | "
            f"{matrix_ratio} | {_mb(r['ce_peak'])} | {_mb(r['counts_peak'])} | {_mb(r.get('matrix_peak'))} | "
            f"{r['repeats']} × {r['calls']} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--classes", type=int, nargs="+", default=CLASSES)
    parser.add_argument("--batch", type=int, default=512)
    parser.add_argument("--features", type=int, default=512, help="d, the head's input width")
    parser.add_argument("--scale", type=float, default=3.0, help="standard deviation of the logits")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=11)
    parser.add_argument("--big_repeats", type=int, default=5, help="repeats at C >= 10,000 (one step per block)")
    parser.add_argument("--target_ms", type=float, default=200.0, help="length of a timed block")
    parser.add_argument("--max_matrix_classes", type=int, default=10000)
    parser.add_argument("--markdown", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    rows = []
    for classes in args.classes:
        start = time.perf_counter()
        rows.append(run(classes, args))
        print({k: round(v, 3) if isinstance(v, float) else v for k, v in rows[-1].items()},
              f"({time.perf_counter() - start:.0f} s)", flush=True)  # fmt: skip
    command = "python benchmarks/" + Path(__file__).name + " " + " ".join(argv if argv is not None else sys.argv[1:])
    table = markdown(rows, args, command.strip())
    if args.markdown:
        args.markdown.write_text(table)
    print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
