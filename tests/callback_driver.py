"""A fake training run that drives a TemperatureAnnealingCallback through its events, step by step."""

from __future__ import annotations

from types import SimpleNamespace

import torch
from torch import nn
from transformers import TrainerControl, TrainerState


def fake_args(tmp_path=None, **overrides):
    args = dict(
        eval_strategy="steps",
        save_strategy="steps",
        output_dir=str(tmp_path or "unused"),
        load_best_model_at_end=True,
        metric_for_best_model="fbeta",
        restore_callback_states_from_checkpoint=True,
    )
    args.update(overrides)
    return SimpleNamespace(**args)


class Driver:
    """One fake training run: a Linear model whose weights are set to the step number before each evaluation."""

    def __init__(self, callback, args=None, step=0):
        self.callback, self.args = callback, args or fake_args()
        self.model = nn.Linear(2, 2)
        self.state, self.control = TrainerState(global_step=step), TrainerControl()

    def begin(self):
        self.callback.on_train_begin(self.args, self.state, self.control, model=self.model)
        return self

    def evaluate(self, loss, f1, weights=None):
        """One training step, then an evaluation; returns the temperature the next step trains at."""
        self.callback.on_step_begin(self.args, self.state, self.control, model=self.model)
        self.state.global_step += 1
        with torch.no_grad():
            self.model.weight.fill_(self.state.global_step if weights is None else weights)
        self.callback.on_step_end(self.args, self.state, self.control, model=self.model)
        metrics = {"eval_loss": loss, "eval_fbeta": f1, "eval_accuracy": 0.0}
        self.callback.on_evaluate(self.args, self.state, self.control, metrics=metrics, model=self.model)
        return self.callback.schedule.temperature  # what EASTTrainer reads before the next step

    def run(self, values):
        temperatures = []
        for loss, f1 in values:
            temperatures.append(self.evaluate(loss, f1))
            if self.control.should_training_stop:
                break
        return temperatures
