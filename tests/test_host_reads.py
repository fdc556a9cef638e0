"""A training step reads nothing from the device: no ``.item()``, ``bool(tensor)``, ``int(tensor)``, ``float(tensor)``
or ``.tolist()`` in ``EASTTrainer.compute_loss`` and its backward, once past the first step (which builds the cached
constants), for EAST alone and for EAST plus a logit-adjusted cross-entropy. On an accelerator each such read would
wait for the device to finish the step's queued work."""

from __future__ import annotations

import traceback

import pytest
import torch
from helpers import PlainClassifier, TinyTabular, annealing_trainer, east_args

pytestmark = pytest.mark.usefixtures("one_thread")

READS = ("item", "tolist", "__bool__", "__int__", "__float__", "__index__", "cpu", "numpy")


class HostReads:
    """Counts the reads of tensor values on the host while active, each with the line that made it."""

    def __init__(self, monkeypatch):
        self.calls: list[str] = []
        for name in READS:
            original = getattr(torch.Tensor, name)
            monkeypatch.setattr(torch.Tensor, name, self._counting(name, original))
        self.active = False

    def _counting(self, name, original):
        def read(tensor, *args, **kwargs):
            if self.active:
                frame = traceback.extract_stack(limit=3)[0]
                self.calls.append(f"{name} at {frame.filename}:{frame.lineno}")
            return original(tensor, *args, **kwargs)

        return read


def _batch(data, start, size=16):
    return {"input_values": data.x[start : start + size], "labels": data.y[start : start + size]}


def _east_alone(tmp_path):
    from east_hf.hf.training.trainer import EASTTrainer

    data = TinyTabular(64)
    return EASTTrainer(model=PlainClassifier(), args=east_args(tmp_path), train_dataset=data), data


def _la_mix(tmp_path):
    trainer = annealing_trainer(tmp_path, east_ce_weight=1.0, east_ce_loss="la")
    return trainer, trainer.train_dataset


@pytest.mark.parametrize("setting", ["east", "la_mix"])
def test_a_steady_training_step_reads_nothing_from_the_device(tmp_path, monkeypatch, setting):
    trainer, data = (_east_alone if setting == "east" else _la_mix)(tmp_path)
    model = trainer.model.train()
    expected = "EASTLoss" if setting == "east" else "MixedSetLoss"
    assert type(trainer._current_loss()).__name__ == expected
    reads = HostReads(monkeypatch)
    for step, start in enumerate((0, 16, 32)):  # a warm-up step, then two steady ones
        reads.active = step > 0
        loss = trainer.compute_loss(model, _batch(data, start))
        loss.backward()
        reads.active = False
    assert reads.calls == []
    # the Trainer's own step around it (compute_loss, the accumulation scaling, accelerator.backward) reads nothing
    trainer.create_optimizer_and_scheduler(num_training_steps=10)
    trainer.current_gradient_accumulation_steps = 1  # what the training loop sets before its steps
    reads.active = True
    trainer.training_step(model, _batch(data, 48))
    reads.active = False
    assert reads.calls == []
    # the steps did train on something: a finite loss and a gradient
    assert torch.isfinite(loss.detach()).all() and model.net[0].weight.grad.abs().sum() > 0
    # and the count sees reads: the checked statistics (outside training) read the labels' range
    reads.active = True
    trainer._current_loss().statistics(model(data.x[:16]), data.y[:16])
    reads.active = False
    assert reads.calls and all(call.startswith("tolist") for call in reads.calls)


def test_a_label_out_of_range_in_a_training_step_raises_where_the_trainer_next_reads(tmp_path):
    """The step drops the faulty row without a host read; the next synchronisation (a log, an evaluation, the end
    of training) raises the usual one-line error, naming the label."""
    trainer, data = _la_mix(tmp_path)
    model = trainer.model.train()
    batch = _batch(data, 0)
    batch["labels"] = batch["labels"].clone()
    batch["labels"][3] = 7
    loss = trainer.compute_loss(model, batch)  # no error yet: the check waits for the device
    loss.backward()
    assert torch.isfinite(loss.detach())
    with pytest.raises(ValueError, match=r"Expected labels in \[0, 2\] \(or ignore_index=-100\), got 7"):
        trainer._nonfinite.raise_if_flagged()


def test_ignored_rows_in_a_training_step_equal_the_step_without_them(tmp_path):
    """Rows labelled -100 stay in the batch at weight 0 (no size depends on a value): the loss and the gradient
    equal those of the batch without them, as the checked path computes it."""
    trainer, data = _la_mix(tmp_path)
    model = trainer.model.train()
    batch = _batch(data, 0)
    labels = batch["labels"].clone()
    labels[[2, 9]] = -100
    kept = labels != -100
    grads = []
    for inputs in ({"input_values": batch["input_values"], "labels": labels},
                   {"input_values": batch["input_values"][kept], "labels": labels[kept]}):  # fmt: skip
        loss = trainer.compute_loss(model, inputs)
        grads.append((loss.detach(), torch.autograd.grad(loss, model.net[0].weight)[0]))
    torch.testing.assert_close(grads[0][0], grads[1][0], rtol=1e-5, atol=1e-7)
    torch.testing.assert_close(grads[0][1], grads[1][1], rtol=1e-4, atol=1e-7)
    trainer._nonfinite.raise_if_flagged()  # -100 is no fault
