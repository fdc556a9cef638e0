"""EASTTrainer: learning, whole-set eval_loss, gradient accumulation, mixed precision, bad input, the model families,
saving, and the decision rule it tunes."""

import copy

import pytest
import torch
from helpers import (
    PlainClassifier,
    TinyImages,
    TinyTabular,
    east_args,
    tiny_timm,
    tiny_vit,
)

import east_hf
from east_hf import EASTTrainer

pytestmark = pytest.mark.usefixtures("one_thread")


def _surrogate(model, dataset, loss_fn, key="pixel_values"):
    model.eval()
    with torch.no_grad():
        x = torch.stack([dataset[i][key] for i in range(len(dataset))])
        y = torch.stack([dataset[i]["labels"] for i in range(len(dataset))])
        out = model(**{key: x})
        return loss_fn(east_hf.hf.training.trainer.logits_of(out), y).item()


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
    from east_hf.core.loss_registry import build_loss
    from east_hf.hf.training.trainer import training_class_counts

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


@pytest.mark.parametrize("floor", [1.0, 0.0])
def test_a_precision_leaning_beta_is_tuned_at_the_beta_floor(tmp_path, floor):
    """F0.25 on a small validation set: the rule is tuned at max(0.25, east_beta_floor), as the surrogate trains;
    with the floor at 0, at 0.25 itself. The offsets equal tune_logit_offsets' on the same validation logits."""
    from east_hf.core.decision.rule import tune_logit_offsets

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


# ---- checkpoints whose weight names differ from the model's (transformers' conversion mapping, e.g. ViT) ----
def _same_weights(model, checkpoint) -> bool:
    saved = type(model).from_pretrained(str(checkpoint)).state_dict()
    return all(torch.equal(value, saved[name]) for name, value in model.state_dict().items())


def test_the_best_model_and_a_resume_load_every_weight_of_a_renamed_checkpoint(tmp_path):
    from safetensors import safe_open

    from east_hf.hf.training.resume import load_renamed_weights

    args = dict(
        max_steps=6, eval_strategy="steps", eval_steps=2, save_strategy="steps", save_steps=2, learning_rate=5e-2,
        load_best_model_at_end=True, metric_for_best_model="eval_loss", greater_is_better=False,
    )  # fmt: skip
    torch.manual_seed(0)
    model = tiny_vit()
    trainer = EASTTrainer(
        model, east_args(tmp_path / "a", **args), train_dataset=TinyImages(48), eval_dataset=TinyImages(24, seed=1)
    )
    trainer.train()
    best = trainer.state.best_model_checkpoint
    with safe_open(f"{best}/model.safetensors", "pt") as f:
        assert set(f.keys()) != set(model.state_dict())  # the case: save_pretrained renames ViT's weights
    assert best.endswith("checkpoint-2") or best.endswith("checkpoint-4") or best.endswith("checkpoint-6")
    assert _same_weights(model, best)  # every weight, not only the names the Trainer could match

    torch.manual_seed(1)
    fresh, step = tiny_vit(), int(best.rsplit("-", 1)[1])
    resumed = EASTTrainer(
        fresh, east_args(tmp_path / "a", **{**args, "max_steps": step}), train_dataset=TinyImages(48),
        eval_dataset=TinyImages(24, seed=1),
    )  # fmt: skip
    resumed.train(resume_from_checkpoint=best)  # at its last step: the Trainer loads it and stops
    assert _same_weights(fresh, best)
    assert not load_renamed_weights(PlainClassifier(), best)  # no from_pretrained: nothing to do


@pytest.mark.parametrize("loss", ["east", "ldam"])
def test_the_losses_buffers_follow_the_logits_device(tmp_path, loss):
    """Class priors, logit adjustments and margins are buffers made on the CPU; on an accelerator the logits are not.
    The trainer moves every loss of the run (warm start, EAST, the mix) to the device of the logits it scores."""
    from helpers import annealing_trainer

    overrides = {"east_warm_start": "ce", "east_ce_loss": "la", "east_ce_weight": 0.5} if loss == "east" else {}
    trainer = annealing_trainer(tmp_path, east_loss=loss, **overrides)
    losses = [m for m in (trainer.east_loss, trainer.warm_start_loss, trainer._mixed_loss) if m is not None]
    buffers = [b for m in losses for b in m.buffers() if b is not None]
    assert buffers and all(b.device.type == "cpu" for b in buffers)  # priors / margins, made from the label counts
    trainer._current_loss(torch.zeros(2, 3))
    assert all(b.device.type == "cpu" for m in losses for b in m.buffers() if b is not None)
    trainer._current_loss(torch.zeros(2, 3, device="meta"))  # stands in for an accelerator: a device of its own
    assert all(b.device.type == "meta" for m in losses for b in m.buffers() if b is not None)
