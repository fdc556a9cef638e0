"""The CUDA paths the CPU machines never run: the fused Function's values and gradients on the device against the plain
composition in float64, gradcheck, bf16 autocast for every metric, the differentiable all-reduce under NCCL (one
rank), an EASTTrainer epoch in bf16, and ``east-train`` end to end on the device (text in bf16 and fp16, multi-label,
the binary default with an EMA, LDAM-DRW), each run reloaded on the device and on the CPU; FSDP (one rank per GPU):
FSDP2 anneals with its stage copies as DDP does, FSDP1 with them is refused.

Every test is skipped without a CUDA device (CI has none). On a GPU: ``bash benchmarks/gpu_check.sh`` runs this file
and the speed measurements; ``pytest -q tests/test_gpu.py`` alone takes about two minutes on one H200.
``EAST_GPU_COMPILE=1`` adds the ``torch.compile`` gradient check (it compiles for a minute or more).
"""

from __future__ import annotations

import json
import os
import random
import socket
import sys
from pathlib import Path

import pytest
import torch

import east_hf
from east_hf import EASTLoss

REPO = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs a CUDA device: torch.cuda.is_available() is False"
)

DEVICE = "cuda"
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
    g = H / H.sum(1, keepdim=True)  # (N, C)
    if weight is not None:
        g = g * weight.unsqueeze(1)
    C = logits.shape[1]
    return g.new_zeros(C, C).index_add_(0, labels, g)  # (C, C), rows = true class


def value_and_grad(fn, logits, readout):
    z = logits.detach().clone().requires_grad_()
    cm = fn(z)
    (grad,) = torch.autograd.grad((cm * readout.to(cm.dtype)).sum(), z)
    return cm.detach(), grad


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    """max |a - b| / max |b| (the plain max |a - b| when b is 0), on the CPU in float64."""
    a, b = a.detach().double().cpu(), b.detach().double().cpu()
    scale = b.abs().max().item()
    return (a - b).abs().max().item() / scale if scale > 0 else (a - b).abs().max().item()


# ---- the fused Function on the device -------------------------------------------------------------------------------
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("threshold_grad", [True, False])
@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize(("n", "c"), [(9, 18), (256, 10), (1024, 1000)])
def test_fused_confusion_matches_the_plain_composition(n, c, case, threshold_grad, weighted):
    T = 0.2
    g = torch.Generator().manual_seed(n * 7919 + c)
    logits64 = CASES[case](g, n, c)
    labels = torch.randint(0, c, (n,), generator=g)
    weight = torch.rand(n, generator=g, dtype=torch.float64) if weighted else None
    readout = torch.randn(c, c, generator=g, dtype=torch.float64)
    east = EASTLoss(temperature=T, threshold_grad=threshold_grad, num_classes=c)
    labels_d, readout_d = labels.to(DEVICE), readout.to(DEVICE)
    weight_d = None if weight is None else weight.to(DEVICE)

    def fused(z):
        return east.confusion_matrix(z, labels_d, None if weight_d is None else weight_d.to(z.dtype))

    # float64 on the device: fused against autograd of the plain composition
    fused64 = value_and_grad(fused, logits64.to(DEVICE), readout_d)
    plain64 = value_and_grad(
        lambda z: plain_confusion(z, labels_d, weight_d, T, threshold_grad), logits64.to(DEVICE), readout_d
    )
    # float32 on the device against the float64 reference (plain, on the CPU)
    ref = value_and_grad(lambda z: plain_confusion(z, labels, weight, T, threshold_grad), logits64, readout)
    fused32 = value_and_grad(fused, logits64.float().to(DEVICE), readout_d)
    assert torch.isfinite(fused64[1]).all() and torch.isfinite(fused32[1]).all()
    assert rel(fused64[0], plain64[0]) < 1e-10, "float64 value, fused against plain on the device"
    assert rel(fused64[1], plain64[1]) < 1e-8, "float64 gradient, fused against plain on the device"
    assert rel(fused32[0], ref[0]) < 1e-4, "float32 value on the device against the float64 reference"
    assert rel(fused32[1], ref[1]) < 1e-3, "float32 gradient on the device against the float64 reference"


@pytest.mark.parametrize("T", [0.2, 0.05, 0.35])
@pytest.mark.parametrize("case", list(CASES))
def test_gradcheck_on_the_device(case, T):
    labels = torch.tensor([0, 3, 3, 17], device=DEVICE)
    weight = torch.tensor([1.0, 0.5, 2.0, 0.0], dtype=torch.float64, device=DEVICE)
    g = torch.Generator().manual_seed(1)
    z = CASES[case](g, 4, 18) / (10.0 if case == "saturated" else 1.0)
    z = z.to(DEVICE).requires_grad_()
    readout = torch.randn(18, 18, generator=g, dtype=torch.float64).to(DEVICE)
    east = EASTLoss(temperature=T, num_classes=18)
    assert torch.autograd.gradcheck(lambda x: (east.confusion_matrix(x, labels, weight) * readout).sum(), (z,))


@pytest.mark.parametrize("metric", ["fbeta", "mcc", "accuracy", "precision", "recall"])
def test_bf16_autocast_matches_float32(metric):
    g = torch.Generator().manual_seed(3)
    n, c = 512, 10
    logits = (torch.randn(n, c, generator=g) * 3).to(DEVICE)
    labels = torch.randint(0, c, (n,), generator=g).to(DEVICE)
    beta = [1.0] * c
    beta[3] = 0.25  # per-class beta
    east = EASTLoss(metric=metric, beta=beta if metric == "fbeta" else 1.0, num_classes=c)
    z32 = logits.bfloat16().float().requires_grad_()  # the same values in both precisions
    loss32 = east(z32, labels)
    loss32.backward()
    zbf = logits.bfloat16().requires_grad_()
    with torch.autocast(DEVICE, dtype=torch.bfloat16):
        lossbf = east(zbf, labels)
    lossbf.backward()
    assert torch.isfinite(zbf.grad.float()).all() and torch.isfinite(z32.grad).all()
    assert abs(loss32.item() - lossbf.item()) < 1e-6
    assert rel(zbf.grad.float(), z32.grad) < 1e-2  # bf16 gradients carry 8 bits of mantissa


# ---- the differentiable all-reduce ----------------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_differentiable_all_reduce_under_nccl_one_rank():
    """EASTTrainer all-reduces the (C, C) matrix with torch.distributed.nn.functional.all_reduce: at world size 1 the
    value and gradient are unchanged (two ranks need two GPUs; tests/test_distributed.py runs them with gloo)."""
    import torch.distributed as dist
    from torch.distributed.nn.functional import all_reduce

    store = dist.TCPStore("127.0.0.1", _free_port(), 1, is_master=True)
    device_id = torch.device("cuda", torch.cuda.current_device())
    dist.init_process_group("nccl", store=store, rank=0, world_size=1, device_id=device_id)
    try:
        g = torch.Generator().manual_seed(5)
        n, c = 256, 10
        logits = (torch.randn(n, c, generator=g) * 3).to(DEVICE)
        labels = torch.randint(0, c, (n,), generator=g).to(DEVICE)
        east = EASTLoss(num_classes=c)
        z1 = logits.clone().requires_grad_()
        loss1 = east.loss_from_confusion(all_reduce(east.confusion_matrix(z1, labels)))
        loss1.backward()
        z2 = logits.clone().requires_grad_()
        loss2 = east.loss_from_confusion(east.confusion_matrix(z2, labels))
        loss2.backward()
    finally:
        dist.destroy_process_group()
    assert abs(loss1.item() - loss2.item()) < 1e-6
    assert rel(z1.grad, z2.grad) < 1e-6


# ---- the Trainer on the device --------------------------------------------------------------------------------------
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


@pytest.mark.parametrize("loss", ["east", "ce"])
def test_one_trainer_epoch_in_bf16(loss, tmp_path):
    from east_hf import EASTConfig, EASTTrainer
    from east_hf.hf.models import create_image_model

    n, batch = 256, 32
    model = create_image_model("darknet19_tiny", num_labels=10)
    args = EASTConfig(
        output_dir=str(tmp_path),
        east_loss=loss,
        east_annealing=False,  # plain epochs (and no cross-entropy warm start)
        num_train_epochs=1,
        per_device_train_batch_size=batch,
        learning_rate=1e-3,
        bf16=True,
        eval_strategy="no",
        save_strategy="no",
        logging_strategy="no",
        report_to=[],
        disable_tqdm=True,
        seed=0,
    )
    out = EASTTrainer(model=model, args=args, train_dataset=RandomImages(n, 32, 10)).train()
    assert out.global_step == -(-n // batch), "a full epoch"
    assert out.training_loss == out.training_loss, "a finite training loss"


# ---- east-train end to end on the device ----------------------------------------------------------------------------
TOPICS = {
    "sport": "goal match team score coach league player ball".split(),
    "money": "bank price stock market loan profit trade cash".split(),
    "food": "bread soup apple cheese salad pasta spice cook".split(),
}
NOISE_WORDS = "the a of and today very new some big small".split()


def text_rows(seed: int, counts=(("sport", 200), ("money", 90), ("food", 50))) -> list[tuple[str, str]]:
    """Short imbalanced sentences: two words of the class's list among two to six shared noise words."""
    rng = random.Random(seed)
    rows = []
    for label, n in counts:
        for _ in range(n):
            words = rng.sample(TOPICS[label], 2) + rng.sample(NOISE_WORDS, rng.randint(2, 6))
            rng.shuffle(words)
            rows.append((" ".join(words), label))
    rng.shuffle(rows)
    return rows


def table(n: int, seed: int, labels: int, offsets):
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


def _text_run(precision: str):
    def plan(tmp: Path):
        import pandas as pd

        data = tmp / "texts.csv"
        pd.DataFrame(text_rows(0), columns=["text", "label"]).to_csv(data, index=False)
        argv = [REPO / "recipes" / "text_tiny_demo.yaml", "--dataset_name", data, "--num_train_epochs", 10,
                "--max_length", 32, "--save_total_limit", 1, "--tune_decision_rule", "true",
                f"--{precision}", "true"]  # fmt: skip
        return data, argv

    return plan


def _multilabel_run(tmp: Path):
    data = tmp / "tags.csv"
    frame = table(700, 2, 3, [-2.0, -0.7, 0.0]).rename(columns={"y0": "rare", "y1": "mid", "y2": "common"})
    frame.to_csv(data, index=False)
    return data, ["--dataset_name", data, "--label_columns", "rare,mid,common", "--model_name_or_path", "tabular_mlp",
                  "--num_train_epochs", 15, "--per_device_train_batch_size", 64, "--learning_rate", 0.01,
                  "--east_warm_start_epochs", 2, "--save_total_limit", 1, "--tune_decision_rule", "true",
                  "--bf16", "true"]  # fmt: skip


def _binary_table(tmp: Path) -> Path:
    data = tmp / "binary.csv"
    table(3000, 3, 1, [-2.2]).rename(columns={"y0": "label"}).to_csv(data, index=False)
    return data


def _binary_run(tmp: Path):
    """One rare class, F1 of the positive class: the binary default (the rate halved per temperature decrease), EMA."""
    data = _binary_table(tmp)
    return data, ["--dataset_name", data, "--label_column", "label", "--model_name_or_path", "tabular_mlp",
                  "--east_average", "binary", "--num_train_epochs", 30, "--per_device_train_batch_size", 64,
                  "--learning_rate", 0.01, "--lr_scheduler_type", "constant", "--east_warm_start_epochs", 2,
                  "--east_patience", 1, "--east_ema_decay", 0.95, "--logging_strategy", "epoch",
                  "--save_total_limit", 1, "--bf16", "true"]  # fmt: skip


def _ldam_run(tmp: Path):
    """LDAM-DRW: margins, the deferred re-weighting as a second stage."""
    data = _binary_table(tmp)
    return data, ["--dataset_name", data, "--label_column", "label", "--model_name_or_path", "tabular_mlp",
                  "--east_loss", "ldam", "--east_average", "binary", "--num_train_epochs", 20,
                  "--per_device_train_batch_size", 64, "--learning_rate", 0.01, "--save_total_limit", 1,
                  "--tune_decision_rule", "true", "--bf16", "true"]  # fmt: skip


# name -> (the test score that says it learned: chance is far below, the run's data and arguments)
RUNS = {
    "text_bf16": (0.5, _text_run("bf16")),
    "text_fp16": (0.5, _text_run("fp16")),
    "multilabel_bf16": (0.6, _multilabel_run),
    "binary_bf16": (0.5, _binary_run),
    "ldam_bf16": (0.4, _ldam_run),
}


@pytest.mark.parametrize("name", list(RUNS))
def test_east_train_end_to_end_on_the_device(name, tmp_path, monkeypatch):
    """Trained by east-train on the device, saved, reloaded with Predictor on the device and on the CPU (the same
    labels and probabilities on 200 rows) and scored on its test split above a floor."""
    import pandas as pd

    from east_hf import Predictor
    from east_hf.scripts.east_train import main

    monkeypatch.setenv("EAST_HF_CACHE", str(tmp_path / "cache"))
    floor, plan = RUNS[name]
    data, argv = plan(tmp_path)
    out = tmp_path / name
    argv = [str(a) for a in argv] + ["--output_dir", str(out), "--report_to", "none", "--disable_tqdm", "true"]
    assert main(argv) == 0

    state = json.loads((out / "trainer_state.json").read_text())
    logs = state["log_history"]
    assert all(v == v and abs(v) != float("inf") for e in logs for k, v in e.items() if k.endswith("loss"))
    frame = pd.read_csv(data)
    inputs = frame["text"].head(200).tolist() if name.startswith("text") else frame.head(200)
    on_device = Predictor(out, device=DEVICE).predict(inputs, probabilities=True)
    on_cpu = Predictor(out, device="cpu").predict(inputs, probabilities=True)
    cols = [c for c in on_device.columns if c.startswith("probability_")]
    assert (on_device["predicted_label"] == on_cpu["predicted_label"]).mean() >= 0.99
    assert (on_device[cols] - on_cpu[cols]).abs().to_numpy().max() < 1e-3
    score = json.loads((out / "test_results.json").read_text()).get("test_fbeta")
    assert score is not None and score > floor, f"test F1 {score} at or below {floor}: nothing learned"
    if name == "binary_bf16":  # the rate halves at each temperature decrease, and the factor is saved
        callback = state.get("stateful_callbacks", {}).get("TemperatureAnnealingCallback", {}).get("attributes", {})
        stage = callback.get("schedule_state", {}).get("stage") or 0
        assert callback.get("lr_scale") == 0.5 ** max(stage, 0)
        assert stage >= 1 and 0.005 in {round(e["learning_rate"], 8) for e in logs if "learning_rate" in e}


# ---- torch.compile (opt-in) -----------------------------------------------------------------------------------------
@pytest.mark.skipif(
    os.environ.get("EAST_GPU_COMPILE") != "1", reason="opt-in: EAST_GPU_COMPILE=1 (compiles for minutes)"
)
@pytest.mark.parametrize(("n", "c"), [(256, 10), (8192, 1000)])
def test_torch_compile_gradients_match_eager(n, c):
    """torch.compile of the module (graph breaks at the label checks' host reads) and of the fused core without the
    checks give eager's gradient (torch 2.11's Dynamo returned zeros through the fused Function; 2.14 does not)."""
    from east_hf.core.fused import soft_confusion_from_logits

    gen = torch.Generator().manual_seed(0)
    logits = (torch.randn(n, c, generator=gen) * 3.0).to(DEVICE)
    labels = torch.randint(0, c, (n,), generator=gen).to(DEVICE)
    east = EASTLoss(num_classes=c)

    def core(z, y):
        return east.loss_from_confusion(soft_confusion_from_logits(z, y, None, east.temperature, True))

    torch._dynamo.reset()
    grads = {}
    for name, fn in {"eager": east, "module": torch.compile(east, dynamic=False),
                     "core": torch.compile(core, dynamic=False)}.items():  # fmt: skip
        z = logits.clone().requires_grad_()
        fn(z, labels).backward()
        grads[name] = z.grad
    assert rel(grads["module"], grads["eager"]) < 1e-4
    assert rel(grads["core"], grads["eager"]) < 1e-4


def _torchrun_fsdp_check(mode: str, tmp_path: Path):
    import shutil
    import subprocess

    torchrun = shutil.which("torchrun", path=os.path.dirname(sys.executable)) or shutil.which("torchrun")
    out = tmp_path / f"{mode}.json"
    gpus = str(min(torch.cuda.device_count(), 2))
    env = {**os.environ, "EAST_DIST_CHECK_GPU": "1", "PYTHONPATH": os.pathsep.join([str(REPO / "tests"), str(REPO)])}
    proc = subprocess.run(
        [torchrun, "--standalone", "--nproc_per_node", gpus, str(REPO / "tests" / "dist_fsdp_check.py"), mode,
         str(out)],
        env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    return proc, (json.loads(out.read_text()) if out.is_file() else None)


def test_fsdp2_anneals_as_ddp_and_fsdp1_with_the_stage_copies_is_refused(tmp_path):
    proc, _ = _torchrun_fsdp_check("fsdp1", tmp_path)
    assert proc.returncode != 0 and "east_restore_best_per_stage" in proc.stderr and "FSDP" in proc.stderr
    proc, fsdp = _torchrun_fsdp_check("fsdp", tmp_path)  # FSDP2: each process keeps its shard of the stage's best
    assert proc.returncode == 0, proc.stderr[-3000:]
    proc, ddp = _torchrun_fsdp_check("ddp", tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "FSDP" in fsdp["wrapper"] or "FullyShard" in fsdp["wrapper"]  # sharded for real on GPUs
    assert fsdp["stage"] == ddp["stage"] >= 1
    assert fsdp["metrics"] == pytest.approx(ddp["metrics"], abs=1e-4)
