"""What EAST costs on one GPU, as a Markdown table: the measurements of the CUDA paths (their correctness is
tests/test_gpu.py, which ``benchmarks/gpu_check.sh`` runs first).

Sections, each recorded in ``gpu_speed.json`` (after every section) and ``gpu_speed.md`` under ``--out-dir``:

1. ``loss``: ``EASTLoss`` forward + backward against cross-entropy at (256, 10), (1024, 1000) and (8192, 1000), on
   float32 logits and on bfloat16 logits under bf16 autocast; interleaved blocks, medians, the ratio measured side
   by side (``benchmarks/timing.py``); peak memory of one call and bytes saved for backward.
2. ``trainer``: one ``EASTTrainer`` epoch of darknet19 on CIFAR-10-sized random data (50,000 images 3x32x32, batch
   128, bf16) with EAST and with the cross-entropy baseline (``east_loss="ce"``), after a short warm-up of each:
   runtime, samples/s, peak memory.
3. ``profile``: per loss call, kernel launches, host reads, host and device time (``torch.profiler``).
4. ``compile`` (opt-in): ``torch.compile`` of the loss and of the fused core against eager, with the gradient
   difference (tests/test_gpu.py asserts it with ``EAST_GPU_COMPILE=1``).

``--device cpu --quick`` runs every section small on the CPU, to test this script without a GPU.

Usage::

    bash benchmarks/gpu_check.sh [OUT_DIR]              # device tests, this script, step speeds; skips without CUDA
    python benchmarks/gpu_speed.py --out-dir OUT_DIR     # this script alone
    python benchmarks/gpu_speed.py --device cpu --quick --out-dir /tmp/gs
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path

import torch
import torch.nn.functional as F

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))


from east_hf import EASTLoss  # noqa: E402, I001
from loss_speed import make_step, saved_bytes  # noqa: E402
from step_speed import environment  # noqa: E402
from timing import against, median_ms, peak_bytes, time_interleaved  # noqa: E402

LOSS_SIZES = [(256, 10), (1024, 1000), (8192, 1000)]
QUICK_LOSS_SIZES = [(64, 10), (128, 300)]


# ---- 1. loss speed --------------------------------------------------------------------------------------------------
def check_loss_speed(device: str, sizes, repeats: int, block_ms: float) -> list[dict]:
    rows = []
    for dtype_name, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
        for n, c in sizes:
            gen = torch.Generator().manual_seed(0)
            logits = (torch.randn(n, c, generator=gen) * 3.0).to(device, dtype).requires_grad_()
            labels = torch.randint(0, c, (n,), generator=gen).to(device)
            east = EASTLoss(num_classes=c)

            def east_trainer_path(z, y, east=east):  # EASTTrainer's path: no finiteness check on the loss
                return east.loss_from_confusion(east.confusion_matrix(z, y))

            def ce(z, y):
                return F.cross_entropy(z.float(), y)

            fns = {"east": east, "east_trainer_path": east_trainer_path, "ce": ce}

            def autocast(step, enabled=dtype == torch.bfloat16):
                def wrapped():
                    with torch.autocast(device, dtype=torch.bfloat16, enabled=enabled):
                        step()

                return wrapped

            steps = {name: autocast(make_step(fn, logits, labels)) for name, fn in fns.items()}
            times = time_interleaved(steps, repeats, device, block_ms)
            vs_ce = against(times, "east", "ce")
            rows.append(
                {
                    "dtype": dtype_name,
                    "N": n,
                    "C": c,
                    "east_ms": median_ms(times, "east"),
                    "east_trainer_path_ms": median_ms(times, "east_trainer_path"),
                    "ce_ms": median_ms(times, "ce"),
                    "ratio": vs_ce["ratio"],
                    "ratio_min": vs_ce["ratio_min"],
                    "ratio_max": vs_ce["ratio_max"],
                    "ratio_trainer_path": against(times, "east_trainer_path", "ce")["ratio"],
                    "east_peak_bytes": peak_bytes(steps["east"], device),
                    "ce_peak_bytes": peak_bytes(steps["ce"], device),
                    "east_saved_bytes": saved_bytes(east, logits, labels),
                    "ce_saved_bytes": saved_bytes(ce, logits, labels),
                    "logits_bytes": logits.nelement() * logits.element_size(),
                    "repeats": repeats,
                    "east_ms_all": times["east"],
                    "ce_ms_all": times["ce"],
                }
            )
            print(f"  loss {dtype_name} ({n}, {c}): EAST/CE {rows[-1]['ratio']:.2f}", flush=True)
    return rows


# ---- 2. an EASTTrainer epoch ----------------------------------------------------------------------------------------
class RandomImages(torch.utils.data.Dataset):
    """CIFAR-10-sized random data: {"pixel_values": (3, S, S) float32, "labels": int}."""

    def __init__(self, n: int, size: int, classes: int, seed: int = 0):
        g = torch.Generator().manual_seed(seed)
        self.x = torch.randn(n, 3, size, size, generator=g)
        self.y = torch.randint(0, classes, (n,), generator=g)

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> dict:
        return {"pixel_values": self.x[i], "labels": self.y[i]}


def _train(model, data, loss: str, out_dir: str, batch: int, bf16: bool, device: str, max_steps: int = -1):
    from east_hf import EASTConfig, EASTTrainer

    args = EASTConfig(
        output_dir=out_dir,
        east_loss=loss,
        east_annealing=False,  # no callback: plain epochs (and no cross-entropy warm start)
        num_train_epochs=1,
        max_steps=max_steps,
        per_device_train_batch_size=batch,
        learning_rate=1e-3,
        bf16=bf16,
        eval_strategy="no",
        save_strategy="no",
        logging_strategy="no",
        report_to=[],
        disable_tqdm=True,
        dataloader_num_workers=0,
        use_cpu=device == "cpu",
        seed=0,
    )
    trainer = EASTTrainer(model=model, args=args, train_dataset=data)
    if device == "cuda":
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    out = trainer.train()
    if device == "cuda":
        torch.cuda.synchronize()
    wall = time.perf_counter() - start
    peak = torch.cuda.max_memory_allocated() - base if device == "cuda" else None
    return {
        "loss": loss,
        "steps": out.global_step,
        "train_runtime_s": out.metrics.get("train_runtime"),
        "train_samples_per_second": out.metrics.get("train_samples_per_second"),
        "wall_s": wall,
        "train_loss": out.training_loss,
        "peak_bytes_above_start": peak,
        "peak_bytes_total": torch.cuda.max_memory_allocated() if device == "cuda" else None,
    }


def check_trainer(device: str, quick: bool) -> dict:
    from east_hf.hf.models import create_image_model

    arch, n, batch = ("darknet19_tiny", 256, 32) if quick else ("darknet19", 50_000, 128)
    bf16 = True
    data = RandomImages(n, 32, 10)
    torch.manual_seed(0)
    base = create_image_model(arch, num_labels=10)
    result = {"architecture": arch, "samples": n, "image_size": 32, "classes": 10, "batch": batch, "bf16": bf16}
    with tempfile.TemporaryDirectory() as tmp:
        for loss in ("east", "ce"):  # warm-up: cuDNN heuristics, allocator, lazy initialisation
            _train(copy.deepcopy(base), data, loss, f"{tmp}/warm_{loss}", batch, bf16, device, max_steps=5)
        runs = {}
        for loss in ("east", "ce"):
            runs[loss] = _train(copy.deepcopy(base), data, loss, f"{tmp}/{loss}", batch, bf16, device)
            print(
                f"  trainer {loss}: {runs[loss]['train_runtime_s']:.1f} s for {runs[loss]['steps']} steps", flush=True
            )
    result["runs"] = runs
    result["runtime_ratio_east_ce"] = runs["east"]["train_runtime_s"] / runs["ce"]["train_runtime_s"]
    return result


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    """max |a - b| / max |b| (the plain max |a - b| when b is 0), on the CPU in float64."""
    a, b = a.detach().double().cpu(), b.detach().double().cpu()
    scale = b.abs().max().item()
    return (a - b).abs().max().item() / scale if scale > 0 else (a - b).abs().max().item()


# ---- 3, 4. where the loss's time goes (profile) and torch.compile as an opt-in (experiment) -------------------------
def _loss_fns(c: int) -> dict:
    east = EASTLoss(num_classes=c)
    return {
        "east": east,
        "east_trainer_path": lambda z, y: east.loss_from_confusion(east.confusion_matrix(z, y)),
        "ce": lambda z, y: F.cross_entropy(z.float(), y),
    }


def check_profile(device: str, sizes, calls: int = 20) -> list[dict]:
    """Per call of forward + backward: kernel launches, device-to-host reads (host syncs), host and device time."""
    from torch.profiler import ProfilerActivity, profile

    rows = []
    for n, c in sizes:
        gen = torch.Generator().manual_seed(0)
        logits = (torch.randn(n, c, generator=gen) * 3.0).to(device).requires_grad_()
        labels = torch.randint(0, c, (n,), generator=gen).to(device)
        for name, fn in _loss_fns(c).items():
            step = make_step(fn, logits, labels)
            for _ in range(5):
                step()
            acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
            with profile(activities=acts) as prof:
                t0 = time.perf_counter()
                for _ in range(calls):
                    step()
                if device == "cuda":
                    torch.cuda.synchronize()
                wall = time.perf_counter() - t0
            events = prof.key_averages()

            def count(pred, events=events):
                return sum(e.count for e in events if pred(e.key)) / calls

            aten = [e for e in events if e.key.startswith("aten::")]
            row = {
                "N": n,
                "C": c,
                "loss": name,
                "kernel_launches": count(lambda k: "LaunchKernel" in k),
                "host_reads": count(lambda k: k == "aten::_local_scalar_dense"),
                "stream_syncs": count(lambda k: "Synchronize" in k),
                "aten_calls": sum(e.count for e in aten) / calls,
                "host_ms": wall / calls * 1e3,
                "device_ms": sum(getattr(e, "self_device_time_total", 0) for e in events) / calls / 1e3,
            }
            if name == "east" and (n, c) == sizes[0]:
                row["table"] = events.table(sort_by="self_cpu_time_total", row_limit=25)
            rows.append(row)
            print(
                f"  profile ({n}, {c}) {name}: {row['kernel_launches']:.0f} launches, {row['host_reads']:.0f} host "
                f"reads, host {row['host_ms']:.2f} ms, device {row['device_ms']:.3f} ms",
                flush=True,
            )
    return rows


def check_compile(device: str, sizes, repeats: int, block_ms: float) -> list[dict]:
    """torch.compile of the loss: of the module as a user can today (graph breaks at the label checks' host reads),
    and of the fused core without the checks (what a built-in opt-in could reach). Forward + backward, interleaved."""
    from east_hf.core.fused import soft_confusion_from_logits  # the core without validation: experiment only

    rows = []
    for n, c in sizes:
        gen = torch.Generator().manual_seed(0)
        logits = (torch.randn(n, c, generator=gen) * 3.0).to(device).requires_grad_()
        labels = torch.randint(0, c, (n,), generator=gen).to(device)
        fns = _loss_fns(c)
        east = fns["east"]

        def core(z, y, east=east):
            return east.loss_from_confusion(soft_confusion_from_logits(z, y, None, east.temperature, True))

        torch._dynamo.reset()
        fns["compiled_module"] = torch.compile(east, dynamic=False)
        fns["compiled_core"] = torch.compile(core, dynamic=False)
        fns["eager_core"] = core
        compile_s = {}
        grads = {}
        for name in ("compiled_module", "compiled_core", "east"):
            t0 = time.perf_counter()
            z = logits.detach().clone().requires_grad_()
            fns[name](z, labels).backward()
            if device == "cuda":
                torch.cuda.synchronize()
            compile_s[name] = time.perf_counter() - t0
            grads[name] = z.grad
        steps = {name: make_step(fn, logits, labels) for name, fn in fns.items()}
        times = time_interleaved(steps, repeats, device, block_ms)
        row = {"N": n, "C": c, "first_call_s": compile_s}
        for name in fns:
            row[f"{name}_ms"] = median_ms(times, name)
            row[f"{name}_over_ce"] = against(times, name, "ce")["ratio"]
        row["compiled_module_grad_rel"] = _rel(grads["compiled_module"], grads["east"])
        row["compiled_core_grad_rel"] = _rel(grads["compiled_core"], grads["east"])
        rows.append(row)
        print(
            f"  compile ({n}, {c}): eager {row['east_over_ce']:.2f}x CE, compiled module "
            f"{row['compiled_module_over_ce']:.2f}x, compiled core {row['compiled_core_over_ce']:.2f}x "
            f"(first calls {compile_s['compiled_module']:.0f} s / {compile_s['compiled_core']:.0f} s)",
            flush=True,
        )
    return rows


# ---- report ---------------------------------------------------------------------------------------------------------
def _kib(nbytes) -> str:
    return "-" if nbytes is None else f"{nbytes / 1024:,.0f}"


def _mib(nbytes) -> str:
    return "-" if nbytes is None else f"{nbytes / 2**20:,.1f}"


def markdown(report: dict) -> str:
    env = report["env"]
    out = [
        "# GPU speed (benchmarks/gpu_speed.py)",
        "",
        f"Machine: {env['machine']}, torch {env['torch']}"
        + (f", CUDA {env.get('cuda')}, cuDNN {env.get('cudnn')}" if env["device"] == "cuda" else "")
        + f", python {env['python']}. Command: `{report['command']}`. Total {report['elapsed_s']:.0f} s.",
        "",
    ]
    for name, sec in report["sections"].items():
        if sec.get("error"):
            out += [f"**{name}: FAILED** `{sec['error']}`", ""]
    if "loss" in report["sections"] and "rows" in report["sections"]["loss"]:
        out += [
            "## Loss forward + backward against cross-entropy",
            "",
            "Logits `randn(N, C) * 3` (bf16 rows: bfloat16 logits under bf16 autocast; EAST computes in float32), "
            "interleaved blocks, medians. `EAST` is `EASTLoss()(logits, labels)`; `trainer path` is "
            "`loss_from_confusion(confusion_matrix(...))`, what EASTTrainer computes. Peak: extra bytes allocated "
            "during one call (the logits' gradient included); saved: held for backward (logits excluded).",
            "",
            "| dtype | N | C | EAST ms | CE ms | EAST / CE (min-max) | trainer path / CE | peak KiB EAST / CE "
            "| saved KiB EAST / CE |",
            "|:---|---:|---:|---:|---:|:---|---:|---:|---:|",
        ]
        for r in report["sections"]["loss"]["rows"]:
            out.append(
                f"| {r['dtype']} | {r['N']} | {r['C']} | {r['east_ms']:.3f} | {r['ce_ms']:.3f} | "
                f"{r['ratio']:.2f} ({r['ratio_min']:.2f}-{r['ratio_max']:.2f}) | {r['ratio_trainer_path']:.2f} | "
                f"{_kib(r['east_peak_bytes'])} / {_kib(r['ce_peak_bytes'])} | "
                f"{_kib(r['east_saved_bytes'])} / {_kib(r['ce_saved_bytes'])} |"
            )
        out.append("")
    tr = report["sections"].get("trainer", {})
    if "runs" in tr:
        out += [
            "## One EASTTrainer epoch",
            "",
            f"{tr['architecture']}, {tr['samples']:,} random {tr['image_size']}x{tr['image_size']} images, "
            f"{tr['classes']} classes, batch {tr['batch']}, bf16={tr['bf16']}, AdamW lr 1e-3, no evaluation, after a "
            f"5-step warm-up of each. EAST / CE runtime: **{tr['runtime_ratio_east_ce']:.3f}**.",
            "",
            "| loss | steps | train_runtime s | samples/s | train loss | peak MiB above start | peak MiB total |",
            "|:---|---:|---:|---:|---:|---:|---:|",
        ]
        for r in tr["runs"].values():
            out.append(
                f"| {r['loss']} | {r['steps']} | {r['train_runtime_s']:.2f} | {r['train_samples_per_second']:.0f} | "
                f"{r['train_loss']:.4f} | {_mib(r['peak_bytes_above_start'])} | {_mib(r['peak_bytes_total'])} |"
            )
        out.append("")
    prof = report["sections"].get("profile", {})
    if "rows" in prof:
        out += [
            "## Where the loss's time goes (torch.profiler, per forward + backward)",
            "",
            "Launches: CUDA kernel launches; host reads: `aten::_local_scalar_dense` calls "
            "(a device-to-host copy that waits for the device: `bool()`, `int()`, `.item()` of a device tensor); "
            "host ms: wall time per call under the profiler (inflated by it); device ms: summed kernel time.",
            "",
            "| N | C | loss | kernel launches | host reads | aten calls | host ms | device ms |",
            "|---:|---:|:---|---:|---:|---:|---:|---:|",
        ]
        for r in prof["rows"]:
            out.append(
                f"| {r['N']} | {r['C']} | {r['loss']} | {r['kernel_launches']:.0f} | {r['host_reads']:.0f} | "
                f"{r['aten_calls']:.0f} | {r['host_ms']:.3f} | {r['device_ms']:.3f} |"
            )
        out.append("")
    comp = report["sections"].get("compile", {})
    if "rows" in comp:
        out += [
            "## torch.compile as an opt-in (experiment)",
            "",
            "`compiled module`: `torch.compile(EASTLoss())`, as a user can do today (graph breaks at the label "
            "checks' host reads); `compiled core`: `torch.compile` of `loss_from_confusion(soft_confusion_from_logits"
            "(...))` without the validation. Forward + backward, ratios to CE measured side by side.",
            "",
            "| N | C | eager EAST / CE | eager core / CE | compiled module / CE | compiled core / CE | first call s "
            "(module, core) | grad rel diff (module, core) |",
            "|---:|---:|---:|---:|---:|---:|:---|:---|",
        ]
        for r in comp["rows"]:
            fc = r["first_call_s"]
            out.append(
                f"| {r['N']} | {r['C']} | {r['east_over_ce']:.2f} | {r['eager_core_over_ce']:.2f} | "
                f"{r['compiled_module_over_ce']:.2f} | {r['compiled_core_over_ce']:.2f} | "
                f"{fc['compiled_module']:.0f}, {fc['compiled_core']:.0f} | "
                f"{r['compiled_module_grad_rel']:.1e}, {r['compiled_core_grad_rel']:.1e} |"
            )
        out.append("")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    parser.add_argument("--quick", action="store_true", help="every section, small (for testing on a CPU)")
    parser.add_argument("--out-dir", default=str(REPO / "runs" / "gpu_speed"))
    parser.add_argument("--repeats", type=int, default=21)
    parser.add_argument(
        "--sections",
        default="loss,trainer,profile",
        help="comma-separated; also 'compile' (torch.compile experiment, compiles for a minute or more)",
    )
    args = parser.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        print("gpu_speed: no CUDA device, skipped")
        return 0
    os.makedirs(args.out_dir, exist_ok=True)
    quick = args.quick
    started = time.perf_counter()
    report = {
        "env": environment(args.device),
        "command": " ".join([Path(sys.argv[0]).name, *(argv if argv is not None else sys.argv[1:])]),
        "sections": {},
    }
    for name in args.sections.split(","):
        t0 = time.perf_counter()
        print(f"[{name}]", flush=True)
        try:
            if name == "loss":
                sec = {
                    "rows": check_loss_speed(
                        args.device,
                        QUICK_LOSS_SIZES if quick else LOSS_SIZES,
                        3 if quick else args.repeats,
                        5.0 if quick else 25.0,
                    )
                }
            elif name == "profile":
                sec = {"rows": check_profile(args.device, QUICK_LOSS_SIZES if quick else [(256, 10), (8192, 1000)])}
            elif name == "compile":
                sizes = [(64, 10)] if quick else [(256, 10), (8192, 1000)]
                sec = {"rows": check_compile(args.device, sizes, 3 if quick else 11, 5.0 if quick else 25.0)}
            elif name == "trainer":
                sec = check_trainer(args.device, quick)
            else:
                raise ValueError(f"unknown section {name!r}")
        except Exception as exc:  # record and go on: one failing section must not lose the others
            traceback.print_exc()
            sec = {"error": f"{type(exc).__name__}: {exc}"[:1000]}
        sec["seconds"] = time.perf_counter() - t0
        report["sections"][name] = sec
        report["elapsed_s"] = time.perf_counter() - started
        with open(os.path.join(args.out_dir, "gpu_speed.json"), "w") as f:  # after every section: partial results
            json.dump(report, f, indent=1)
    md = markdown(report)
    with open(os.path.join(args.out_dir, "gpu_speed.md"), "w") as f:
        f.write(md + "\n")
    print(md)
    failed = [n for n, s in report["sections"].items() if s.get("error")]
    print(f"gpu_speed: {'FAILED ' + ', '.join(failed) if failed else 'all sections ok'} ({report['elapsed_s']:.0f} s)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
