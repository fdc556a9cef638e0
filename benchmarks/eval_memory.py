"""Peak memory of ``EASTTrainer.evaluate`` at many classes: the full gather of every logit against per-batch counts.

Each configuration runs in its own process (``--child``), so one peak cannot hide another. The child builds a linear
model (d -> C), an evaluation set of N rows computed on demand (its memory does not grow with N) and an EASTTrainer
with east_hf's ``compute_metrics``, evaluates 512 rows once to warm up, then resets the kernel's peak-RSS mark
(``/proc/self/clear_refs``), evaluates the N rows and reads the peak (``VmHWM``). The number reported is that peak
minus the resident memory just before the evaluation (the model, the data, torch): what evaluation adds.

"old" is the code at ``--old-tree`` (by default a ``git worktree`` of HEAD at /tmp/old_eval, made if missing):
there the Trainer gathers every logit and ``compute_metrics`` scores a (C, C) confusion matrix. "new" is this
checkout: each batch adds its (3, C) hard-metric counts and its loss statistics, and nothing is gathered.

    python benchmarks/eval_memory.py --classes 10000 --sizes 10000 50000 100000 [--loss east] [--max-old N] \\
        [--markdown FILE]

The old path at N = 100,000 needs about 11 GB and 8 minutes on one CPU thread (its gathered logits are concatenated
batch by batch); ``--max-old`` skips it above a size. Results: benchmarks/results/eval_memory_cpu.md.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCORED = ("eval_loss", "eval_accuracy", "eval_fbeta", "eval_mcc", "eval_precision", "eval_recall")


def _status_kib(key: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{key}:"):
            return int(line.split()[1])
    raise RuntimeError(f"Expected {key} in /proc/self/status, got none")


def child(args: argparse.Namespace) -> None:
    """One evaluation, measured; prints one JSON line."""
    import gc

    import torch
    from torch import nn

    from east_hf import EASTConfig, EASTTrainer
    from east_hf.hf.metrics import build_compute_metrics

    torch.set_num_threads(args.threads)
    C, d = args.classes, 32

    step = max(1, C // 1024)

    class Rows(torch.utils.data.Dataset):
        """N rows from a fixed table of 1024 feature vectors. Every third block of 1024 rows is labelled with the class
        the model predicts for its vector (``step * k`` for vector k), the others with classes spread over all C."""

        def __init__(self, n: int, seed: int = 0):
            self.n = n
            self.x = torch.randn(1024, d, generator=torch.Generator().manual_seed(0))
            self.seed = seed

        def __len__(self):
            return self.n

        def __getitem__(self, i):
            k = i % 1024
            label = step * k if (i // 1024) % 3 == 0 else (i * 7919 + self.seed) % C
            return {"input_values": self.x[k], "labels": torch.tensor(label)}

    class Linear(nn.Module):
        """Class ``step * k`` aligned with feature vector k: accuracy about a third, every metric non-trivial."""

        def __init__(self):
            super().__init__()
            self.linear = nn.Linear(d, C)
            with torch.no_grad():
                self.linear.weight[::step][:1024] = Rows(0).x[: len(self.linear.weight[::step])]

        def forward(self, input_values):
            return self.linear(input_values)

    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as out:
        config = EASTConfig(
            output_dir=out,
            use_cpu=True,
            report_to=[],
            east_loss=args.loss,
            east_annealing=False,
            per_device_eval_batch_size=args.batch,
            disable_tqdm=True,
            dataloader_num_workers=0,
        )
        trainer = EASTTrainer(
            model=Linear(),
            args=config,
            train_dataset=Rows(1024, seed=1),
            eval_dataset=Rows(args.n),
            compute_metrics=build_compute_metrics(C),
        )
        trainer.evaluate(Rows(512, seed=2))  # warm-up: thread pools, lazy allocations
        gc.collect()
        before = _status_kib("VmRSS")
        Path("/proc/self/clear_refs").write_text("5")  # the peak-RSS mark starts again from here
        start = time.perf_counter()
        metrics = trainer.evaluate()
        seconds = time.perf_counter() - start
        peak = _status_kib("VmHWM")
    result = {
        "n": args.n,
        "before_mib": before / 1024,
        "added_mib": (peak - before) / 1024,
        "seconds": seconds,
        "metrics": {key: metrics[key] for key in SCORED if key in metrics},
    }
    print(json.dumps(result), flush=True)


def run(tree: Path, n: int, args: argparse.Namespace) -> dict:
    command = [sys.executable, str(Path(__file__).resolve()), "--child", "--n", str(n), "--classes", str(args.classes)]
    command += ["--batch", str(args.batch), "--loss", args.loss, "--threads", str(args.threads)]
    env = {**os.environ, "PYTHONPATH": str(tree), "OMP_NUM_THREADS": str(args.threads)}
    env.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", HF_EVALUATE_OFFLINE="1")
    proc = subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"Expected the {tree} evaluation of {n} rows to finish, got: {proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def old_tree(path: Path) -> Path:
    if not (path / "east_hf").is_dir():
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(path), "HEAD"], check=True)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--classes", type=int, default=10_000)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 50_000, 100_000])
    parser.add_argument("--batch", type=int, default=1000, help="per_device_eval_batch_size")
    parser.add_argument("--loss", default="ce", help="east_loss; 'east' adds its (C, C) soft confusion matrix")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--old-tree", type=Path, default=Path("/tmp/old_eval"))
    parser.add_argument("--max-old", type=int, default=None, help="skip the old path above this many rows")
    parser.add_argument("--markdown", type=Path, default=None)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--n", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.classes < 1024:  # the synthetic rows label 1024 feature vectors with classes 0, step, 2 step, ...
        parser.error(f"Expected --classes >= 1024, got {args.classes}")
    if args.child:
        return child(args)
    old = old_tree(args.old_tree)
    head = subprocess.run(["git", "-C", str(old), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    rows = []
    for n in args.sizes:
        new_result = run(ROOT, n, args)
        old_result = None if args.max_old is not None and n > args.max_old else run(old, n, args)
        same = None if old_result is None else old_result["metrics"] == new_result["metrics"]
        rows.append((n, old_result, new_result, same))
        print(json.dumps({"n": n, "old": old_result, "new": new_result, "same_metrics": same}), flush=True)

    def cell(result, key, fmt):
        return "not run" if result is None else format(result[key], fmt)

    lines = [
        "| N | old: added MiB | new: added MiB | old: s | new: s | same metrics |",
        "|---:|---:|---:|---:|---:|:---:|",
    ]
    for n, o, w, same in rows:
        lines.append(
            f"| {n:,} | {cell(o, 'added_mib', ',.0f')} | {cell(w, 'added_mib', ',.0f')} | {cell(o, 'seconds', '.1f')} "
            f"| {cell(w, 'seconds', '.1f')} | {'-' if same is None else 'yes' if same else 'NO'} |"
        )
    table = "\n".join(lines)
    print(table)
    if args.markdown is not None:
        command = " ".join(["python benchmarks/eval_memory.py", *sys.argv[1:]])
        args.markdown.write_text(
            f"# Evaluation memory on CPU: C = {args.classes:,}, east_loss={args.loss}\n\n"
            f"`{command}`\n\n"
            f"Peak resident memory that `EASTTrainer.evaluate` adds (peak during the evaluation minus the resident "
            f"memory just before it), one process per cell, {args.threads} thread(s), batches of {args.batch}. "
            f"old: the code at {head.stdout.strip()} (every logit gathered, a (C, C) confusion matrix); new: this "
            f'checkout ((3, C) counts per batch, nothing gathered). "same metrics": eval_loss, accuracy, fbeta, '
            f"mcc, precision and recall equal exactly.\n\n{table}\n"
        )


if __name__ == "__main__":
    main()
