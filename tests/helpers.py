"""Tiny models, data sets, trainers and file writers shared by the tests (CPU, offline, seconds)."""

from __future__ import annotations

import copy
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch
from torch import nn
from transformers import TrainerCallback

from east_hf import accuracy, fbeta, hard_confusion_matrix


class TinyImages(torch.utils.data.Dataset):
    """Learnable synthetic images: the class is which of the 3 channels is brightest. (3, size, size) floats."""

    def __init__(self, n: int = 64, size: int = 16, num_classes: int = 3, seed: int = 0, imbalance: bool = False):
        g = torch.Generator().manual_seed(seed)
        weights = torch.tensor([0.6, 0.3, 0.1][:num_classes]) if imbalance else torch.ones(num_classes)
        self.labels = torch.multinomial(weights, n, replacement=True, generator=g)
        self.images = torch.randn(n, 3, size, size, generator=g) * 0.5
        self.images[torch.arange(n), self.labels % 3] += 1.0

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return {"pixel_values": self.images[i], "labels": self.labels[i]}


class TinyTabular(torch.utils.data.Dataset):
    """Linearly separable-ish 3-class tabular data. input_values: (d,) floats.

    The class map is drawn from ``seed`` unless ``map_seed`` fixes it (then sets of several seeds share one task);
    ``noise`` adds Gaussian noise of that scale to the class scores before the argmax.
    """

    def __init__(
        self,
        n: int = 96,
        d: int = 6,
        num_classes: int = 3,
        seed: int = 0,
        noise: float = 0.0,
        map_seed: int | None = None,
    ):
        g = torch.Generator().manual_seed(seed)
        self.x = torch.randn(n, d, generator=g)
        w = torch.randn(d, num_classes, generator=g if map_seed is None else torch.Generator().manual_seed(map_seed))
        scores = self.x @ w
        if noise:
            scores = scores + noise * torch.randn(n, num_classes, generator=g)
        self.y = scores.argmax(1)

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return {"input_values": self.x[i], "labels": self.y[i]}


class IgnoredRows(TinyTabular):
    """A TinyTabular whose rows ``rows`` are labelled -100 (ignored)."""

    def __init__(self, rows: slice, **kwargs):
        super().__init__(**kwargs)
        self.y[rows] = -100


class PlainClassifier(nn.Module):
    """A plain nn.Module that returns a logits tensor (no config, no .logits)."""

    def __init__(self, d: int = 6, num_classes: int = 3):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d, 16), nn.ReLU(), nn.Linear(16, num_classes))

    def forward(self, input_values):
        return self.net(input_values)


def tiny_vit(num_labels: int = 3, size: int = 16):
    from transformers import ViTConfig, ViTForImageClassification

    config = ViTConfig(
        image_size=size,
        patch_size=8,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=37,
        num_labels=num_labels,
        id2label={i: name for i, name in enumerate(["cat", "dog", "frog"][:num_labels])},
        label2id={name: i for i, name in enumerate(["cat", "dog", "frog"][:num_labels])},
    )
    return ViTForImageClassification(config)


def tiny_timm(num_labels: int = 3):
    from transformers import TimmWrapperConfig, TimmWrapperForImageClassification

    return TimmWrapperForImageClassification(TimmWrapperConfig(architecture="test_resnet", num_labels=num_labels))


def east_args(tmp_path, **overrides):
    from east_hf import EASTConfig

    defaults = dict(
        output_dir=str(tmp_path),
        use_cpu=True,
        report_to=[],
        per_device_train_batch_size=16,
        per_device_eval_batch_size=16,
        learning_rate=1e-2,
        max_steps=10,
        logging_strategy="steps",  # TrainingArguments' step-based defaults: these tests count steps, not epochs
        logging_steps=5,
        eval_strategy="no",
        save_strategy="no",
        load_best_model_at_end=False,
        east_annealing=False,
        seed=0,
        disable_tqdm=True,
        dataloader_num_workers=0,
    )
    defaults.update(overrides)
    return EASTConfig(**defaults)


# ---- the annealing inside EASTTrainer: a tiny MLP on one noisy task, evaluated every 2 steps ----
def blobs(n: int, seed: int) -> TinyTabular:
    """3 classes from a fixed random linear map (the same for every seed) plus noise. input_values: (6,)."""
    return TinyTabular(n, seed=seed, noise=0.5, map_seed=123)


def hard_metrics(pred):
    cm = hard_confusion_matrix(torch.as_tensor(pred.predictions), torch.as_tensor(pred.label_ids))
    return {"fbeta": fbeta(cm).item(), "accuracy": accuracy(cm).item()}


def annealing_trainer(output_dir, callbacks=None, model=None, **overrides):
    """An EASTTrainer that anneals: PlainClassifier on blobs(64, 0), evaluated on blobs(48, 1) every 2 steps, a
    checkpoint at each evaluation, annealing EAST alone without a warm start (the warm-start and mix tests ask for
    theirs; with a weight, the plain cross-entropy unless a test asks for another)."""
    from east_hf.hf.training.trainer import EASTTrainer

    kwargs = dict(
        learning_rate=0.05,
        per_device_eval_batch_size=64,
        max_steps=300,
        logging_steps=2,
        eval_strategy="steps",
        eval_steps=2,
        save_strategy="epoch",  # EASTConfig's default: the checkpoints follow the evaluations
        save_steps=2,
        save_total_limit=None,  # the resume tests read earlier checkpoints
        load_best_model_at_end=True,
        metric_for_best_model="fbeta",
        east_annealing=True,
        east_decay=0.5,
        east_patience=2,
        east_stage_patience=3,
        east_min_temperature=0.01,
        east_warm_start="none",
        east_ce_weight=0.0,
        east_ce_loss="ce",
    )
    kwargs.update(overrides)
    torch.manual_seed(0)
    return EASTTrainer(
        model=PlainClassifier() if model is None else model,
        args=east_args(output_dir, **kwargs),
        train_dataset=blobs(64, 0),
        eval_dataset=blobs(48, 1),
        compute_metrics=hard_metrics,
        callbacks=callbacks,
    )


def annealer(trainer):
    """The trainer's TemperatureAnnealingCallback."""
    from east_hf.hf.training.callbacks import TemperatureAnnealingCallback

    (callback,) = [c for c in trainer.callback_handler.callbacks if isinstance(c, TemperatureAnnealingCallback)]
    return callback


def evaluations(trainer):
    return [h for h in trainer.state.log_history if "eval_loss" in h]


# ---- scikit-learn references ----
def sk_prf(y, p, beta, average, labels=None, pos_label=1, zero_division=0.0, sample_weight=None):
    """scikit-learn's averaged precision, recall and F-beta; per-class beta written out from its per-class values."""
    from sklearn.metrics import precision_recall_fscore_support

    if average == "binary":
        labels = None
    else:
        pos_label = 1  # scikit-learn warns about a pos_label it ignores
    if np.isscalar(beta):
        out = precision_recall_fscore_support(
            y, p, beta=beta, average=average, labels=labels, pos_label=pos_label,
            zero_division=zero_division, sample_weight=sample_weight,
        )  # fmt: skip
        return out[:3]
    scored = labels if labels is not None else sorted(set(y) | set(p))
    prec, rec, _, support = precision_recall_fscore_support(
        y, p, labels=scored, average=None, zero_division=zero_division, sample_weight=sample_weight
    )
    f = np.array([
        precision_recall_fscore_support(
            y, p, beta=b, labels=scored, average=None, zero_division=zero_division, sample_weight=sample_weight
        )[2][k]
        for k, b in enumerate(beta)
    ])  # fmt: skip
    if average == "binary":
        k = scored.index(pos_label)
        return prec[k], rec[k], f[k]
    w = support if average == "weighted" and support.sum() > 0 else np.ones_like(support)
    return tuple(np.average(v, weights=w) for v in (prec, rec, f))


# ---- files ----
def write_text(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def write_csv(path: Path, header: str, rows) -> Path:
    path.write_text(header + "\n" + "".join(r + "\n" for r in rows))
    return path


# ---- command lines ----
def cli_args(**flags) -> list[str]:
    """``--name value`` for each flag whose value is not None, as strings: a command's argv."""
    return [str(x) for name, value in flags.items() if value is not None for x in (f"--{name}", value)]


def one_line_error(capsys, main, argv) -> str:
    """Run a command's ``main(argv)``; expect exit status 2 and a last stderr line ``<prog>: error: ...``;
    return it."""
    import pytest

    with pytest.raises(SystemExit) as exc:
        main([str(a) for a in argv])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert ": error: " in err, err
    return err


def east_train_error(capsys, argv, only_line: bool = False) -> str:
    """Run east-train's ``main(argv)``; expect exit status 2 and a last stderr line ``east-train: error: ...`` (with
    ``only_line``, the only line on stderr); return it."""
    import pytest

    from east_hf.scripts.east_train import main

    with pytest.raises(SystemExit) as exc:
        main([str(a) for a in argv])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    if only_line:
        assert err.startswith("east-train: error: ") and "\n" not in err, err
        return err
    err = err.splitlines()[-1]
    assert err.startswith("east-train: error: "), err
    return err


def east_predict_error(capsys, argv) -> str:
    """The one line east-predict ends with (exit status 2)."""
    from east_hf.scripts.east_predict import main

    err = one_line_error(capsys, main, argv)
    assert err.startswith("east-predict: error: "), err
    return err


def tiny_run_flags(out, **more) -> list[str]:
    """east-train flags for 4 steps into ``out``, evaluated and checkpointed every 2 steps (a tiny MLP for a tabular
    recipe), on the CPU, without a card; ``more`` adds or overrides flags (None leaves one out)."""
    overrides = {
        "output_dir": out,
        "max_steps": 4,
        "eval_strategy": "steps",
        "eval_steps": 2,
        "save_steps": 2,
        "hidden_sizes": 16,
        "disable_tqdm": "true",
        "use_cpu": "true",
        "model_card": "false",
        "report_to": "none",
        **more,
    }
    return [str(x) for k, v in overrides.items() if v is not None for x in (f"--{k}", v)]


def two_step_flags(out, **more) -> list[str]:
    """east-train flags for 2 steps into ``out`` on capped splits (64 training, 32 validation and 32 test rows), on the
    CPU, without a card; ``more`` adds or overrides flags (None leaves one out)."""
    overrides = {
        "output_dir": out,
        "max_steps": 2,
        "eval_strategy": "steps",
        "eval_steps": 2,
        "max_train_samples": 64,
        "max_eval_samples": 32,
        "max_test_samples": 32,
        "disable_tqdm": "true",
        "use_cpu": "true",
        "model_card": "false",
        **more,
    }
    return [str(x) for k, v in overrides.items() if v is not None for x in (f"--{k}", v)]


# ---- an east-train run in its own process, interrupted or killed by a test ----
_TABULAR = Path(__file__).resolve().parents[1] / "recipes" / "breast_cancer_imbalanced_f1.yaml"
_RUN_EAST_TRAIN = """
import signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)  # Ctrl-C at a terminal: a background child ignores SIGINT
from east_hf.scripts.east_train import main
sys.exit(main(sys.argv[1:]))
"""


def long_run_argv(out) -> list[str]:
    """The bundled tabular recipe for far more steps than a test waits for: a checkpoint every 2 steps."""
    return [str(_TABULAR), *tiny_run_flags(out, max_steps=100_000, east_annealing="false")]


def start_east_train(argv: list[str], log: Path) -> subprocess.Popen:
    """east-train in its own process; its stderr goes to ``log``."""
    with open(log, "w") as err:
        return subprocess.Popen(
            [sys.executable, "-c", _RUN_EAST_TRAIN, *argv], stdout=subprocess.DEVNULL, stderr=err, env=dict(os.environ)
        )


def first_checkpoint(out: Path, run: subprocess.Popen, log: Path) -> Path:
    """Wait for ``run`` to save a complete checkpoint into ``out``; return it."""
    import time

    from east_hf.hf.training.checkpoints import complete_checkpoints

    deadline = time.monotonic() + 300
    while not complete_checkpoints(out):
        assert run.poll() is None, log.read_text()[-2000:]
        assert time.monotonic() < deadline, "no checkpoint within 300 s"
        time.sleep(0.2)
    return complete_checkpoints(out)[-1]


_BLOCK_EAST_HF = """
import sys
class _BlockEastHf:
    def find_spec(self, name, path=None, target=None):
        if name == "east_hf" or name.startswith("east_hf."):
            raise ImportError("east_hf is blocked")
sys.meta_path.insert(0, _BlockEastHf())
"""


def run_without_east_hf(script: str, tmp_path: Path, *args: str, timeout: int = 180) -> subprocess.CompletedProcess:
    """Run ``script`` (``sys`` imported, ``args`` in ``sys.argv[1:]``) in a fresh Python where importing east_hf raises
    ImportError (a ``sys.meta_path`` finder in place before the script's first line): what a user without east_hf
    installed gets. transformers' and evaluate's caches of module code go under ``tmp_path``."""
    env = {**os.environ, "HF_MODULES_CACHE": str(tmp_path / "modules"), "HF_HUB_OFFLINE": "1"}
    return subprocess.run(
        [sys.executable, "-c", _BLOCK_EAST_HF + script, *map(str, args)],
        stdin=subprocess.DEVNULL,  # transformers asks on stdin before running a folder's code: no one answers
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def loss_spy():
    """A callback that records, at every optimizer step, the stage and the cross-entropy weight of the loss in use
    (set its ``trainer`` after building the trainer)."""
    from transformers import TrainerCallback

    class LossSpy(TrainerCallback):
        """Records, at every optimizer step, the stage and the cross-entropy weight of the loss in use."""

        def __init__(self):
            self.trainer, self.weights = None, []

        def on_pre_optimizer_step(self, args, state, control, **kwargs):
            loss = self.trainer._current_loss()
            self.weights.append((self.trainer.east_stage, getattr(loss, "weight", None)))

    return LossSpy()


def run_two_processes(script: Path, *args) -> subprocess.CompletedProcess:
    """``torchrun --standalone --nproc_per_node 2 script args`` on the CPU (gloo, one thread each), with tests/ and the
    repository on the path; its return code, stdout and stderr. (``accelerate launch --cpu --num_processes 2`` runs
    one process on these machines; torchrun does not.)"""
    torchrun = shutil.which("torchrun", path=os.path.dirname(sys.executable)) or shutil.which("torchrun")
    here = Path(__file__).parent
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join([str(here), str(here.parent)])}
    command = [torchrun, "--standalone", "--nproc_per_node", "2", str(script), *map(str, args)]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)


class WeightsSpy(TrainerCallback):
    """A trainer callback (set its ``trainer``) that records the loss in use and the weights each optimizer step
    starts from, and the weights of each evaluation."""

    def __init__(self):
        self.trainer, self.steps, self.evaluated, self.model_at_eval = None, {}, {}, {}

    def on_pre_optimizer_step(self, args, state, control, model=None, **kwargs):
        # the weights this step started from (global_step counts the steps done before it)
        self.steps[state.global_step] = (self.trainer.use_cross_entropy, model.state_dict()["net.0.weight"].clone())

    def on_evaluate(self, args, state, control, model=None, **kwargs):
        self.evaluated[state.global_step] = model.state_dict()["net.0.weight"].clone()
        self.model_at_eval[state.global_step] = copy.deepcopy(model)
