"""Speed and memory of ``EASTLoss`` against ``cross_entropy`` on the same logits.

One call is forward + backward of the loss on float32 logits (N, C) with ``requires_grad``; the logits are
``randn * scale`` (default 3, a realistic spread for a classifier head; ``--scale 0.01`` gives near-uniform rows, as
a freshly initialised head does) and the labels uniform. EAST runs with its defaults (macro F1, T = 0.2, gradient
through the threshold).

Timing (``benchmarks/timing.py``): after a warm-up, each repeat times a block of calls of EAST, of CE and of the
metric alone (forward + backward of ``EASTLoss.loss_from_confusion`` on a (C, C) leaf, the part of EAST after the
confusion matrix), back to back in an order that alternates between repeats, so all see the same machine load. The
table gives the median ms per call and the median over repeats of the per-repeat ratio EAST / CE. On a shared machine
``--threads 1`` gives steadier numbers: with two threads on a busy core, ops that open a parallel region wait for the
other thread.

Memory, two honest numbers per loss, both excluding the logits themselves:

- ``saved``: bytes the autograd graph holds between forward and backward (every tensor packed through
  ``torch.autograd.graph.saved_tensors_hooks``, counted once per storage). This is what a loss adds to the
  activation memory of a training step, on any device.
- ``peak``: the peak of extra bytes allocated during one forward + backward (the logits' gradient included).
  On CUDA, ``torch.cuda.max_memory_allocated`` above the starting point; on CPU, the running "Total Allocated"
  of the allocator's ``[memory]`` events recorded by ``torch.profiler`` with ``profile_memory=True``.

Usage::

    python benchmarks/loss_speed.py --device cpu --threads 1 --repeats 21 --json loss_speed_cpu.json
"""

from __future__ import annotations

import argparse
import json
import platform

import torch
import torch.nn.functional as F
from timing import CLOCK_HELP, CLOCKS, against, check_clock, median_ms, peak_bytes, time_interleaved

from east_hf import EASTLoss

SIZES = [(256, 10), (1024, 100), (1024, 1000)]


def make_inputs(n: int, c: int, device: str, scale: float = 3.0, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    logits = (torch.randn(n, c, generator=gen) * scale).to(device).requires_grad_()
    labels = torch.randint(0, c, (n,), generator=gen).to(device)
    return logits, labels


def make_step(loss_fn, logits: torch.Tensor, labels: torch.Tensor):
    def step():
        loss_fn(logits, labels).backward()
        logits.grad = None

    return step


def saved_bytes(loss_fn, logits: torch.Tensor, labels: torch.Tensor) -> int:
    """Bytes held for backward by the graph of one forward, each storage counted once, the logits excluded."""
    storages = {}

    def pack(t: torch.Tensor):
        storage = t.untyped_storage()
        storages[storage.data_ptr()] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = loss_fn(logits, labels)
    storages.pop(logits.untyped_storage().data_ptr(), None)
    del loss
    return sum(storages.values())


def make_metric_step(loss_fn, c: int, device: str):
    confmat = (torch.rand(c, c, device=device) * 10).requires_grad_()

    def step():
        loss_fn.loss_from_confusion(confmat).backward()
        confmat.grad = None

    return step


def run(
    device: str, repeats: int, target_ms: float, scale: float = 3.0, sizes=SIZES, clock: str = "wall"
) -> list[dict]:
    rows = []
    for n, c in sizes:
        logits, labels = make_inputs(n, c, device, scale)
        east, ce = EASTLoss(), F.cross_entropy
        steps = {
            "east": make_step(east, logits, labels),
            "ce": make_step(ce, logits, labels),
            "metric": make_metric_step(east, c, device),
        }
        times = time_interleaved(steps, repeats, device, target_ms, clock=clock)
        vs_ce = against(times, "east", "ce")
        rows.append(
            {
                "N": n,
                "C": c,
                "east_ms": median_ms(times, "east"),
                "ce_ms": median_ms(times, "ce"),
                "metric_ms": median_ms(times, "metric"),
                "ratio": vs_ce["ratio"],
                "ratio_min": vs_ce["ratio_min"],
                "ratio_max": vs_ce["ratio_max"],
                "east_saved_bytes": saved_bytes(east, logits, labels),
                "ce_saved_bytes": saved_bytes(ce, logits, labels),
                "east_peak_bytes": peak_bytes(steps["east"], device),
                "ce_peak_bytes": peak_bytes(steps["ce"], device),
                "logits_bytes": logits.nelement() * logits.element_size(),
                "repeats": repeats,
                "east_ms_all": times["east"],
                "ce_ms_all": times["ce"],
                "metric_ms_all": times["metric"],
            }
        )
    return rows


def _kib(nbytes: int) -> str:
    return f"{nbytes / 1024:,.0f}"


def markdown(rows: list[dict]) -> str:
    lines = [
        "| N | C | EAST ms | CE ms | EAST / CE (min-max) | metric alone ms | saved KiB EAST / CE "
        "| peak KiB EAST / CE | logits KiB |",
        "|---:|---:|---:|---:|:---|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['N']} | {r['C']} | {r['east_ms']:.3f} | {r['ce_ms']:.3f} | "
            f"{r['ratio']:.2f} ({r['ratio_min']:.2f}-{r['ratio_max']:.2f}) | {r['metric_ms']:.3f} | "
            f"{_kib(r['east_saved_bytes'])} / {_kib(r['ce_saved_bytes'])} | "
            f"{_kib(r['east_peak_bytes'])} / {_kib(r['ce_peak_bytes'])} | {_kib(r['logits_bytes'])} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--repeats", type=int, default=21, help="interleaved EAST/CE/metric blocks per size")
    parser.add_argument("--scale", type=float, default=3.0, help="logits = randn * scale")
    parser.add_argument("--block-ms", type=float, default=50.0, help="approximate length of one timed block")
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's)")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="wall", help=CLOCK_HELP)
    parser.add_argument("--json", default=None, help="also write the rows, with every timing, to this file")
    parser.add_argument(
        "--sizes",
        default=None,
        help="N,C pairs, e.g. '256,10 128,10 512,2' (default: " + " ".join(f"{n},{c}" for n, c in SIZES) + ")",
    )
    args = parser.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("Expected a CUDA device for --device cuda, found none")
    if args.threads:
        torch.set_num_threads(args.threads)
    check_clock(args.clock, args.device)
    sizes = [tuple(int(v) for v in pair.split(",")) for pair in args.sizes.split()] if args.sizes else SIZES
    rows = run(args.device, args.repeats, args.block_ms, args.scale, sizes, args.clock)
    env = {
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name()
        if args.device == "cuda"
        else platform.processor() or platform.machine(),
        "threads": torch.get_num_threads(),
        "python": platform.python_version(),
    }
    print(
        f"torch {env['torch']}, {args.device} ({env['device']}), {env['threads']} threads, {args.repeats} repeats, "
        f"logits = randn * {args.scale}"
    )
    print(markdown(rows))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"env": env, "args": vars(args), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
