"""Peak memory of ``EASTTrainer.evaluate`` (or, with ``--tune``, of ``tune_decision_rule``) at many classes.

Each configuration runs in its own process (``--child``), so one peak cannot hide another. The child builds a linear
model (d -> C), an evaluation set of N rows computed on demand (its memory does not grow with N) and an EASTTrainer
with east_hf's ``compute_metrics``, evaluates 512 rows once to warm up, then resets the kernel's peak-RSS mark
(``/proc/self/clear_refs``), evaluates the N rows (or tunes the decision rule on them) and reads the peak (``VmHWM``).
The number reported is that peak minus the resident memory just before (the model, the data, torch): what the call
adds. With ``--tune`` the row also gives the tuned rule (rounds, argmax and tuned score, a digest of the offsets) so
that two trees can be checked for the same rule.

"old" is the code at ``--old-tree`` (by default a ``git worktree`` of HEAD at /tmp/old_eval, made if missing; any
folder holding an ``east_hf`` package will do, e.g. ``git archive HEAD | tar -x -C /tmp/old_eval``), "new" this
checkout.

    python benchmarks/eval_memory.py --classes 10000 --sizes 20000 --batch 4096 [--loss east] [--max-old N] \\
        [--markdown FILE]
    python benchmarks/eval_memory.py --tune --classes 10000 --sizes 20000 40000 160000 --max-old 40000

``--max-old`` skips the old tree above a size (the old tuner gathers every logit and holds about four copies of
them: 160,000 x 10,000 would need about 25 GB). Results: docs/results/scale.md.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
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
    if args.max_work is not None:  # the tuner's work bound: a fixed number of its rounds, whatever the machine's load
        from east_hf.core.decision import rule as decision

        decision._MAX_WORK = int(args.max_work)

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
        if args.tune:
            stops = []  # the tuner's one-line message where it stops at its work bound
            handler = logging.Handler()
            handler.emit = lambda record: stops.append("work bound" in record.getMessage())
            logging.getLogger("east_hf.core.decision.rule").addHandler(handler)
            rule = trainer.tune_decision_rule()
        else:
            metrics = trainer.evaluate()
        seconds = time.perf_counter() - start
        peak = _status_kib("VmHWM")
    result = {"n": args.n, "before_mib": before / 1024, "added_mib": (peak - before) / 1024, "seconds": seconds}
    if args.tune:
        digest = hashlib.sha256(rule.offsets.numpy().tobytes()).hexdigest()[:12]
        result["metrics"] = {"rounds": rule.rounds, "bound": any(stops), "argmax": rule.baseline_score}
        result["metrics"].update(tuned=rule.score, offsets=digest)
    else:
        result["metrics"] = {key: metrics[key] for key in SCORED if key in metrics}
    print(json.dumps(result), flush=True)


def run(tree: Path, n: int, args: argparse.Namespace) -> dict:
    command = [sys.executable, str(Path(__file__).resolve()), "--child", "--n", str(n), "--classes", str(args.classes)]
    command += ["--batch", str(args.batch), "--loss", args.loss, "--threads", str(args.threads)]
    command += ["--tune"] if args.tune else []
    command += [] if args.max_work is None else ["--max-work", str(args.max_work)]
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
    parser.add_argument("--loss", default="ce", help="east_loss")
    parser.add_argument("--tune", action="store_true", help="measure tune_decision_rule instead of evaluate")
    parser.add_argument("--max-work", type=float, default=None, help="the tuner's work bound (default: its own)")
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
    compared = [n for n in args.sizes if args.max_old is None or n <= args.max_old]
    old = old_tree(args.old_tree) if compared else None  # made only where a size is compared
    old_name = "(not run)"
    if old is not None:
        head = subprocess.run(["git", "-C", str(old), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
        old_name = head.stdout.strip() if head.returncode == 0 and old != ROOT else str(old)
    rows = []
    for n in args.sizes:
        new_result = run(ROOT, n, args)
        old_result = run(old, n, args) if n in compared else None
        rows.append((n, old_result, new_result))
        print(json.dumps({"n": n, "old": old_result, "new": new_result}), flush=True)

    def cell(result, key, fmt):
        return "not run" if result is None else format(result[key], fmt)

    def same(o, w) -> str:
        """Tuning: the same rule (offsets bit for bit, scores, rounds). Evaluation: the hard metrics exactly, and
        eval_loss's relative difference (its float32 sums are taken over other chunks of rows)."""
        if o is None:
            return "-" if args.tune else "- | -"
        if args.tune:
            return "yes" if o["metrics"] == w["metrics"] else "NO"
        old, new = dict(o["metrics"]), dict(w["metrics"])
        loss_old, loss_new = old.pop("eval_loss"), new.pop("eval_loss")
        return f"{'yes' if old == new else 'NO'} | {abs(loss_new - loss_old) / abs(loss_old):.1e}"

    if args.tune:
        header = "| N | old: added MiB | new: added MiB | old: s | new: s | rounds | argmax | tuned | same rule |"
        header = header.replace("| rounds |", "| rounds | bound |")
        extra = lambda w: (  # noqa: E731
            f"{w['metrics']['rounds']} | {'yes' if w['metrics']['bound'] else 'no'} | {w['metrics']['argmax']:.4f} | "
            f"{w['metrics']['tuned']:.4f} | "
        )
    else:
        header = "| N | old: added MiB | new: added MiB | old: s | new: s | same hard metrics | eval_loss rel. diff |"
        extra = lambda w: ""  # noqa: E731
    cells = header.strip("|").split("|")
    lines = [header, "|" + "".join(":---:|" if "same" in cell or "diff" in cell else "---:|" for cell in cells)]
    for n, o, w in rows:
        lines.append(
            f"| {n:,} | {cell(o, 'added_mib', ',.0f')} | {cell(w, 'added_mib', ',.0f')} | {cell(o, 'seconds', '.1f')} "
            f"| {cell(w, 'seconds', '.1f')} | {extra(w)}{same(o, w)} |"
        )
    table = "\n".join(lines)
    print(table)
    if args.markdown is not None:
        command = " ".join(["python benchmarks/eval_memory.py", *sys.argv[1:]])
        call = "tune_decision_rule" if args.tune else "evaluate"
        args.markdown.write_text(
            f"# `EASTTrainer.{call}` memory on CPU: C = {args.classes:,}, east_loss={args.loss}\n\n"
            f"`{command}`\n\n"
            f"Peak resident memory that `EASTTrainer.{call}` adds (peak during the call minus the resident memory "
            f"just before it), one process per cell, {args.threads} thread(s), batches of {args.batch}. old: the code "
            f"at {old_name}; new: this checkout.\n\n{table}\n"
        )


if __name__ == "__main__":
    main()
