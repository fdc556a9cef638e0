"""The head input's spread (east_hf.hf.training.collapse) and the restart of a warm start that lost its input."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from accelerate import Accelerator
from callback_driver import Driver, fake_args
from torch import nn
from torch.utils.data import DataLoader

from east_hf.hf.training.callbacks import TemperatureAnnealingCallback
from east_hf.hf.training.collapse import COLLAPSE_RATIO, head_input_spread


class Net(nn.Module):
    """A body, then a classifier head (transformers' ``classifier`` attribute): logits of ``x``."""

    def __init__(self, conv: bool = False):
        super().__init__()
        self.conv = conv
        self.body = nn.Conv2d(2, 4, 3, padding=1) if conv else nn.Linear(3, 4)
        self.classifier = nn.Conv2d(4, 3, 1) if conv else nn.Linear(4, 3)
        self.dropout = nn.Dropout(0.5)

    def features(self, x):
        return self.dropout(torch.tanh(self.body(x)))

    def forward(self, x, labels=None):
        logits = self.classifier(self.features(x))
        return logits.mean((2, 3)) if self.conv else logits


def _loader(x: torch.Tensor, batch_size: int) -> DataLoader:
    rows = [{"x": x[i], "labels": torch.tensor(0)} for i in range(len(x))]
    return DataLoader(rows, batch_size=batch_size)


@pytest.mark.parametrize("conv", [False, True], ids=["linear head", "1x1 conv head"])
def test_head_input_spread_is_the_mean_feature_std_of_the_leading_rows(conv):
    torch.manual_seed(0)
    model = Net(conv).train()
    x = torch.randn(50, 2, 5, 5) if conv else torch.randn(50, 3)
    spread = head_input_spread(model, _loader(x, 8), lambda b: b, Accelerator(cpu=True), rows=20)
    assert model.training  # the mode it had
    with torch.no_grad():  # the reference: 3 batches of 8 = the first 24 rows, in eval mode (no dropout)
        model.eval()
        features = model.features(x[:24])
        features = features.mean((2, 3)) if conv else features
    expected = np.std(features.double().numpy(), axis=0, ddof=1).mean()
    assert spread == pytest.approx(expected, rel=1e-9)


def test_head_input_spread_is_none_without_a_head_or_rows():
    loader = _loader(torch.randn(4, 3), 2)
    assert head_input_spread(nn.Sequential(nn.Tanh()), loader, lambda b: b, Accelerator(cpu=True)) is None
    assert head_input_spread(Net(), _loader(torch.randn(1, 3), 1), lambda b: b, Accelerator(cpu=True)) is None


def _warm_start_callback():
    """A warm start of 2 steps under ce_fallback, whose untrained network's head input spread is 1."""
    callback = TemperatureAnnealingCallback(
        decay=0.5, patience=1, stage_patience=2, warm_start="ce", warm_start_steps=2, ce_fallback=True
    )
    callback.note_initial_spread(1.0)
    return callback


@pytest.mark.parametrize(
    "notes, restarts",
    [
        ([(True, 0.5), (True, 0.1)], True),  # one class, and a head input that lost its spread: a collapse
        ([(True, 0.1), (True, 0.6)], True),  # the spread jitters up while still one class: the lowest counts
        ([(True, 1.5), (True, 1.2)], False),  # one class with the spread kept: early training
        ([(True, 0.1), (False, 0.1)], False),  # classes told apart where the warm start ends
        ([(False, 0.1), (True, 0.5)], False),  # low only where classes were told apart
        ([(True, None), (True, None)], False),  # not measured
    ],
    ids=["collapsed", "jittered up", "early training", "told apart at the end", "low when told apart", "unmeasured"],
)
def test_a_warm_start_that_lost_its_input_restarts_from_the_initial_weights(notes, restarts):
    callback = _warm_start_callback()
    driver = Driver(callback).begin()
    initial = driver.model.weight.detach().clone()
    optimizer = torch.optim.Adam(driver.model.parameters())
    driver.model.weight.grad = torch.ones_like(initial)
    optimizer.step()  # Adam's moments exist
    for (one_class, spread), loss in zip(notes, (1.0, 0.9)):  # step 2 ends the warm start
        callback.note_evaluation(predicted_one_class=one_class, head_spread=spread)
        driver.evaluate(loss, 0.2)
    assert callback.lost_input is (restarts or notes == [(True, 0.1), (False, 0.1)])
    assert callback.schedule.fell_back is restarts and callback.schedule.in_warm_start is restarts
    assert callback.restart_pending is restarts
    state = callback.state()["attributes"]
    assert state["initial_spread"] == 1.0 and state["restart_pending"] is restarts
    callback.on_step_begin(driver.args, driver.state, driver.control, model=driver.model, optimizer=optimizer)
    if restarts:  # the next step starts from the initial weights with an empty optimiser state
        assert torch.equal(driver.model.weight, initial) and not optimizer.state
    else:
        assert torch.equal(driver.model.weight, torch.full_like(initial, 2.0)) and optimizer.state
    assert not callback.restart_pending and not callback.watches_collapse


def test_the_ratio_tells_the_traced_collapse_from_early_training():
    """The spreads measured by benchmarks/collapse_trace.py: text_tiny on bird_strikes after its first epoch
    (0.14x and 0.10x the untrained network's) and on the text demo set (1.5x)."""
    assert 0.14 < COLLAPSE_RATIO < 1.5


def test_a_warm_start_not_watched_keeps_no_initial_weights():
    callback = TemperatureAnnealingCallback(decay=0.5, patience=1, warm_start="ce", warm_start_steps=2)
    Driver(callback).begin()
    assert not callback.watches_collapse and callback.checkpoint_files == []
    watched = _warm_start_callback()
    driver = Driver(watched).begin()
    assert watched.checkpoint_files == ["east_initial.pt"]
    driver.evaluate(1.0, 0.2)
    driver.evaluate(0.9, 0.2)  # the warm start ended without a collapse: the copy is dropped
    assert watched.checkpoint_files == [] and not watched.schedule.fell_back


def test_a_resumed_warm_start_restarts_from_the_initial_weights_its_checkpoint_carries(tmp_path):
    """A checkpoint inside the warm start carries the initial weights (east_initial.pt) and the spreads: a run resumed
    from it restarts from those weights, not the checkpoint's."""
    first = Driver(_warm_start_callback(), args=fake_args(tmp_path)).begin()
    initial = first.model.weight.detach().clone()
    first.callback.note_evaluation(predicted_one_class=True, head_spread=0.1)
    first.evaluate(1.0, 0.2)  # step 1: a checkpoint
    (tmp_path / "checkpoint-1").mkdir()
    first.callback.on_save(first.args, first.state, first.control)
    assert (tmp_path / "checkpoint-1" / "east_initial.pt").is_file()
    state = json.loads(json.dumps(first.callback.state()))
    fresh = TemperatureAnnealingCallback(**state["args"])
    for name, value in state["attributes"].items():  # as a resumed Trainer sets them
        setattr(fresh, name, value)
    second = Driver(fresh, args=first.args, step=1)
    with torch.no_grad():
        second.model.weight.fill_(1.0)  # the checkpoint's weights
    second.begin()
    fresh.note_evaluation(predicted_one_class=True, head_spread=0.6)
    second.evaluate(0.9, 0.2)  # step 2 ends the warm start
    assert fresh.schedule.fell_back and fresh.lowest_spread == 0.1
    second.callback.on_step_begin(second.args, second.state, second.control, model=second.model)
    assert torch.equal(second.model.weight, initial)
