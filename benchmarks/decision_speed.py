"""Wall time of ``tune_logit_offsets`` on a validation set of N x C logits, against the tuner it replaced.

The data: labels from a Zipf-like prior (p_k ~ 1 / k^0.8), logits ``1.5 randn + 3 onehot(label) + log p``, so plain
argmax favours the frequent classes and the tuned offsets have something to correct. One timed call per row after
one warm-up call on the smallest size; the table gives seconds, rounds, and the metric before and after tuning,
``bound``: whether the tuner stopped at its work bound, and ``RSS GB``: the process's peak resident memory so far
(data included; list the sizes in increasing order).

``--file DIR`` also tunes from a ``LogitsFile`` of the same logits written under DIR (the decision-rule tuner's path
in ``EASTTrainer.tune_decision_rule``): ``file s`` its seconds (the transposition of the file included), ``same``
whether its offsets, scores and rounds equal the in-memory tuner's bit for bit.

``--reference`` also times the previous tuner (``east_hf/core/decision/rule.py`` at commit ``--reference-commit``, read
with ``git show``), which scores (K, 2C) states per candidate batch, O(N C^2) a round. A reference run stops after
``--reference-budget`` seconds; its row then gives the coordinates it finished and the seconds a round would take at
that pace. On a shared machine ``--threads 1`` gives steadier numbers: two threads on a busy core wait for each other.

Usage::

    python benchmarks/decision_speed.py --threads 1 --reference
    python benchmarks/decision_speed.py --threads 1 --reference --sizes 50000x10 50000x100 50000x1000 50000x10000
    python benchmarks/decision_speed.py --threads 1 --sizes 50000x10000 --metrics fbeta --max-work 2e9
    python benchmarks/decision_speed.py --threads 1 --sizes 50000x1000 50000x10000 --file /tmp
    python benchmarks/decision_speed.py --device cuda --sizes 50000x2 50000x100 200000x1000
"""

from __future__ import annotations

import argparse
import importlib.util
import logging
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from east_hf.core.decision import rule as decision
from east_hf.core.decision.rule import LogitsFile, tune_logit_offsets

REFERENCE_COMMIT = "1a31261"  # the last commit with the batched-state tuner


def make_inputs(n: int, c: int, device: str, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    prior = 1.0 / torch.arange(1, c + 1) ** 0.8
    prior = prior / prior.sum()
    labels = torch.multinomial(prior, n, replacement=True, generator=gen)
    logits = torch.randn(n, c, generator=gen).mul_(1.5)  # in place: one (N, C) tensor, no int64 one-hot
    logits[torch.arange(n), labels] += 3.0
    return logits.add_(prior.log()).to(device), labels.to(device)


def load_reference(commit: str):
    """The module ``east_hf.core.decision.rule`` as it was at ``commit``, imported under another name."""
    root = Path(__file__).resolve().parents[1]
    source = subprocess.run(
        ["git", "show", f"{commit}:east_hf/core/decision/rule.py"],
        cwd=root,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    path = Path(tempfile.mkdtemp()) / "decision_reference.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("decision_reference", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


class _OutOfTime(Exception):
    pass


def time_reference(module, logits, labels, metric, max_rounds: int, budget: float) -> tuple[float, str]:
    """(seconds, note) of the reference tuner; past ``budget`` seconds it stops, and the note gives its pace."""
    best_offset, done = module._best_offset, [0]
    start = time.perf_counter()

    def timed(*args, **kwargs):
        if time.perf_counter() - start > budget:
            raise _OutOfTime
        done[0] += 1
        return best_offset(*args, **kwargs)

    module._best_offset = timed
    try:
        rule = module.tune_logit_offsets(logits, labels, metric, max_rounds=max_rounds)
        return time.perf_counter() - start, f"{rule.rounds:>6} {rule.score:>8.4f}"
    except _OutOfTime:
        seconds = time.perf_counter() - start
        per_round = seconds / max(done[0], 1) * logits.shape[1]
        return seconds, f"stopped after {done[0]} classes: {per_round:.0f} s a round"
    finally:
        module._best_offset = best_offset


def time_file(folder: Path, logits, labels, metric, max_rounds: int, expected) -> str:
    """Seconds of the tuner on a ``LogitsFile`` of ``logits`` (written in batches of 1,000 rows, not timed; its
    transposition timed), and whether its rule equals ``expected`` bit for bit."""
    with LogitsFile.temporary(dir=folder) as stored:
        for part in logits.cpu().split(1000):
            stored.append(part)
        start = time.perf_counter()
        rule = tune_logit_offsets(stored, labels.cpu(), metric, max_rounds=max_rounds)
        seconds = time.perf_counter() - start
    same = torch.equal(rule.offsets, expected.offsets.cpu()) and (rule.score, rule.baseline_score, rule.rounds) == (
        expected.score,
        expected.baseline_score,
        expected.rounds,
    )
    return f"{seconds:>8.2f} {'yes' if same else 'NO':>4}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", default=["50000x2", "50000x100"], help="N x C pairs")
    parser.add_argument("--metrics", nargs="+", default=["fbeta", "mcc"])
    parser.add_argument("--max-rounds", type=int, default=10)
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--max-work", type=float, default=None, help="the tuner's work bound (default: its own)")
    parser.add_argument("--file", type=Path, default=None, help="also tune from a LogitsFile under this folder")
    parser.add_argument("--reference", action="store_true", help="also time the previous tuner")
    parser.add_argument("--reference-commit", default=REFERENCE_COMMIT)
    parser.add_argument("--reference-budget", type=float, default=150.0, help="seconds per reference run, at most")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    sizes = [tuple(int(v) for v in s.split("x")) for s in args.sizes]
    if args.max_work is not None:  # to show the stop at the bound on a size that fits it by default
        decision._MAX_WORK = int(args.max_work)
    reference = load_reference(args.reference_commit) if args.reference else None
    tune_logit_offsets(*make_inputs(1000, 10, args.device))  # warm-up
    print(f"device={args.device} threads={torch.get_num_threads()} torch={torch.__version__}")
    stops = []  # the tuner's one-line work-bound messages
    handler = logging.Handler()
    handler.emit = lambda record: stops.append(record.getMessage()) if "work bound" in record.getMessage() else None
    logging.getLogger("east_hf.core.decision.rule").addHandler(handler)
    header = f"{'N':>8} {'C':>5} {'metric':>7} {'seconds':>8} {'rounds':>6} {'argmax':>8} {'tuned':>8}"
    header += f" {'bound':>5} {'RSS GB':>6}"
    header += f" | {'file s':>8} {'same':>4}" if args.file else ""
    print(header + (f" | {'ref s':>8} {'rounds':>6} {'tuned':>8}" if reference else ""), flush=True)
    for n, c in sizes:
        logits, labels = make_inputs(n, c, args.device)
        for metric in args.metrics:
            start, stopped = time.perf_counter(), len(stops)
            rule = tune_logit_offsets(logits, labels, metric, max_rounds=args.max_rounds)
            if args.device.startswith("cuda"):
                torch.cuda.synchronize()
            seconds = time.perf_counter() - start
            row = f"{n:>8} {c:>5} {metric:>7} {seconds:>8.2f} {rule.rounds:>6} {rule.baseline_score:>8.4f} "
            rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux
            row += f"{rule.score:>8.4f} {'yes' if len(stops) > stopped else 'no':>5} {rss:>6.1f}"
            if args.file:
                row += " | " + time_file(args.file, logits, labels, metric, args.max_rounds, rule)
            if reference:
                ref_seconds, note = time_reference(
                    reference, logits, labels, metric, args.max_rounds, args.reference_budget
                )
                row += f" | {ref_seconds:>8.2f} {note}"
            print(row, flush=True)
            if len(stops) > stopped:
                print(f"    {stops[-1]}", flush=True)
        del logits, labels


if __name__ == "__main__":
    main()
