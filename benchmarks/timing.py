"""The benchmarks' shared timing harness: interleaved repeated timing, medians, per-repeat ratios, peak memory.

After a warm-up, each repeat times a block of calls of every step back to back, in an order that alternates between
repeats (A B C, C B A, ...), so that every step sees the same machine load. A comparison reads the medians over
repeats and the per-repeat ratio (and difference) against a reference step timed beside it: on a shared machine the
ratio is steadier than either time.

The scripts run as ``python benchmarks/NAME.py`` from the repository root, which puts ``benchmarks/`` first on
``sys.path``, so they ``import timing``.
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable

import torch

CLOCKS = {"wall": time.perf_counter, "cpu": time.thread_time}  # cpu: this thread's CPU time, not time descheduled
CLOCK_HELP = "wall time, or this thread's CPU time (CPU, one thread: steadier on a machine shared with other jobs)"


def check_clock(clock: str, device: str) -> None:
    """Refuse a clock that cannot time ``device``: the CPU time of one thread misses other threads and the GPU."""
    if clock not in CLOCKS:
        raise SystemExit(f"Expected --clock in {sorted(CLOCKS)}, got {clock!r}")
    if clock == "cpu" and (device != "cpu" or torch.get_num_threads() != 1):
        raise SystemExit("Expected --clock cpu only with --device cpu --threads 1 (CPU time of one thread)")


def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def time_block(step: Callable[[], None], calls: int, device: str, clock: str = "wall") -> float:
    """Milliseconds per call over a block of ``calls`` calls of ``step``."""
    now = CLOCKS[clock]
    sync(device)
    start = now()
    for _ in range(calls):
        step()
    sync(device)
    return (now() - start) * 1e3 / calls


def calls_per_block(steps: list, device: str, target_ms: float, clock: str = "wall") -> int:
    """Calls per block so that the slowest step's block lasts about ``target_ms``."""
    slowest = max(time_block(step, 3, device, clock) for step in steps)
    return max(1, round(target_ms / max(slowest, 1e-3)))


def time_interleaved(
    steps: dict[str, Callable[[], None]],
    repeats: int,
    device: str,
    target_ms: float,
    warmup: int = 5,
    clock: str = "wall",
) -> dict:
    """``{name: [ms per call in each repeat]}`` and ``calls_per_block``: blocks of every step back to back, in an
    order that alternates between repeats, after ``warmup`` calls of each (allocator, lazy initialisation, caches)."""
    for step in steps.values():
        time_block(step, warmup, device, clock)
    calls = calls_per_block(list(steps.values()), device, target_ms, clock)
    names = list(steps)
    times: dict = {name: [] for name in names}
    for r in range(repeats):
        for name in names if r % 2 == 0 else names[::-1]:
            times[name].append(time_block(steps[name], calls, device, clock))
    times["calls_per_block"] = calls
    return times


def median_ms(times: dict, name: str) -> float:
    return statistics.median(times[name])


def against(times: dict, name: str, reference: str) -> dict[str, float]:
    """``name`` against ``reference`` timed in the same repeats: the median of the per-repeat ratio (with its min and
    max) and of the per-repeat difference in ms."""
    ratios = [a / b for a, b in zip(times[name], times[reference], strict=True)]
    diffs = [a - b for a, b in zip(times[name], times[reference], strict=True)]
    return {
        "ratio": statistics.median(ratios),
        "ratio_min": min(ratios),
        "ratio_max": max(ratios),
        "diff_ms": statistics.median(diffs),
    }


def peak_bytes(step: Callable[[], None], device: str) -> int:
    """Peak extra bytes allocated during one call of ``step``: on CUDA ``max_memory_allocated`` above the starting
    point, on CPU the running "Total Allocated" of the allocator's events recorded by ``torch.profiler``."""
    if device == "cuda":
        torch.cuda.synchronize()
        start = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        step()
        torch.cuda.synchronize()
        return torch.cuda.max_memory_allocated() - start
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        step()
    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    try:
        prof.export_chrome_trace(path)
        with open(path) as f:
            events = json.load(f)["traceEvents"]
    finally:
        os.remove(path)
    # "Total Allocated" counts from the start of profiling, so its maximum is the peak above the starting point
    totals = [e["args"]["Total Allocated"] for e in events if e.get("name") == "[memory]"]
    return max([0, *totals])
