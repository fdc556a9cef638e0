"""EASTTrainer: learning, whole-set eval_loss, gradient accumulation, mixed precision, errors, and annealing runs."""

import copy
import json
import logging
import re

import pytest
import torch
from helpers import (
    PlainClassifier,
    TinyImages,
    TinyTabular,
    annealer,
    annealing_trainer,
    blobs,
    east_args,
    evaluations,
    hard_metrics,
    tiny_timm,
    tiny_vit,
)
from transformers import EarlyStoppingCallback, TrainerCallback

import east_hf
from east_hf import EASTLoss, EASTTrainer
from east_hf.core.annealing import AnnealingSchedule, Decision
from east_hf.hf.callbacks import STAGE_BEST_WEIGHTS_NAME, TemperatureAnnealingCallback
from east_hf.hf.build import anneal_threshold, needs_class_counts
from east_hf.hf.config import EASTConfig

pytestmark = pytest.mark.usefixtures("one_thread")


def _surrogate(model, dataset, loss_fn, key="pixel_values"):
    model.eval()
    with torch.no_grad():
        x = torch.stack([dataset[i][key] for i in range(len(dataset))])
        y = torch.stack([dataset[i]["labels"] for i in range(len(dataset))])
        out = model(**{key: x})
        return loss_fn(east_hf.hf.trainer.logits_of(out), y).item()


@pytest.mark.parametrize("make_model", [tiny_vit, tiny_timm], ids=["vit", "timm"])
def test_trainer_learns_on_image_models(tmp_path, make_model):
    torch.manual_seed(0)
    model, data = make_model(), TinyImages(64)
    before_params = copy.deepcopy(model.state_dict())
    trainer = EASTTrainer(model=model, args=east_args(tmp_path, max_steps=24, learning_rate=5e-3), train_dataset=data)
    before = _surrogate(model, data, trainer.east_loss)
    trainer.train()
    after = _surrogate(model, data, trainer.east_loss)
    changed = [
        k for k, v in model.state_dict().items() if v.is_floating_point() and not torch.equal(v, before_params[k])
    ]
    assert changed, "no parameter changed"
    assert after < before - 0.05, (before, after)
    logs = [entry for entry in trainer.state.log_history if "loss" in entry]
    assert logs and "east_temperature" in logs[0] and "east_soft_fbeta" in logs[0]


def test_plain_module_and_eval_loss_is_whole_set_surrogate(tmp_path):
    torch.manual_seed(0)
    model, train, evald = PlainClassifier(), TinyTabular(64), TinyTabular(45, seed=1)
    args = east_args(tmp_path, max_steps=3, per_device_eval_batch_size=8)  # 45 = 5 batches of 8 + one of 5
    trainer = EASTTrainer(model=model, args=args, train_dataset=train, eval_dataset=evald)
    trainer.train()
    metrics = trainer.evaluate()
    model.eval()
    with torch.no_grad():
        logits = model(evald.x)
    whole = trainer.east_loss(logits, evald.y).item()
    per_batch = [trainer.east_loss(logits[i : i + 8], evald.y[i : i + 8]).item() for i in range(0, 45, 8)]
    mean_of_batches = sum(per_batch) / len(per_batch)
    assert metrics["eval_loss"] == pytest.approx(whole, abs=1e-5)
    assert abs(whole - mean_of_batches) > 1e-3  # a mean of batch surrogates is a different quantity


def test_gradient_accumulation_is_mean_of_micro_batch_gradients(tmp_path):
    """k = 2 micro-batches give (grad L(B1) + grad L(B2)) / 2, not grad L(B1 u B2): the metric is not additive."""
    torch.manual_seed(0)
    data = TinyTabular(32)
    model = PlainClassifier()
    trainer = EASTTrainer(model=model, args=east_args(tmp_path, gradient_accumulation_steps=2), train_dataset=data)
    trainer.current_gradient_accumulation_steps = 2
    b1 = {"input_values": data.x[:16], "labels": data.y[:16]}
    b2 = {"input_values": data.x[16:], "labels": data.y[16:]}
    model.zero_grad()
    trainer.training_step(model, b1)
    trainer.training_step(model, b2)
    accumulated = [p.grad.clone() for p in model.parameters()]

    def grads(batch):
        model.zero_grad()
        trainer.east_loss(model(batch["input_values"]), batch["labels"]).backward()
        return [p.grad.clone() for p in model.parameters()]

    g1, g2 = grads(b1), grads(b2)
    union = grads({"input_values": data.x, "labels": data.y})
    for a, x, y in zip(accumulated, g1, g2):
        torch.testing.assert_close(a, (x + y) / 2, atol=1e-6, rtol=1e-5)
    assert any(not torch.allclose(a, u, atol=1e-4) for a, u in zip(accumulated, union))


def test_bf16_autocast_matches_fp32(tmp_path):
    """bf16 autocast on CPU: the surrogate itself stays float32; only the model's bf16 matmuls differ (|d| < 0.03)."""
    torch.manual_seed(0)
    model, data = tiny_vit(), TinyImages(32)
    trainer = EASTTrainer(model=model, args=east_args(tmp_path, bf16=True), train_dataset=data)
    batch = {"pixel_values": data.images, "labels": data.labels}
    with torch.no_grad():
        fp32 = trainer.compute_loss(model, batch)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            bf16 = trainer.compute_loss(model, batch)
    assert bf16.dtype == torch.float32
    assert bf16.item() == pytest.approx(fp32.item(), abs=0.03)
    trainer.train()  # a whole bf16 run completes with finite losses
    assert all(torch.isfinite(torch.tensor(e["loss"])) for e in trainer.state.log_history if "loss" in e)


def test_baseline_losses_run(tmp_path):
    from east_hf.core.loss import build_loss
    from east_hf.hf.trainer import training_class_counts

    data = TinyTabular(32)
    counts = training_class_counts(data, None)
    assert sum(counts) == 32 and counts == torch.bincount(data.y).tolist()
    for loss in ("ce", "wce", "la", "dice"):
        model = PlainClassifier()
        trainer = EASTTrainer(model=model, args=east_args(tmp_path, east_loss=loss, max_steps=2), train_dataset=data)
        assert trainer.east_loss.name == loss
        with torch.no_grad():  # the trainer's loss is the baseline built from the training split's class counts
            logits = model(data.x)
        expected = build_loss(loss, class_counts=counts)(logits, data.y)
        assert trainer.compute_loss(model, {"input_values": data.x, "labels": data.y}).item() == pytest.approx(
            expected.item(), rel=1e-6
        )
        trainer.train()
        assert trainer.use_cross_entropy == (loss == "ce")


class _NoLabels(TinyTabular):
    def __getitem__(self, i):
        return {"input_values": self.x[i]}


def test_bad_input_fails_before_any_step(tmp_path):
    with pytest.raises(ValueError, match="'labels' column"):
        EASTTrainer(model=PlainClassifier(), args=east_args(tmp_path), train_dataset=_NoLabels(8)).train()
    trainer = EASTTrainer(
        model=tiny_vit(num_labels=3), args=east_args(tmp_path), train_dataset=TinyImages(8, num_classes=3)
    )
    trainer.model.classifier = torch.nn.Linear(32, 5)  # a head that no longer matches config.num_labels = 3
    with pytest.raises(ValueError, match=r"logits of shape \(N, 3\).*got \(2, 5\)"):
        trainer.train()
    assert trainer.state.global_step == 0
    with pytest.raises(ValueError, match="class names.*got 'horse'"):
        EASTTrainer(
            model=tiny_vit(), args=east_args(tmp_path, east_beta='{"horse": 0.25}'), train_dataset=TinyImages(8)
        )
    with pytest.raises(TypeError, match="EASTConfig"):
        from transformers import TrainingArguments

        EASTTrainer(model=PlainClassifier(), args=TrainingArguments(output_dir=str(tmp_path)))


def test_beta_mapping_resolves_through_id2label(tmp_path):
    trainer = EASTTrainer(
        model=tiny_vit(), args=east_args(tmp_path, east_beta='{"dog": 0.25}'), train_dataset=TinyImages(8)
    )
    assert trainer.east_loss.beta == [1.0, 0.25, 1.0]


class _TabularFeatures(TinyTabular):
    def __getitem__(self, i):
        return {"input_features": self.x[i], "labels": self.y[i]}


def _darknet():
    from east_hf.hf.models import create_image_model

    return create_image_model("darknet19_tiny", num_labels=3, id2label={0: "cat", 1: "dog", 2: "frog"})


def _tabular():
    from east_hf.hf.models import TabularMLPConfig, TabularMLPForClassification

    return TabularMLPForClassification(TabularMLPConfig(num_features=6, num_labels=3, hidden_sizes=(16, 8)))


@pytest.mark.parametrize(
    "make_model, data",
    [
        (_darknet, lambda: TinyImages(8, size=32)),
        (_tabular, lambda: _TabularFeatures(16)),
        (tiny_timm, lambda: TinyImages(8)),
    ],
    ids=["darknet19_tiny", "tabular_mlp", "timm_test_resnet"],
)
def test_one_east_step_for_each_model_family(tmp_path, make_model, data):
    model = make_model()
    before = [p.detach().clone() for p in model.parameters()]
    trainer = EASTTrainer(
        model=model, args=east_args(tmp_path, max_steps=1, per_device_train_batch_size=8), train_dataset=data()
    )
    trainer.train()
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))
    assert torch.isfinite(torch.tensor(trainer.state.log_history[-1]["train_loss"]))


def test_saving_draws_no_progress_bar_and_leaves_bars_on(tmp_path, capfd):
    """save_pretrained's "Writing model shards" bar (one per checkpoint and final save) is switched off while saving,
    and transformers' progress bars are on again afterwards."""
    from transformers.utils import logging as hf_logging

    from east_hf.hf.models import TabularMLPConfig, TabularMLPForClassification

    model = TabularMLPForClassification(TabularMLPConfig(num_features=4, hidden_sizes=[4], num_labels=2))
    trainer = EASTTrainer(model=model, args=east_args(tmp_path))
    assert hf_logging.is_progress_bar_enabled()
    capfd.readouterr()
    trainer.save_model(str(tmp_path / "saved"))
    assert (tmp_path / "saved" / "model.safetensors").is_file()
    assert "Writing model shards" not in capfd.readouterr().err
    assert hf_logging.is_progress_bar_enabled()
    model.save_pretrained(tmp_path / "direct")  # the bar still shows outside the Trainer's saves
    assert "Writing model shards" in capfd.readouterr().err


# ---- the annealing inside EASTTrainer: a tiny MLP on CPU, evaluated every 2 steps ----
def test_trainer_cools_down_and_stops_on_the_annealing_criterion(tmp_path):
    trainer = annealing_trainer(tmp_path)
    trainer.train()
    schedule = annealer(trainer).schedule
    assert schedule.finished and trainer.state.global_step < trainer.args.max_steps
    evals = evaluations(trainer)
    assert evals[-1]["step"] == trainer.state.global_step  # the last evaluation stopped training
    temperatures = [h["east_temperature"] for h in evals]
    assert temperatures == sorted(temperatures, reverse=True) and len(set(temperatures)) >= 3
    assert all(h["east_temperature"] == 0.2 * 0.5 ** h["east_stage"] for h in evals)
    assert all("eval_east_temperature" not in h for h in evals)  # temperature and stage are logged once
    data = trainer.eval_dataset  # eval_loss is the whole-set surrogate at the logged temperature
    with torch.no_grad():
        logits = trainer.model(data.x)
    whole = EASTLoss(temperature=trainer.east_temperature)(logits, data.y).item()
    assert trainer.evaluate()["eval_loss"] == pytest.approx(whole, rel=1e-5)
    train_logs = [h for h in trainer.state.log_history if "loss" in h]
    assert {h["east_temperature"] for h in train_logs} == set(temperatures)
    assert max(h["eval_fbeta"] for h in evals) > evals[0]["eval_fbeta"] + 0.2  # it learned
    # load_best_model_at_end kept the best evaluated weights, although stages restored others after evaluating
    assert trainer.evaluate()["eval_fbeta"] == trainer.state.best_metric == max(h["eval_fbeta"] for h in evals)


def test_trainer_resumed_mid_stage_2_follows_the_uninterrupted_run(tmp_path):
    trainer = annealing_trainer(tmp_path)
    trainer.train()
    reference = [(h["step"], h["east_stage"], h["east_temperature"], h["eval_loss"]) for h in evaluations(trainer)]

    def callback_state(step):
        with open(tmp_path / f"checkpoint-{step}" / "trainer_state.json") as f:
            return json.load(f)["stateful_callbacks"]["TemperatureAnnealingCallback"]["attributes"]["schedule_state"]

    # The last checkpoint of stage 2: its stage best is an earlier step, restored from east_stage_best.pt at the end.
    step = max(s for s, stage, _, _ in reference if stage == 2 and callback_state(s)["stage"] == 2)
    assert callback_state(step)["stage_best_step"] < step
    assert (tmp_path / f"checkpoint-{step}" / STAGE_BEST_WEIGHTS_NAME).is_file()

    resumed = annealing_trainer(tmp_path)
    resumed.train(resume_from_checkpoint=str(tmp_path / f"checkpoint-{step}"))
    again = [(h["step"], h["east_stage"], h["east_temperature"], h["eval_loss"]) for h in evaluations(resumed)]
    assert [r[:3] for r in again] == [r[:3] for r in reference]
    assert [r[3] for r in again] == pytest.approx([r[3] for r in reference], abs=1e-6)
    assert resumed.state.global_step == trainer.state.global_step


class Spy(TrainerCallback):
    """Records the loss in use and the weights each optimizer step starts from, and the weights of each evaluation."""

    def __init__(self):
        self.trainer, self.steps, self.evaluated, self.model_at_eval = None, {}, {}, {}

    def on_pre_optimizer_step(self, args, state, control, model=None, **kwargs):
        # the weights this step started from (global_step counts the steps done before it)
        self.steps[state.global_step] = (self.trainer.use_cross_entropy, model.state_dict()["net.0.weight"].clone())

    def on_evaluate(self, args, state, control, model=None, **kwargs):
        self.evaluated[state.global_step] = model.state_dict()["net.0.weight"].clone()
        self.model_at_eval[state.global_step] = copy.deepcopy(model)


def test_trainer_warm_start_trains_with_cross_entropy_and_hands_its_best_weights_to_east(tmp_path):
    spy = Spy()
    trainer = annealing_trainer(
        tmp_path,
        callbacks=[spy],
        east_warm_start="ce",
        east_warm_start_epochs=-1,  # until its own early stopping
        save_strategy="no",
        load_best_model_at_end=False,
        max_steps=60,
    )
    spy.trainer = trainer
    trainer.train()
    evals = evaluations(trainer)
    warm = [h for h in evals if h["east_stage"] == -1]
    end = warm[-1]["step"]  # the evaluation that ended the warm start
    assert evals[len(warm)]["east_stage"] == 0 and warm[0]["east_temperature"] == 0.2  # the warm start is at T0
    with torch.no_grad():  # during the warm start eval_loss is the cross-entropy of the whole set
        logits = spy.model_at_eval[warm[0]["step"]](trainer.eval_dataset.x)
        first = torch.nn.functional.cross_entropy(logits, trainer.eval_dataset.y)
    assert warm[0]["eval_loss"] == pytest.approx(first.item(), rel=1e-5)
    assert all(use_ce == (step < end) for step, (use_ce, _) in spy.steps.items())
    best = min(warm, key=lambda h: h["eval_loss"])["step"]
    assert best < end
    assert torch.equal(spy.steps[end][1], spy.evaluated[best])  # EAST's first step starts from the CE best
    assert not torch.equal(spy.steps[end][1], spy.evaluated[end])
    train_logs = [h for h in trainer.state.log_history if "loss" in h]
    assert all(("east_soft_fbeta" in h) == (h["east_stage"] >= 0) for h in train_logs)


def test_trainer_default_warm_start_lasts_two_epochs_of_optimiser_steps(tmp_path):
    # 64 training samples, batch 8, accumulation 2: 8 batches = 4 optimiser steps per epoch -> 8 steps of CE
    spy = Spy()
    trainer = annealing_trainer(
        tmp_path,
        callbacks=[spy],
        east_warm_start="ce",  # with the default east_warm_start_epochs=2.0
        per_device_train_batch_size=8,
        gradient_accumulation_steps=2,
        save_strategy="no",
        load_best_model_at_end=False,
        eval_steps=3,
        max_steps=14,
    )
    spy.trainer = trainer
    trainer.train()
    callback = next(c for c in trainer.callback_handler.callbacks if isinstance(c, TemperatureAnnealingCallback))
    assert callback.schedule.warm_start_steps == 8
    assert [step for step, (use_ce, _) in spy.steps.items() if use_ce] == list(range(8))
    stages = {h["step"]: h["east_stage"] for h in evaluations(trainer)}
    assert stages[8] == -1 and stages[9] == 0  # the warm start ends with an evaluation on its last step


def test_trainer_warm_start_ending_on_an_epoch_end_is_evaluated_once(tmp_path):
    # eval_strategy="epoch": the warm start's last step is an epoch's last step, evaluated once, by the epoch's end
    trainer = annealing_trainer(
        tmp_path,
        east_warm_start="ce",
        east_warm_start_epochs=1,
        eval_strategy="epoch",
        save_strategy="no",
        load_best_model_at_end=False,
        max_steps=12,
    )
    trainer.train()
    steps = [h["step"] for h in evaluations(trainer)]
    assert steps == sorted(set(steps)) == [4, 8, 12]  # 64 samples / batch 16 = 4 steps per epoch
    assert [h["east_stage"] for h in evaluations(trainer)][:2] == [-1, 0]


def test_the_default_across_stage_gain_is_two_validation_samples_worth(tmp_path):
    """A hard metric on a small validation set sets new bests of one sample's size by chance; each would reset the
    stage patience. By default a stage must beat the best so far by two validation samples' worth (2 / n): the
    noise-sized bests of the sequence below end the annealing, which with 0 runs on."""
    config = EASTConfig(output_dir=str(tmp_path), report_to=[])
    assert config.east_anneal_threshold is None
    assert anneal_threshold(config, 288) == pytest.approx(2 / 288)
    assert anneal_threshold(config, None) == 0.0  # size unknown (an iterable validation set)
    paper = EASTConfig(
        output_dir=str(tmp_path), report_to=[], east_warm_start="none", east_ce_weight=0, east_anneal_monitor="loss"
    )
    assert anneal_threshold(paper, 288) == 0.0  # a loss across stages: the paper's letter
    explicit = EASTConfig(output_dir=str(tmp_path), report_to=[], east_anneal_threshold=0.0)
    assert anneal_threshold(explicit, 288) == 0.0
    with pytest.raises(ValueError, match="east_anneal_threshold"):
        EASTConfig(output_dir=str(tmp_path), report_to=[], east_anneal_threshold=-0.01)

    one_image = 1 / 288  # macro F1 on a balanced validation set moves by about 1 / n per image
    stage_bests = [0.90, 0.90 + one_image, 0.90 + 1.5 * one_image, 0.90 + 1.9 * one_image, 0.95, 0.95]

    def stages(threshold):
        s = AnnealingSchedule(
            patience=1, stage_patience=3, decay=0.5, min_temperature=0.001, anneal_threshold=threshold
        )
        for k, best in enumerate(stage_bests):  # two evaluations per stage: a best, then a tie ends it (patience 1)
            if s.update(1.0, best, step=2 * k) is Decision.IMPROVED and s.update(1.0, best) is Decision.STOP:
                return s.stage, s.best_anneal
        return None, s.best_anneal

    assert stages(anneal_threshold(config, 288)) == (3, 0.90)  # three stages without a real gain: stop
    assert stages(0.0) == (None, 0.95)  # every new best resets the count: the annealing goes on

    # EASTTrainer resolves it from the evaluation set it is given (a mapping: the set the anneal monitor names)
    trainer = annealing_trainer(tmp_path / "a")
    assert annealer(trainer).schedule.anneal_threshold == pytest.approx(2 / 48)
    args = EASTConfig(output_dir=str(tmp_path / "b"), report_to=[], use_cpu=True, east_anneal_monitor="eval_val_fbeta")
    trainer = EASTTrainer(
        model=PlainClassifier(),
        args=args,
        train_dataset=blobs(64, 0),
        eval_dataset={"val": blobs(40, 1), "val_big": blobs(100, 2)},
        compute_metrics=hard_metrics,
    )
    assert annealer(trainer).schedule.anneal_threshold == pytest.approx(2 / 40)
    positional = EASTTrainer(
        PlainClassifier(), EASTConfig(output_dir=str(tmp_path / "c"), report_to=[]), None, blobs(64, 0), blobs(30, 1)
    )
    assert annealer(positional).schedule.anneal_threshold == pytest.approx(2 / 30)


class LossSpy(TrainerCallback):
    """Records, at every optimizer step, the stage and the cross-entropy weight of the loss in use."""

    def __init__(self):
        self.trainer, self.weights = None, []

    def on_pre_optimizer_step(self, args, state, control, **kwargs):
        loss = self.trainer._current_loss()
        self.weights.append((self.trainer.east_stage, getattr(loss, "weight", None)))


def test_trainer_anneals_the_cross_entropy_weight_stage_by_stage(tmp_path):
    spy = LossSpy()
    trainer = annealing_trainer(tmp_path, callbacks=[spy], east_ce_weight=2.0, east_ce_weight_decay=0.5, max_steps=120)
    spy.trainer = trainer
    trainer.train()
    seen = dict(spy.weights)
    assert len(seen) >= 3  # several stages ran
    assert all(weight == pytest.approx(2.0 * 0.5**stage) for stage, weight in seen.items())
    # the default: the annealed logit-adjusted cross-entropy for every class count; the baselines have none
    default = EASTConfig(output_dir=str(tmp_path), report_to=[])
    assert default.east_ce_weight is None and default.east_ce_loss is None
    assert (default.resolved_ce_weight, default.resolved_ce_loss) == (1.0, "la")
    paper = EASTConfig(output_dir=str(tmp_path), report_to=[], east_ce_weight=0, east_warm_start="none")
    assert paper.resolved_ce_weight == 0.0 and not needs_class_counts(paper)  # no cross-entropy trains: no priors
    baseline = EASTConfig(output_dir=str(tmp_path), report_to=[], east_loss="ce")
    assert (baseline.resolved_ce_weight, baseline.resolved_ce_loss, needs_class_counts(baseline)) == (
        0.0,
        "ce",
        False,
    )
    dice = EASTConfig(output_dir=str(tmp_path), report_to=[], east_loss="dice")
    assert (dice.resolved_ce_weight, dice.resolved_ce_loss) == (0.0, "ce")  # dice's warm start stays plain
    with pytest.raises(ValueError, match="east_ce_weight 0 for east_loss='ce'"):
        EASTConfig(output_dir=str(tmp_path), report_to=[], east_loss="ce", east_ce_weight=1.0)
    with pytest.raises(ValueError, match="east_ce_weight_decay in \\[0, 1\\]"):
        EASTConfig(output_dir=str(tmp_path), report_to=[], east_ce_weight_decay=2.0)


# ---- faults blamed on the right data ----
def test_inf_in_a_training_row_is_blamed_on_the_training_data_not_the_evaluation(tmp_path):
    """The README quick start with an inf in training row 5 (row 2 onwards escapes the first-batch check). With
    transformers' default logging (every 500 steps) the first evaluation comes before any training log, on weights the
    non-finite loss has already spoilt: the error names the training data and the step, not the evaluation inputs."""
    import datasets
    import numpy as np
    from sklearn.datasets import load_breast_cancer

    from east_hf import build_compute_metrics
    from east_hf.hf.models import TabularMLPConfig, TabularMLPForClassification

    X, y = load_breast_cancer(return_X_y=True)
    X = (X - X.mean(0)) / X.std(0)
    data = datasets.Dataset.from_dict({"input_features": X.astype("float32"), "labels": y}).train_test_split(
        0.25, seed=0
    )
    train = data["train"].to_dict()
    train["input_features"][5][3] = float("inf")
    train = datasets.Dataset.from_dict(train)
    assert np.isfinite(np.asarray(data["test"]["input_features"])).all()
    model = TabularMLPForClassification(TabularMLPConfig(num_features=30, num_labels=2))
    args = EASTConfig(
        output_dir=str(tmp_path),
        num_train_epochs=2,
        learning_rate=1e-3,
        per_device_train_batch_size=128,
        logging_strategy="steps",  # transformers' default: a training log every 500 steps, none before the evaluation
        use_cpu=True,
        report_to=[],
        disable_tqdm=True,
    )
    trainer = EASTTrainer(
        model=model,
        args=args,
        train_dataset=train,
        eval_dataset=data["test"],
        compute_metrics=build_compute_metrics(num_classes=2),
    )
    with pytest.raises(FloatingPointError) as error:
        trainer.train()
    message = str(error.value)
    assert re.fullmatch(
        r"Expected a finite training loss, got NaN or inf at step \d+: check the training data.*", message
    )
    assert "evaluation" not in message


class _IgnoredRows(TinyTabular):
    """A TinyTabular whose rows ``rows`` are labelled -100 (ignored)."""

    def __init__(self, rows: slice, **kwargs):
        super().__init__(**kwargs)
        self.y[rows] = -100


@pytest.mark.parametrize(
    "loss, annealing",
    [
        ("east", dict(east_warm_start="ce", east_warm_start_steps=4, east_ce_weight=1.0)),  # CE, then EAST + CE
        ("east", dict(east_warm_start="none", east_ce_weight=0.0)),
        ("ce", None),
        ("wce", None),
        ("dice", None),
    ],
)
def test_a_training_batch_whose_rows_are_all_ignored_contributes_nothing(tmp_path, loss, annealing):
    # 64 rows in order, 16 a batch: steps 2 and 6 see rows 16-31, all labelled -100.
    data = _IgnoredRows(slice(16, 32), n=64)
    more = dict(east_annealing=True, eval_strategy="steps", eval_steps=2, **annealing) if annealing else {}
    args = east_args(
        tmp_path, east_loss=loss, max_steps=8, logging_steps=1, train_sampling_strategy="sequential", **more
    )
    model = PlainClassifier()
    before = copy.deepcopy(model.state_dict())
    spy = LossSpy()
    evaluation = dict(eval_dataset=TinyTabular(32, seed=1), compute_metrics=hard_metrics) if annealing else {}
    trainer = EASTTrainer(model=model, args=args, train_dataset=data, callbacks=[spy], **evaluation)
    spy.trainer = trainer
    trainer.train()
    losses = {h["step"]: h["loss"] for h in trainer.state.log_history if "loss" in h}
    assert sorted(losses) == list(range(1, 9))
    assert losses[2] == losses[6] == 0.0
    assert all(losses[step] > 0 for step in (1, 3, 4, 5, 7, 8)), losses
    assert any(not torch.equal(before[k], v) for k, v in model.state_dict().items())  # it trained
    if annealing and annealing["east_warm_start"] == "ce":  # step 2 in the warm start, step 6 on EAST + CE
        assert spy.weights[1] == (-1, None) and spy.weights[5] == (0, 1.0), spy.weights


@pytest.mark.parametrize("loss", ["east", "ce", "dice"])
def test_an_evaluation_set_whose_rows_are_all_ignored_is_refused(tmp_path, loss):
    """A set without labels has no loss and no metric: refused, never an eval_loss of 0 (a perfect model) or NaN."""
    unlabelled = _IgnoredRows(slice(None), n=24)
    model = PlainClassifier()
    args = east_args(tmp_path, east_loss=loss)
    trainer = EASTTrainer(model=model, args=args, train_dataset=TinyTabular(), eval_dataset=unlabelled)
    expected = r"Expected labelled rows in the {} set, got none: every label is the ignore_index -100"
    with pytest.raises(ValueError, match=expected.format("eval")):
        trainer.evaluate()
    predicted = trainer.predict(unlabelled)  # placeholder labels: predictions without a loss
    assert predicted.predictions.shape == (24, 3) and "test_loss" not in predicted.metrics
    partly = _IgnoredRows(slice(0, 16), n=24)  # a batch of ignored rows, then one of labelled rows
    with torch.no_grad():
        labelled = trainer.east_loss(model(partly.x[16:]), partly.y[16:]).item()
    assert trainer.evaluate(partly)["eval_loss"] == pytest.approx(labelled, rel=1e-5)


# ---- class priors: streams, and counting without transforms ----
class _Stream(torch.utils.data.IterableDataset):
    """The rows of a map-style data set, in order, as a stream without a length (as ``streaming=True`` gives)."""

    def __init__(self, data):
        self.data = data

    def __iter__(self):
        return (self.data[i] for i in range(len(self.data)))


def test_la_on_an_iterable_dataset_with_given_priors_equals_the_map_style_run(tmp_path):
    """``east_class_priors`` makes a stream trainable with ``la``: the same rows in the same order give the same losses
    and the same final weights as the map-style run, which counts its own priors."""
    data = TinyTabular(32)
    counts = torch.bincount(data.y, minlength=3)
    priors = (counts / counts.sum()).tolist()  # probabilities, where the map-style run counts
    runs = {}
    for name, train, given in (("map", data, None), ("stream", _Stream(data), priors)):
        torch.manual_seed(0)
        model = PlainClassifier()
        before = copy.deepcopy(model.state_dict())
        args = east_args(
            tmp_path / name, east_loss="la", east_class_priors=given, max_steps=8, logging_steps=1,
            per_device_train_batch_size=8, train_sampling_strategy="sequential",  # the stream's order
        )  # fmt: skip
        trainer = EASTTrainer(model=model, args=args, train_dataset=train)
        trainer.train()
        assert any(not torch.equal(before[k], v) for k, v in model.state_dict().items())  # it trained
        losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
        runs[name] = (trainer.east_loss.logit_adjustment, losses, model.state_dict())
    (map_adjustment, map_losses, map_weights), (adjustment, losses, weights) = runs["map"], runs["stream"]
    torch.testing.assert_close(adjustment, map_adjustment)
    assert len(losses) == 8 and losses == pytest.approx(map_losses, rel=1e-6)
    for key, value in weights.items():
        torch.testing.assert_close(value, map_weights[key])


@pytest.mark.parametrize("overrides", [{"east_loss": "la"}, {"east_loss": "wce"}])
def test_a_prior_loss_on_an_iterable_dataset_without_priors_names_east_class_priors(tmp_path, overrides):
    args = east_args(tmp_path, **overrides)
    expected = (
        r"^Expected east_class_priors \(class counts or priors: a list, a \{class: count\} mapping or a \.json / "
        r"\.csv file\) for 'wce' / 'la' with a training set that cannot be counted, got a _Stream without a length$"
    )
    with pytest.raises(ValueError, match=expected):
        EASTTrainer(model=PlainClassifier(), args=args, train_dataset=_Stream(TinyTabular(16)))


def test_the_default_trains_on_an_iterable_dataset_with_and_without_priors(tmp_path, caplog):
    """The default (EAST + the annealed logit-adjusted cross-entropy, a 2-epoch warm start) on a stream: the warm
    start runs until its own early stopping (an epoch has no known length) and, without ``east_class_priors``, the
    cross-entropy is the plain one; each fallback says so in one warning. With priors the adjustment is theirs; with
    ``east_warm_start_steps`` the warm start has that length."""
    settings = dict(
        east_annealing=True, eval_strategy="steps", eval_steps=2, logging_steps=2, learning_rate=0.05,
        east_decay=0.5, east_patience=2, max_steps=16,
    )  # fmt: skip

    def stream_trainer(**overrides):
        torch.manual_seed(0)
        args = east_args(tmp_path / str(len(overrides)), **{**settings, **overrides})
        stream = _Stream(blobs(64, 0))
        return EASTTrainer(
            PlainClassifier(), args, train_dataset=stream, eval_dataset=blobs(48, 1), compute_metrics=hard_metrics
        )

    with caplog.at_level(logging.WARNING, logger="east_hf"):
        plain = stream_trainer(max_steps=60)
    warnings = [r.getMessage() for r in caplog.records]
    assert any(w.startswith("east_ce_loss='la' without class priors") for w in warnings), warnings
    assert any(w.startswith("east_warm_start_epochs=2 on a training set without a length") for w in warnings)
    assert plain.warm_start_loss.name == "ce" and plain.warm_start_loss.logit_adjustment is None
    assert annealer(plain).schedule.warm_start_epochs is None  # until its own early stopping
    before = {k: v.clone() for k, v in plain.model.state_dict().items()}
    plain.train()
    assert any(not torch.equal(before[k], v) for k, v in plain.model.state_dict().items())  # it trained
    assert {h["east_stage"] for h in evaluations(plain)} >= {-1, 0}  # the warm start, then EAST
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="east_hf"):
        given = stream_trainer(east_class_priors=[2, 1, 1], east_warm_start_steps=4)
    assert not [r for r in caplog.records if "without" in r.getMessage()]  # priors and a length: nothing to say
    torch.testing.assert_close(given.warm_start_loss.logit_adjustment, torch.tensor([0.5, 0.25, 0.25]).log())
    given.train()
    assert [h["east_stage"] for h in evaluations(given)][:3] == [-1, -1, 0]  # the warm start's 4 steps, then EAST


def test_counts_of_an_image_dataset_with_a_transform_read_the_label_column_only(tmp_path):
    """A ``datasets.Dataset`` with ``set_transform`` is counted from its label column: the transform (which would
    decode and augment every image) never runs, and a selection (an indices mapping) counts its own rows."""
    import datasets
    import numpy as np
    from PIL import Image

    from east_hf.hf.trainer import training_class_counts

    labels = [0, 1, 1, 2, 0, 1, 1, 1]
    images = [Image.fromarray(np.full((16, 16, 3), 30 * k, dtype=np.uint8)) for k in range(len(labels))]
    features = datasets.Features(
        {"image": datasets.Image(), "label": datasets.ClassLabel(names=["cat", "dog", "frog"])}
    )
    dataset = datasets.Dataset.from_dict({"image": images, "label": labels}, features=features)

    def transform(batch):
        raise AssertionError("the transform ran while counting classes")

    dataset.set_transform(transform)
    assert training_class_counts(dataset, 3) == [2, 5, 1]
    assert training_class_counts(dataset.select([0, 3, 4]), 3) == [2, 0, 1]  # a selection's own rows
    trainer = EASTTrainer(model=tiny_vit(3), args=east_args(tmp_path, east_loss="wce"), train_dataset=dataset)
    torch.testing.assert_close(trainer.east_loss.class_weight, torch.tensor([8 / 6, 8 / 15, 8 / 3]))


# ---- callbacks users add by habit, and what a baseline's logs carry ----
def test_an_early_stopping_callback_beside_the_annealing_is_refused_in_one_line(tmp_path):
    """transformers' EarlyStoppingCallback would end training inside stage 0 (its patience on metric_for_best_model),
    before the annealing's own stopping criterion: refused in __init__ (an instance or the class) and in add_callback,
    naming EAST's early stopping."""
    message = (
        r"^Expected no EarlyStoppingCallback with temperature annealing \(EAST's early stopping is east_patience within "
        r"a stage and east_stage_patience across stages\), got EarlyStoppingCallback; remove it, or set "
        r"east_annealing=False to make it the only early stopping$"
    )
    for callback in (EarlyStoppingCallback(2), EarlyStoppingCallback):
        with pytest.raises(ValueError, match=message):
            annealing_trainer(tmp_path, callbacks=[callback])
    trainer = annealing_trainer(tmp_path)
    with pytest.raises(ValueError, match=message):
        trainer.add_callback(EarlyStoppingCallback(2))
    assert not any(isinstance(c, EarlyStoppingCallback) for c in trainer.callback_handler.callbacks)
    trainer.train()  # the annealing alone runs through its stages to its own stop
    schedule = annealer(trainer).schedule
    assert schedule.finished and schedule.stage >= 2 and trainer.state.global_step < trainer.args.max_steps


def test_an_early_stopping_callback_without_annealing_is_the_runs_early_stopping(tmp_path):
    trainer = annealing_trainer(tmp_path, callbacks=[EarlyStoppingCallback(2)], east_annealing=False)
    assert trainer.annealing is None
    trainer.train()
    assert trainer.state.global_step < trainer.args.max_steps  # EarlyStoppingCallback ended it


@pytest.mark.parametrize("loss", ["ce", "la", "dice"])
def test_baseline_logs_carry_no_temperature_and_binary_runs_report_precision_once(tmp_path, loss):
    """A baseline has no temperature: no east_temperature in its logs, and east_stage only where a warm start makes
    stages (Dice's is stage -1). A binary run reports precision, recall and F-beta once, under the averaged keys the
    model card reads (not again under the positive class's name)."""
    from east_hf.hf.metrics import build_compute_metrics

    torch.manual_seed(0)
    args = east_args(
        tmp_path, east_loss=loss, east_average="binary", east_annealing=True, eval_strategy="steps", eval_steps=2,
        logging_steps=2, max_steps=8, east_warm_start_steps=2,
    )  # fmt: skip
    trainer = EASTTrainer(
        model=PlainClassifier(num_classes=2),
        args=args,
        train_dataset=TinyTabular(64, num_classes=2),
        eval_dataset=TinyTabular(32, num_classes=2, seed=1),
        compute_metrics=build_compute_metrics(2, average="binary", id2label={0: "negative", 1: "positive"}),
    )
    trainer.train()
    logs = trainer.state.log_history
    assert logs and not any("east_temperature" in h for h in logs)
    stages = [h.get("east_stage") for h in evaluations(trainer)]
    assert stages == ([-1, 0, 0, 0] if loss == "dice" else [None] * 4)
    keys = set(evaluations(trainer)[0])
    assert {"eval_fbeta", "eval_precision", "eval_recall"} <= keys
    assert not [k for k in keys if k.startswith(("eval_precision_", "eval_recall_", "eval_fbeta_"))]


# ---- evaluation from per-batch counts: the metrics of the full gather, without keeping any logit ----
_TIMING = ("eval_runtime", "eval_samples_per_second", "eval_steps_per_second", "eval_model_preparation_time", "epoch")


def _full_gather_metrics(compute_metrics):
    """A plain-function ``compute_metrics``: the Trainer gathers every logit and calls it once, and it scores the
    (C, C) confusion matrix with the core (the evaluation path that keeps all logits)."""

    def score(pred):
        confmat = compute_metrics.confusion_matrix(pred.predictions, pred.label_ids)
        return compute_metrics.from_confusion_matrix(confmat)

    return score


def _two_trainers(tmp_path, loss, num_classes, average, **more):
    """The same model and data twice: east_hf's ComputeMetrics (scored from counts) and the full gather."""
    from east_hf.hf.metrics import build_compute_metrics

    beta = 0.5 if average == "micro" else [1.0] * (num_classes - 1) + [2.0]
    args = east_args(tmp_path, east_loss=loss, east_average=average, east_beta=beta, per_device_eval_batch_size=8)
    torch.manual_seed(0)
    model = PlainClassifier(num_classes=num_classes)
    data = _IgnoredRows(slice(5, 8), n=41, num_classes=num_classes, seed=3, noise=2.0)  # uneven last batch
    trainers = []
    for counted in (True, False):
        metrics = build_compute_metrics(num_classes, beta=beta, average=average, report_classes="all")
        trainers.append(
            EASTTrainer(
                model=model,
                args=args,
                train_dataset=TinyTabular(num_classes=num_classes),
                eval_dataset=data,
                compute_metrics=metrics if counted else _full_gather_metrics(metrics),
                **more,
            )
        )
    return trainers


@pytest.mark.parametrize(
    "loss, num_classes, average",
    [("east", 3, "macro"), ("east", 3, "weighted"), ("ce", 3, "micro"), ("dice", 3, "macro"), ("east", 2, "binary")],
)
def test_evaluation_from_counts_reports_every_key_of_the_full_gather_exactly(tmp_path, loss, num_classes, average):
    counted, gathered = _two_trainers(tmp_path, loss, num_classes, average)
    new, old = counted.evaluate(), gathered.evaluate()
    for key in _TIMING:
        new.pop(key, None), old.pop(key, None)
    assert new == old and list(new) == list(old)  # every value exactly, in the Trainer's order
    per_class = {f"eval_{m}_{k}" for m in ("precision", "recall", "fbeta") for k in range(num_classes)}
    expected = {"eval_loss", "eval_fbeta", "eval_mcc", "eval_accuracy", counted.args.east_anneal_key} | per_class
    assert expected <= set(new)


def test_evaluation_from_counts_keeps_no_logits_and_predict_still_returns_them(tmp_path):
    counted, gathered = _two_trainers(tmp_path, "east", 3, "macro")
    seen = {}

    def spy(trainer, name):
        gather = trainer.gather_function

        def counting(tensors):
            seen[name] = seen.get(name, 0) + 1
            return gather(tensors)

        trainer.gather_function = counting

    for trainer, name in ((counted, "counted"), (gathered, "gathered")):
        spy(trainer, name)
        trainer.evaluate()
    assert "counted" not in seen and seen["gathered"] > 0  # nothing is gathered: no logits, no batch losses
    metrics = counted.evaluate()
    predicted = counted.predict(counted.eval_dataset, metric_key_prefix="eval")
    assert predicted.predictions.shape == (41, 3) and predicted.label_ids.shape == (41,)
    assert {k: v for k, v in predicted.metrics.items() if k not in _TIMING} == {
        k: v for k, v in metrics.items() if k.startswith("eval_") and k not in _TIMING
    }


def test_evaluation_from_counts_applies_preprocess_logits_for_metrics(tmp_path):
    def argmax(logits, labels):
        return logits.argmax(dim=1)

    counted, gathered = _two_trainers(tmp_path, "ce", 3, "macro", preprocess_logits_for_metrics=argmax)
    new, old = counted.evaluate(), gathered.evaluate()
    assert {k: v for k, v in new.items() if k not in _TIMING} == {k: v for k, v in old.items() if k not in _TIMING}


_TWO_PROCESS_EVALUATION = """
import json, sys
import torch
from helpers import PlainClassifier, TinyTabular, east_args
from east_hf import EASTTrainer
from east_hf.hf.metrics import build_compute_metrics

out, loss = sys.argv[1], sys.argv[2]
torch.manual_seed(0)
model = PlainClassifier()
data = TinyTabular(29, seed=3, noise=2.0)  # 2 processes x 4 rows a batch: the last batch holds 5 of 8
data.y[[2, 11]] = -100
args = east_args(out, east_loss=loss, per_device_eval_batch_size=4)
metrics = build_compute_metrics(3, report_classes="all")
def full_gather(pred):
    return metrics.from_confusion_matrix(metrics.confusion_matrix(pred.predictions, pred.label_ids))
results, gathers = {}, {}
for name, compute in (("counted", metrics), ("gathered", full_gather)):
    trainer = EASTTrainer(model=model, args=args, train_dataset=TinyTabular(), eval_dataset=data, compute_metrics=compute)
    gather, sizes = trainer.accelerator.gather, []
    trainer.accelerator.gather = lambda t: sizes.append(t.numel()) or gather(t)
    results[name] = {k: v for k, v in trainer.evaluate().items() if not k.endswith(("_time", "_runtime", "_second"))}
    gathers[name] = max(sizes, default=0)  # the largest tensor gathered
predicted = trainer.predict(data)
results["world_size"] = trainer.accelerator.num_processes
results["predicted_rows"] = len(predicted.predictions)
results["gathers"] = gathers
if trainer.is_world_process_zero():
    json.dump(results, open(f"{out}/result.json", "w"))
import torch.distributed as dist
dist.destroy_process_group()
"""


@pytest.mark.parametrize("loss", ["east", "ce"])
def test_two_process_evaluation_from_counts_equals_the_full_gather(tmp_path, loss):
    """Two CPU processes over an uneven evaluation set: the repeated rows of the last batch are counted once, as
    gather_for_metrics drops them; every hard metric equals the full gather's exactly, eval_loss up to float32
    summation order; and no logit is gathered."""
    import os
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    here = Path(__file__).parent
    torchrun = shutil.which("torchrun", path=os.path.dirname(sys.executable)) or shutil.which("torchrun")
    script = tmp_path / "evaluate_two.py"
    script.write_text(_TWO_PROCESS_EVALUATION)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join([str(here), str(here.parent)])}
    proc = subprocess.run(
        [torchrun, "--standalone", "--nproc_per_node", "2", str(script), str(tmp_path), loss],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads((tmp_path / "result.json").read_text())
    assert result["world_size"] == 2 and result["predicted_rows"] == 29
    new, old = result["counted"], result["gathered"]
    assert new.pop("eval_loss") == pytest.approx(old.pop("eval_loss"), rel=1e-6)
    assert new == old
    assert result["gathers"]["counted"] <= 1  # a flag at most (a non-finite training step), never a logit
    assert result["gathers"]["gathered"] >= 4 * 3  # a batch of logits


@pytest.mark.parametrize("floor", [1.0, 0.0])
def test_a_precision_leaning_beta_is_tuned_at_the_beta_floor(tmp_path, floor):
    """F0.25 on a small validation set: the rule is tuned at max(0.25, east_beta_floor), as the surrogate trains;
    with the floor at 0, at 0.25 itself. The offsets equal tune_logit_offsets' on the same validation logits."""
    from east_hf.core.decision import tune_logit_offsets

    torch.manual_seed(0)
    model = tiny_vit(num_labels=2)
    args = east_args(tmp_path, east_average="binary", east_beta=0.25, east_beta_floor=floor, max_steps=4)
    valid = TinyImages(40, num_classes=2, seed=1)
    trainer = EASTTrainer(model=model, args=args, train_dataset=TinyImages(32, num_classes=2), eval_dataset=valid)
    trainer.train()
    logits = torch.as_tensor(trainer.predict(valid).predictions).float()
    labels = torch.as_tensor([int(valid[i]["labels"]) for i in range(len(valid))])
    rule = trainer.tune_decision_rule()
    assert trainer.decision_beta == max(0.25, floor)
    expected = tune_logit_offsets(logits, labels, "fbeta", beta=max(0.25, floor), average="binary", pos_label=1)
    torch.testing.assert_close(rule.offsets, expected.offsets)
    assert rule.score == pytest.approx(expected.score)
