"""Wall time of ``tune_logit_offsets`` on a validation set of N x C logits.

The data: labels from a Zipf-like prior (p_k ~ 1 / k^0.8), logits ``1.5 randn + 3 onehot(label) + log p``, so plain
argmax favours the frequent classes and the tuned offsets have something to correct. One timed call per row after
one warm-up call on the smallest size; the table gives seconds, rounds, and the metric before and after tuning.
On a shared machine ``--threads 1`` gives steadier numbers: two threads on a busy core wait for each other.

Usage::

    python benchmarks/decision_speed.py --threads 1
    python benchmarks/decision_speed.py --device cuda --sizes 50000x2 50000x100 200000x1000
"""

from __future__ import annotations

import argparse
import time

import torch

from east_hf.core.decision import tune_logit_offsets


def make_inputs(n: int, c: int, device: str, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    prior = 1.0 / torch.arange(1, c + 1) ** 0.8
    prior = prior / prior.sum()
    labels = torch.multinomial(prior, n, replacement=True, generator=gen)
    logits = torch.randn(n, c, generator=gen) * 1.5 + 3.0 * torch.nn.functional.one_hot(labels, c) + prior.log()
    return logits.to(device), labels.to(device)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", default=["50000x2", "50000x100"], help="N x C pairs")
    parser.add_argument("--metrics", nargs="+", default=["fbeta", "mcc"])
    parser.add_argument("--max-rounds", type=int, default=10)
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's)")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    sizes = [tuple(int(v) for v in s.split("x")) for s in args.sizes]
    tune_logit_offsets(*make_inputs(1000, 10, args.device))  # warm-up
    print(f"device={args.device} threads={torch.get_num_threads()} torch={torch.__version__}")
    print(f"{'N':>8} {'C':>5} {'metric':>7} {'seconds':>8} {'rounds':>6} {'argmax':>8} {'tuned':>8}")
    for n, c in sizes:
        logits, labels = make_inputs(n, c, args.device)
        for metric in args.metrics:
            start = time.perf_counter()
            rule = tune_logit_offsets(logits, labels, metric, max_rounds=args.max_rounds)
            if args.device.startswith("cuda"):
                torch.cuda.synchronize()
            seconds = time.perf_counter() - start
            print(
                f"{n:>8} {c:>5} {metric:>7} {seconds:>8.2f} {rule.rounds:>6} "
                f"{rule.baseline_score:>8.4f} {rule.score:>8.4f}"
            )


if __name__ == "__main__":
    main()
