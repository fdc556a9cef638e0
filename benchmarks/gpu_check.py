"""GPU readiness checks for east_hf: the CUDA paths that the CPU machines never ran.

Sections, each recorded in ``gpu_check.json`` and ``gpu_check.md`` under ``--out-dir``:

1. ``loss``: ``EASTLoss`` forward + backward against cross-entropy at (256, 10), (1024, 1000) and (8192, 1000), on
   float32 logits and on bfloat16 logits under bf16 autocast; interleaved blocks, medians, the ratio measured side
   by side (``benchmarks/timing.py``); peak memory of one call and bytes saved for backward.
2. ``gradients``: the fused Function (through ``EASTLoss.confusion_matrix``) against autograd of the plain
   composition softmax -> linear_heaviside(p, dynamic_threshold(p)) -> L1 normalisation -> confusion matrix, in
   float64 on the device; float32 on the device against that float64 reference; ``torch.autograd.gradcheck`` in
   float64 on the device; bf16 autocast against float32; every metric with per-class beta (finite, on the device).
3. ``collective``: the differentiable all-reduce EASTTrainer applies to the soft confusion matrix, under NCCL with
   one process (gloo on CPU): value and gradient unchanged at world size 1 (two ranks need two GPUs).
4. ``trainer``: one ``EASTTrainer`` epoch of darknet19 on CIFAR-10-sized random data (50,000 images 3x32x32, batch
   128, bf16) with EAST and with the cross-entropy baseline (``east_loss="ce"``), after a short warm-up of each:
   runtime, samples/s, peak memory.

``--device cpu --quick`` runs every section small on the CPU, to test this script without a GPU.

Usage::

    bash benchmarks/gpu_check.sh [OUT_DIR]              # skips with one line (exit 0) without CUDA
    python benchmarks/gpu_check.py --out-dir OUT_DIR     # the same checks, fails without CUDA
    python benchmarks/gpu_check.py --device cpu --quick --out-dir /tmp/gc
"""

from __future__ import annotations

import argparse
import copy
import importlib
import importlib.util
import json
import os
import socket
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


def _ensure_hub_cards() -> None:
    """``east_hf.hub_cards`` is the top-level ``hub_cards/`` folder mapped into the package at install time; when
    east_hf runs from a source tree (``PYTHONPATH=.``), register it so that the Trainer's import finds its template."""
    try:
        importlib.import_module("east_hf.hub_cards")
        return
    except ModuleNotFoundError:
        pass
    init = REPO / "hub_cards" / "__init__.py"
    spec = importlib.util.spec_from_file_location(
        "east_hf.hub_cards", init, submodule_search_locations=[str(init.parent)]
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules["east_hf.hub_cards"] = module
    spec.loader.exec_module(module)


_ensure_hub_cards()

import east_hf  # noqa: E402, I001  (after _ensure_hub_cards)
from east_hf import EASTLoss  # noqa: E402
from loss_speed import make_step, saved_bytes  # noqa: E402
from step_speed import environment  # noqa: E402
from timing import against, median_ms, peak_bytes, time_interleaved  # noqa: E402

LOSS_SIZES = [(256, 10), (1024, 1000), (8192, 1000)]
QUICK_LOSS_SIZES = [(64, 10), (128, 300)]


# ---- 1. loss speed ---------------------------------------------------------------------------------------------------
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


# ---- 2. gradients ----------------------------------------------------------------------------------------------------
CASES = {
    "random": lambda g, n, c: torch.randn(n, c, generator=g, dtype=torch.float64) * 3.0,
    "near_uniform": lambda g, n, c: torch.randn(n, c, generator=g, dtype=torch.float64) * 0.01,
    "saturated": lambda g, n, c: torch.randn(n, c, generator=g, dtype=torch.float64) * 40.0,
}


def plain_confusion(logits, labels, weight, T, threshold_grad):
    """softmax -> linear_heaviside(p, dynamic_threshold(p)) -> L1 normalisation -> confusion matrix, all autograd."""
    p = logits.softmax(1)
    tau = east_hf.dynamic_threshold(p)
    H = east_hf.linear_heaviside(p, tau if threshold_grad else tau.detach(), T)
    g = H / H.sum(1, keepdim=True)
    if weight is not None:
        g = g * weight.unsqueeze(1)
    C = logits.shape[1]
    return g.new_zeros(C, C).index_add_(0, labels, g)


def _value_and_grad(fn, logits, readout):
    z = logits.detach().clone().requires_grad_()
    cm = fn(z)
    (grad,) = torch.autograd.grad((cm * readout.to(cm.dtype)).sum(), z)
    return cm.detach(), grad


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    """max |a - b| / max |b| (0 when both are 0), on the CPU in float64."""
    a, b = a.detach().double().cpu(), b.detach().double().cpu()
    scale = b.abs().max().item()
    return (a - b).abs().max().item() / scale if scale > 0 else (a - b).abs().max().item()


def _gradient_case(device, n, c, case, threshold_grad, weighted, T=0.2) -> dict:
    g = torch.Generator().manual_seed(n * 7919 + c)
    logits64 = CASES[case](g, n, c)
    labels = torch.randint(0, c, (n,), generator=g)
    weight = torch.rand(n, generator=g, dtype=torch.float64) if weighted else None
    readout = torch.randn(c, c, generator=g, dtype=torch.float64)
    east = EASTLoss(temperature=T, threshold_grad=threshold_grad, num_classes=c)
    labels_d, readout_d = labels.to(device), readout.to(device)
    weight_d = None if weight is None else weight.to(device)

    def fused(z):
        return east.confusion_matrix(z, labels_d, None if weight_d is None else weight_d.to(z.dtype))

    # float64 on the device: fused against autograd of the plain composition
    fused64 = _value_and_grad(fused, logits64.to(device), readout_d)
    plain64 = _value_and_grad(
        lambda z: plain_confusion(z, labels_d, weight_d, T, threshold_grad), logits64.to(device), readout_d
    )
    # float32 on the device against the float64 reference (plain, on the CPU)
    ref = _value_and_grad(lambda z: plain_confusion(z, labels, weight, T, threshold_grad), logits64, readout)
    fused32 = _value_and_grad(fused, logits64.float().to(device), readout_d)
    row = {
        "N": n,
        "C": c,
        "case": case,
        "threshold_grad": threshold_grad,
        "weighted": weighted,
        "f64_value_rel": _rel(fused64[0], plain64[0]),
        "f64_grad_rel": _rel(fused64[1], plain64[1]),
        "f64_vs_cpu_grad_rel": _rel(fused64[1], ref[1]),
        "f32_value_rel": _rel(fused32[0], ref[0]),
        "f32_grad_rel": _rel(fused32[1], ref[1]),
        "finite": bool(torch.isfinite(fused32[1]).all()) and bool(torch.isfinite(fused64[1]).all()),
    }
    row["ok"] = (
        row["finite"]
        and row["f64_value_rel"] < 1e-10
        and row["f64_grad_rel"] < 1e-8
        and row["f32_value_rel"] < 1e-4
        and row["f32_grad_rel"] < 1e-3
    )
    return row


def check_gradients(device: str, sizes) -> list[dict]:
    rows = [
        _gradient_case(device, n, c, case, threshold_grad, weighted)
        for n, c in sizes
        for case in CASES
        for threshold_grad in (True, False)
        for weighted in (False, True)
    ]
    bad = [r for r in rows if not r["ok"]]
    print(f"  gradients: {len(rows) - len(bad)}/{len(rows)} cases within tolerance", flush=True)
    return rows


def check_gradcheck(device: str) -> list[dict]:
    rows = []
    labels = torch.tensor([0, 3, 3, 17], device=device)
    weight = torch.tensor([1.0, 0.5, 2.0, 0.0], dtype=torch.float64, device=device)
    for case in CASES:
        for T in (0.2, 0.05, 0.35):
            g = torch.Generator().manual_seed(1)
            z = CASES[case](g, 4, 18) / (10.0 if case == "saturated" else 1.0)
            z = z.to(device).requires_grad_()
            readout = torch.randn(18, 18, generator=g, dtype=torch.float64).to(device)
            east = EASTLoss(temperature=T, num_classes=18)
            fn = lambda x: (east.confusion_matrix(x, labels, weight) * readout).sum()  # noqa: E731,B023
            try:
                ok = bool(torch.autograd.gradcheck(fn, (z,)))
                err = None
            except Exception as exc:  # gradcheck raises on a mismatch
                ok, err = False, str(exc).splitlines()[0][:300]
            rows.append({"case": case, "T": T, "ok": ok, "error": err})
    print(f"  gradcheck: {sum(r['ok'] for r in rows)}/{len(rows)} pass", flush=True)
    return rows


def check_autocast_and_metrics(device: str) -> list[dict]:
    rows = []
    g = torch.Generator().manual_seed(3)
    n, c = 512, 10
    logits = (torch.randn(n, c, generator=g) * 3).to(device)
    labels = torch.randint(0, c, (n,), generator=g).to(device)
    beta = [1.0] * c
    beta[3] = 0.25
    for metric in ("fbeta", "mcc", "accuracy", "precision", "recall"):
        east = EASTLoss(metric=metric, beta=beta if metric == "fbeta" else 1.0, num_classes=c)
        z32 = logits.bfloat16().float().requires_grad_()  # the same values in both precisions
        loss32 = east(z32, labels)
        loss32.backward()
        zbf = logits.bfloat16().requires_grad_()
        with torch.autocast(device, dtype=torch.bfloat16):
            lossbf = east(zbf, labels)
        lossbf.backward()
        row = {
            "metric": metric,
            "loss_fp32": loss32.item(),
            "loss_bf16_autocast": lossbf.item(),
            "loss_dtype_under_autocast": str(lossbf.dtype),
            "abs_diff": abs(loss32.item() - lossbf.item()),
            "grad_rel": _rel(zbf.grad.float(), z32.grad),
            "finite": bool(torch.isfinite(zbf.grad.float()).all()) and bool(torch.isfinite(z32.grad).all()),
        }
        # bf16 gradients carry 8 bits of mantissa: compare at bf16's resolution
        row["ok"] = row["finite"] and row["abs_diff"] < 1e-6 and row["grad_rel"] < 1e-2
        rows.append(row)
    print(f"  autocast/metrics: {sum(r['ok'] for r in rows)}/{len(rows)} ok", flush=True)
    return rows


# ---- 3. the differentiable all-reduce --------------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def check_collective(device: str) -> dict:
    import torch.distributed as dist
    from torch.distributed.nn.functional import all_reduce

    backend = "nccl" if device == "cuda" else "gloo"
    result = {"backend": backend, "world_size": 1}
    store = dist.TCPStore("127.0.0.1", _free_port(), 1, is_master=True)
    kwargs = {"device_id": torch.device("cuda", torch.cuda.current_device())} if device == "cuda" else {}
    dist.init_process_group(backend, store=store, rank=0, world_size=1, **kwargs)
    try:
        g = torch.Generator().manual_seed(5)
        n, c = 256, 10
        logits = (torch.randn(n, c, generator=g) * 3).to(device)
        labels = torch.randint(0, c, (n,), generator=g).to(device)
        east = EASTLoss(num_classes=c)
        z1 = logits.clone().requires_grad_()
        cm = east.confusion_matrix(z1, labels)
        reduced = all_reduce(cm)  # EASTTrainer: torch.distributed.nn.functional.all_reduce of the (C, C) matrix
        loss1 = east.loss_from_confusion(reduced)
        loss1.backward()
        z2 = logits.clone().requires_grad_()
        loss2 = east.loss_from_confusion(east.confusion_matrix(z2, labels))
        loss2.backward()
        result.update(
            {
                "loss_allreduced": loss1.item(),
                "loss_local": loss2.item(),
                "value_abs_diff": abs(loss1.item() - loss2.item()),
                "grad_rel": _rel(z1.grad, z2.grad),
            }
        )
        result["ok"] = result["value_abs_diff"] < 1e-6 and result["grad_rel"] < 1e-6
    finally:
        dist.destroy_process_group()
    print(f"  collective ({backend}): ok={result['ok']}", flush=True)
    return result


# ---- 4. an EASTTrainer epoch -----------------------------------------------------------------------------------------
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
    result["ok"] = all(
        r["steps"] == -(-n // batch) and r["train_loss"] == r["train_loss"] for r in runs.values()
    )  # a full epoch, finite
    return result


# ---- 4b. end to end on the device: text, multi-label, the binary default (learning rate per stage, EMA) ---------
TOPICS = {
    "sport": "goal match team score coach league player ball".split(),
    "money": "bank price stock market loan profit trade cash".split(),
    "food": "bread soup apple cheese salad pasta spice cook".split(),
}
NOISE_WORDS = "the a of and today very new some big small".split()


def _text_rows(seed: int, counts=(("sport", 200), ("money", 90), ("food", 50))) -> list[tuple[str, str]]:
    """Short imbalanced sentences: two words of the class's list among two to six shared noise words."""
    import random

    rng = random.Random(seed)
    rows = []
    for label, n in counts:
        for _ in range(n):
            words = rng.sample(TOPICS[label], 2) + rng.sample(NOISE_WORDS, rng.randint(2, 6))
            rng.shuffle(words)
            rows.append((" ".join(words), label))
    rng.shuffle(rows)
    return rows


def _table(n: int, seed: int, labels: int, offsets):
    """Six features; ``labels`` 0/1 columns of a fixed linear map plus noise (the offsets set each one's rate)."""
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 6)).astype(np.float32)
    W = np.random.default_rng(7).normal(size=(6, labels))
    Y = (X @ W + np.asarray(offsets) + rng.normal(scale=0.7, size=(n, labels)) > 0).astype(int)
    frame = pd.DataFrame(X, columns=[f"x{i}" for i in range(6)])
    for k in range(labels):
        frame[f"y{k}"] = Y[:, k]
    return frame


def _run_east_train(name: str, argv: list, out: Path, device: str) -> dict:
    """One ``east-train`` run in this process; its test metrics, kept stage, logged rates and the device's peak."""
    from east_hf.scripts import east_train

    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    argv = [str(a) for a in argv] + ["--output_dir", str(out), "--report_to", "none", "--disable_tqdm", "true"]
    rc = east_train.main(argv + (["--use_cpu", "true"] if device == "cpu" else []))
    row = {"run": name, "rc": rc, "seconds": time.perf_counter() - start}
    if device == "cuda":
        row["peak_mib"] = torch.cuda.max_memory_allocated() / 2**20
    if rc != 0:
        return row
    row["test"] = json.loads((out / "test_results.json").read_text())
    state = json.loads((out / "trainer_state.json").read_text())
    callback = state.get("stateful_callbacks", {}).get("TemperatureAnnealingCallback", {}).get("attributes", {})
    row["stage"] = callback.get("schedule_state", {}).get("stage")
    row["lr_scale"] = callback.get("lr_scale")
    row["learning_rates"] = sorted(
        {round(e["learning_rate"], 8) for e in state["log_history"] if "learning_rate" in e}
    )
    row["train_losses_finite"] = all(
        v == v and abs(v) != float("inf") for e in state["log_history"] for k, v in e.items() if k.endswith("loss")
    )
    return row


def _predict_agreement(run: Path, data, device: str) -> dict:
    """The saved run reloaded on the device and on the CPU: the same labels and probabilities."""
    from east_hf.hf.predict import Predictor

    frames = {d: Predictor(run, device=d).predict(data, probabilities=True) for d in dict.fromkeys([device, "cpu"])}
    a, b = frames[device], frames["cpu"]
    cols = [c for c in a.columns if c.startswith("probability_")]
    return {
        "label_agreement": float((a["predicted_label"] == b["predicted_label"]).mean()),
        "max_probability_diff": float((a[cols] - b[cols]).abs().to_numpy().max()),
    }


def check_paths(device: str, quick: bool) -> dict:
    """``east-train`` end to end on the device, each run trained, saved, reloaded and scored on its test split:
    ``text_<precision>`` (text_tiny and its WordPiece tokenizer from scratch, three imbalanced classes, macro F1) in
    bf16 and fp16, the decision rule tuned; ``multilabel_bf16`` (three 0/1 label columns, per-label EAST);
    ``ldam_bf16`` (LDAM-DRW: margins, the deferred re-weighting as a second stage); ``binary_bf16`` (one rare class:
    F1 of the positive class: the binary default, the learning rate halved per temperature decrease, with an EMA of
    the weights)."""
    import pandas as pd

    precisions = ["bf16"] if device == "cpu" else ["bf16", "fp16"]  # the Trainer has no fp16 on a CPU
    epochs = 2 if quick else None
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        os.environ["EAST_HF_CACHE"] = str(tmp / "cache")
        texts = tmp / "texts.csv"
        pd.DataFrame(_text_rows(0), columns=["text", "label"]).to_csv(texts, index=False)
        tags = tmp / "tags.csv"
        _table(700, 2, 3, [-2.0, -0.7, 0.0]).rename(columns={"y0": "rare", "y1": "mid", "y2": "common"}).to_csv(
            tags, index=False
        )
        binary = tmp / "binary.csv"
        _table(3000, 3, 1, [-2.2]).rename(columns={"y0": "label"}).to_csv(binary, index=False)
        plans = []
        for precision in precisions:
            plans.append((
                f"text_{precision}", 0.5, texts,
                [REPO / "recipes" / "text_tiny_demo.yaml", "--dataset_name", texts, "--num_train_epochs",
                 epochs or 10, "--max_length", 32, "--save_total_limit", 1, "--tune_decision_rule", "true",
                 f"--{precision}", "true"],
            ))  # fmt: skip
        plans.append((
            "multilabel_bf16", 0.6, tags,
            ["--dataset_name", tags, "--label_columns", "rare,mid,common", "--model_name_or_path", "tabular_mlp",
             "--num_train_epochs", epochs or 15, "--per_device_train_batch_size", 64, "--learning_rate", 0.01,
             "--east_warm_start_epochs", 1 if quick else 2, "--save_total_limit", 1, "--tune_decision_rule", "true",
             "--bf16", "true"],
        ))  # fmt: skip
        plans.append((
            "binary_bf16", 0.5, binary,
            ["--dataset_name", binary, "--label_column", "label", "--model_name_or_path", "tabular_mlp",
             "--east_average", "binary",
             "--num_train_epochs", epochs or 30, "--per_device_train_batch_size", 64, "--learning_rate", 0.01,
             "--lr_scheduler_type", "constant", "--east_warm_start_epochs", 1 if quick else 2, "--east_patience", 1,
             "--east_ema_decay", 0.95, "--logging_strategy", "epoch", "--save_total_limit", 1, "--bf16", "true"],
        ))  # fmt: skip
        plans.append((
            "ldam_bf16", 0.4, binary,
            ["--dataset_name", binary, "--label_column", "label", "--model_name_or_path", "tabular_mlp",
             "--east_loss", "ldam", "--east_average", "binary", "--num_train_epochs", epochs or 20,
             "--per_device_train_batch_size", 64, "--learning_rate", 0.01, "--save_total_limit", 1,
             "--tune_decision_rule", "true", "--bf16", "true"],
        ))  # fmt: skip
        for name, floor, data, argv in plans:
            print(f"  paths: {name}", flush=True)
            try:
                row = _run_east_train(name, argv, tmp / name, device)
                if row["rc"] == 0:
                    frame = pd.read_csv(data)
                    inputs = frame["text"].head(200).tolist() if name.startswith("text") else frame.head(200)
                    row.update(_predict_agreement(tmp / name, inputs, device))
                    row["floor"] = floor
                    score = row["test"].get("test_fbeta")
                    checks = [
                        row["train_losses_finite"],
                        row["label_agreement"] >= 0.99 and row["max_probability_diff"] < 1e-3,
                        quick or (score is not None and score > floor),  # learning happened (chance is far below)
                    ]
                    if name == "binary_bf16":  # the rate halves at each temperature decrease, the factor is saved
                        stage = row["stage"] or 0
                        checks.append(row["lr_scale"] == 0.5 ** max(stage, 0))
                        checks.append(quick or (stage >= 1 and 0.005 in row["learning_rates"]))
                    row["ok"] = all(checks)
                else:
                    row["ok"] = False
            except Exception as exc:  # record and go on with the next run
                traceback.print_exc()
                row = {"run": name, "ok": False, "error": f"{type(exc).__name__}: {exc}"[:500]}
            print(f"    {json.dumps({k: v for k, v in row.items() if k != 'learning_rates'})[:600]}", flush=True)
            rows.append(row)
    return {"rows": rows, "ok": all(r["ok"] for r in rows)}


# ---- 5. where the loss's time goes (profile) and torch.compile as an opt-in (experiment) -----------------------------
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
        # torch 2.11 (Dynamo, any backend) returned zero gradients through the fused Function; 2.14 does not
        row["ok"] = row["compiled_module_grad_rel"] < 1e-4 and row["compiled_core_grad_rel"] < 1e-4
        rows.append(row)
        print(
            f"  compile ({n}, {c}): eager {row['east_over_ce']:.2f}x CE, compiled module "
            f"{row['compiled_module_over_ce']:.2f}x, compiled core {row['compiled_core_over_ce']:.2f}x "
            f"(first calls {compile_s['compiled_module']:.0f} s / {compile_s['compiled_core']:.0f} s)",
            flush=True,
        )
    return rows


# ---- report ----------------------------------------------------------------------------------------------------------
def _kib(nbytes) -> str:
    return "-" if nbytes is None else f"{nbytes / 1024:,.0f}"


def _mib(nbytes) -> str:
    return "-" if nbytes is None else f"{nbytes / 2**20:,.1f}"


def markdown(report: dict) -> str:
    env = report["env"]
    out = [
        "# GPU check (benchmarks/gpu_check.py)",
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
    grads = report["sections"].get("gradients", {})
    if "rows" in grads:
        rows = grads["rows"]
        out += [
            "## Gradients of the fused Function on the device",
            "",
            f"{sum(r['ok'] for r in rows)} of {len(rows)} cases within tolerance (cases: random, near-uniform and "
            "saturated logits; gradient through tau on and off; with and without sample weights). Errors are "
            "max |a - b| / max |b| of the confusion matrix (value) and of d<readout, C>/dlogits (grad).",
            "",
            "| N | C | worst f64 value, fused vs plain on device | worst f64 grad | worst f32 value vs f64 | "
            "worst f32 grad vs f64 | all finite |",
            "|---:|---:|---:|---:|---:|---:|:---|",
        ]
        for n, c in sorted({(r["N"], r["C"]) for r in rows}):
            sub = [r for r in rows if (r["N"], r["C"]) == (n, c)]
            out.append(
                f"| {n} | {c} | {max(r['f64_value_rel'] for r in sub):.1e} | {max(r['f64_grad_rel'] for r in sub):.1e} "
                f"| {max(r['f32_value_rel'] for r in sub):.1e} | {max(r['f32_grad_rel'] for r in sub):.1e} | "
                f"{all(r['finite'] for r in sub)} |"
            )
        gc = grads.get("gradcheck", [])
        out += [
            "",
            f"`torch.autograd.gradcheck` (float64, on the device, T in 0.2/0.05/0.35): "
            f"{sum(r['ok'] for r in gc)} of {len(gc)} pass.",
        ]
        ac = grads.get("autocast_metrics", [])
        if ac:
            out += [
                "",
                "bf16 autocast against float32 on the same (bf16-representable) logits, (512, 10):",
                "",
                "| metric | loss fp32 | loss bf16 autocast | abs diff | grad rel diff | ok |",
                "|:---|---:|---:|---:|---:|:---|",
            ]
            for r in ac:
                out.append(
                    f"| {r['metric']} | {r['loss_fp32']:.6f} | {r['loss_bf16_autocast']:.6f} | {r['abs_diff']:.1e} "
                    f"| {r['grad_rel']:.1e} | {r['ok']} |"
                )
        out.append("")
    coll = report["sections"].get("collective", {})
    if "ok" in coll:
        out += [
            "## Differentiable all-reduce",
            "",
            f"`torch.distributed.nn.functional.all_reduce` of the soft confusion matrix under {coll['backend']}, "
            f"world size {coll['world_size']}: loss diff {coll['value_abs_diff']:.1e}, gradient rel diff "
            f"{coll['grad_rel']:.1e}, ok = {coll['ok']}. (The gradient identity for 2 ranks is tested on CPU with "
            "gloo in tests/test_distributed.py; 2 NCCL ranks need 2 GPUs.)",
            "",
        ]
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
    paths = report["sections"].get("paths", {})
    if "rows" in paths:
        out += [
            "## east-train end to end on the device",
            "",
            "Each run trained by `east-train` on the device, saved, reloaded with `Predictor` on the device and on the "
            "CPU (200 rows: label agreement, largest probability difference) and scored on its test split (macro F1, "
            "`binary_bf16` the positive class's F1; `floor`: the score that says it learned). `binary_bf16`: the binary default (rate x0.5 per temperature "
            "decrease) with `--east_ema_decay 0.95`; `ldam_bf16`: LDAM-DRW (stage 0 is the re-weighted stage); "
            "`stage` / `lr_scale`: the kept run's last stage and rate factor.",
            "",
            "| run | ok | s | test F1 | floor | stage | lr_scale | rates logged | labels agree | max prob diff "
            "| peak MiB |",
            "|:---|:---|---:|---:|---:|---:|---:|:---|---:|---:|---:|",
        ]
        for r in paths["rows"]:
            if "test" not in r:
                out.append(f"| {r['run']} | {r['ok']} | failed: {r.get('error', 'rc ' + str(r.get('rc')))} |")
                continue
            rates = ", ".join(f"{v:g}" for v in r["learning_rates"][-4:])
            out.append(
                f"| {r['run']} | {r['ok']} | {r['seconds']:.0f} | {r['test'].get('test_fbeta', float('nan')):.3f} | "
                f"{r['floor']} | {r['stage']} | {r['lr_scale']} | {rates} | {r['label_agreement']:.3f} | "
                f"{r['max_probability_diff']:.1e} | {r.get('peak_mib', 0):.0f} |"
            )
        out.append("")
    prof = report["sections"].get("profile", {})
    if "rows" in prof:
        out += [
            "## Where the loss's time goes (torch.profiler, per forward + backward)",
            "",
            "Launches: CUDA kernel launches; host reads: `aten::_local_scalar_dense` calls (a device-to-host copy that "
            "waits for the device: `bool()`, `int()`, `.item()` of a device tensor); host ms: wall time per call "
            "under the profiler (inflated by it); device ms: summed kernel time.",
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
    parser.add_argument("--out-dir", default=str(REPO / "runs" / "gpu_check"))
    parser.add_argument("--repeats", type=int, default=21)
    parser.add_argument(
        "--sections",
        default="loss,gradients,trainer,collective,profile,paths",
        help="comma-separated; also 'compile' (torch.compile experiment, compiles for a minute or more)",
    )
    args = parser.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        print("gpu_check: no CUDA device, skipped")
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
            elif name == "gradients":
                sizes = [(9, 18), (64, 10)] if quick else [(9, 18), (256, 10), (1024, 1000)]
                sec = {
                    "rows": check_gradients(args.device, sizes),
                    "gradcheck": check_gradcheck(args.device),
                    "autocast_metrics": check_autocast_and_metrics(args.device),
                }
                sec["ok"] = all(r["ok"] for k in ("rows", "gradcheck", "autocast_metrics") for r in sec[k])
            elif name == "collective":
                sec = check_collective(args.device)
            elif name == "profile":
                sec = {"rows": check_profile(args.device, QUICK_LOSS_SIZES if quick else [(256, 10), (8192, 1000)])}
            elif name == "compile":
                sizes = [(64, 10)] if quick else [(256, 10), (8192, 1000)]
                sec = {"rows": check_compile(args.device, sizes, 3 if quick else 11, 5.0 if quick else 25.0)}
                sec["ok"] = all(r["ok"] for r in sec["rows"])
            elif name == "trainer":
                sec = check_trainer(args.device, quick)
            elif name == "paths":
                sec = check_paths(args.device, quick)
            else:
                raise ValueError(f"unknown section {name!r}")
        except Exception as exc:  # record and go on: one failing section must not lose the others
            traceback.print_exc()
            sec = {"error": f"{type(exc).__name__}: {exc}"[:1000]}
        sec["seconds"] = time.perf_counter() - t0
        report["sections"][name] = sec
        report["elapsed_s"] = time.perf_counter() - started
        with open(os.path.join(args.out_dir, "gpu_check.json"), "w") as f:  # after every section: partial results
            json.dump(report, f, indent=1)
    md = markdown(report)
    with open(os.path.join(args.out_dir, "gpu_check.md"), "w") as f:
        f.write(md + "\n")
    print(md)
    failed = [n for n, s in report["sections"].items() if s.get("error") or s.get("ok") is False]
    print(f"gpu_check: {'FAILED ' + ', '.join(failed) if failed else 'all sections ok'} ({report['elapsed_s']:.0f} s)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
